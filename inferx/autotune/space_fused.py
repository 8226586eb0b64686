"""Schedule spaces of the fused decode kernels (see ``space`` for what a space is): ``MlpSpace``
(the fused decode MLP: BI, BK, BN, warps, stages, with BM the bucket's rows) and
``AttentionOSpace`` (the fused decode attention and o projection: keys a step, output tile width,
tiles per program, warps, stages), with the geometry their constraints and cost models share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from inferx.autotune.database import ScheduleError, attention_o_schedule, mlp_schedule
from inferx.autotune.space import H200, Hopper, Knob, _p2, _WholeSchedule
from inferx.autotune.task import AnyTask, AttentionOTask, MlpTask
from inferx.compiler.codegen.gemm import GEMV_MAX_ROWS, HOPPER_SMS

# --- the fused decode MLP ------------------------------------------------------------------------


MLP_KNOBS: tuple[Knob, ...] = (
    Knob("bi", (64, 16, 32, 128, 256)),
    Knob("bk", (256, 32, 64, 128, 512)),
    Knob("bn", (256, 32, 64, 128, 512)),
    Knob("num_warps", (16, 4, 8)),
    Knob("num_stages", (2, 1, 3)),
    Knob("prefetch", (1, 0)),
    Knob("dot", (0, 1)),
    Knob("defer", (0, 1)),
)
# Weight values per thread of one tile (two BI x BK tiles of W1 per step, one BN x BI of W2, each
# over BM rows; twice that with prefetch, the next step's tiles held beside) before the products
# spill: ptxas for sm_90 (the 1B shape's MLP) held 128 in 94-155 registers on 8 and 16 warps,
# without spills or with at most 88 bytes of them (BI 32 with BK 512, BI 128 with BK 128, on 16
# warps), and spilled 80-1000 bytes at 256.
MLP_VALUES_PER_THREAD = 128
# The same limit for the fused attention and o projection's tiles (set before prefetch, at what
# ptxas held without spills for the MLP then).
ATTENTION_O_VALUES_PER_THREAD = 64
# Programs per row block past which the partial sums' atomics (N per row per program) outweigh
# the bandwidth more programs add: two waves of 132.
MLP_MAX_PROGRAMS = 2 * HOPPER_SMS


def mlp_bm(task: MlpTask) -> int:
    """Rows per program: all of the bucket's (a power of two up to 8)."""
    return min(GEMV_MAX_ROWS, 1 << max(0, (task.rows - 1).bit_length()))


def mlp_programs(task: MlpTask, s: Mapping[str, int]) -> int:
    return math.ceil(task.rows / s["bm"]) * math.ceil(task.i / s["bi"])


def mlp_values_per_thread(s: Mapping[str, int]) -> float:
    """Weight values (times rows) each thread holds in the larger of the two loops' tiles (both
    steps' with prefetch; with defer, the first loop's sums of products besides: at 16 warps
    ptxas held 128 of the two without spills, 124-128 registers, and spilled at 192); the dot
    form stages its tiles in shared memory instead (``mlp_smem_bytes``)."""
    if s.get("dot", 0):
        return 0.0
    tiles = 2 if s.get("prefetch", 0) else 1
    held = tiles * s["bm"] * max(2 * s["bi"] * s["bk"], s["bn"] * s["bi"])
    if s.get("defer", 0):  # and the first loop's two [BI, BK] fp32 sums of products
        held += 2 * s["bi"] * s["bk"]
    return held / (32 * s["num_warps"])


def mlp_smem_bytes(task: MlpTask, s: Mapping[str, int]) -> int:
    """Shared memory of the dot form: stages - 1 buffers of the larger loop's bf16 tiles (16 rows of
    x and two BK x BI tiles of W1; a BI x BN tile of W2), as Triton 3.6 allocated them for sm_90
    (the 1B shape at BI 32-128, BK = BN 64-256, 2-4 stages); 0 without dot."""
    if not s.get("dot", 0):
        return 0
    first = (max(16, s["bm"]) + 2 * s["bi"]) * s["bk"]
    return 2 * max(1, s["num_stages"] - 1) * max(first, s["bi"] * s["bn"])


@dataclass(frozen=True)
class MlpSpace(_WholeSchedule):
    """The schedules of the fused decode MLP template (``codegen.mlp``) for one target: BI, BK, BN,
    warps and stages, BM fixed by the task's rows. Every schedule it returns is accepted by
    ``mlp_schedule`` and fits ``MLP_VALUES_PER_THREAD``, ``MLP_MAX_PROGRAMS`` and the problem
    (no tile dim past the next power of two of its dim)."""

    hw: Hopper = H200
    knobs: tuple[Knob, ...] = MLP_KNOBS
    _sorted: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False, compare=False)

    template = "mlp"

    def knobs_for(self, task: AnyTask) -> tuple[Knob, ...]:
        bm = mlp_bm(task) if isinstance(task, MlpTask) else 1
        return (Knob("bm", (bm,)), *self.knobs)

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None:
        """The first rule ``s`` breaks for ``task`` (the template's own check first), or None."""
        if not isinstance(task, MlpTask):
            return f"the mlp space does not schedule {task.template} tasks"
        try:
            mlp_schedule(self.emit(s))
        except (ScheduleError, TypeError, KeyError) as e:
            return str(e)
        if s["bm"] != mlp_bm(task):
            return f"BM is the bucket's rows ({mlp_bm(task)}), got {s['bm']}"
        for knob, dim in (("bi", task.i), ("bk", task.k), ("bn", task.n)):
            if s[knob] > max(16, 1 << (dim - 1).bit_length()):
                return f"{knob.upper()}={s[knob]} is wider than the problem ({dim})"
        if mlp_values_per_thread(s) > MLP_VALUES_PER_THREAD:
            return (f"{mlp_values_per_thread(s):.0f} weight values per thread (more than "
                    f"{MLP_VALUES_PER_THREAD}: the products spill)")
        if mlp_smem_bytes(task, s) > self.hw.smem_per_block:
            return f"{mlp_smem_bytes(task, s)} bytes of shared memory (more than {self.hw.smem_per_block})"
        if mlp_programs(task, s) > MLP_MAX_PROGRAMS:
            return f"{mlp_programs(task, s)} programs (more than {MLP_MAX_PROGRAMS}: atomics outweigh bandwidth)"
        return None


# --- the fused decode attention and o projection -------------------------------------------------


ATTENTION_O_KNOBS: tuple[Knob, ...] = (
    Knob("bn", (64, 16, 32, 128)),
    Knob("bno", (64, 16, 32, 128, 256)),
    Knob("tiles", (1, 2, 4, 8, 16)),
    Knob("num_warps", (4, 2, 8)),
    Knob("num_stages", (2, 1, 3)),
)


def attention_o_tiles(task: AttentionOTask, s: Mapping[str, int]) -> int:
    """Output tiles of the projection."""
    return math.ceil(task.n / s["bno"])


def attention_o_programs(task: AttentionOTask, s: Mapping[str, int]) -> int:
    return task.rows * task.kv_heads * math.ceil(attention_o_tiles(task, s) / s["tiles"])


def attention_o_values_per_thread(task: AttentionOTask, s: Mapping[str, int]) -> float:
    """Values each thread holds of the larger of a key step's K and V tiles and a W_o tile."""
    bd, bdv = _p2(max(16, task.head_dim)), _p2(max(16, task.head_dim_v))
    return max((bd + bdv) * s["bn"] / 2, s["bno"] * bdv) / (32 * s["num_warps"])


@dataclass(frozen=True)
class AttentionOSpace(_WholeSchedule):
    """The schedules of the fused decode attention and o projection (``codegen.attention_o``):
    keys a step, output tile width, tiles per program, warps, stages. Every schedule it returns is
    accepted by ``attention_o_schedule``, holds at most ``ATTENTION_O_VALUES_PER_THREAD`` values per thread
    in its largest tile, leaves at most ``MLP_MAX_PROGRAMS`` programs and no tile wider than the
    problem."""

    hw: Hopper = H200
    knobs: tuple[Knob, ...] = ATTENTION_O_KNOBS
    _sorted: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False, compare=False)

    template = "attention_o"

    def knobs_for(self, task: AnyTask) -> tuple[Knob, ...]:
        return self.knobs

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None:
        """The first rule ``s`` breaks for ``task`` (the template's own check first), or None."""
        if not isinstance(task, AttentionOTask):
            return f"the attention_o space does not schedule {task.template} tasks"
        try:
            attention_o_schedule(self.emit(s))
        except (ScheduleError, TypeError, KeyError) as e:
            return str(e)
        if s["bn"] > max(16, _p2(task.ctx)) or s["bno"] > max(16, _p2(task.n)):
            return f"BN={s['bn']} or BNO={s['bno']} is wider than the problem (ctx {task.ctx}, N {task.n})"
        if s["tiles"] > _p2(attention_o_tiles(task, s)):
            return f"TILES={s['tiles']} is more than the {attention_o_tiles(task, s)} output tiles"
        if attention_o_values_per_thread(task, s) > ATTENTION_O_VALUES_PER_THREAD:
            return (f"{attention_o_values_per_thread(task, s):.0f} values per thread (more than "
                    f"{ATTENTION_O_VALUES_PER_THREAD}: the tiles spill)")
        n_programs = attention_o_programs(task, s)
        if n_programs > MLP_MAX_PROGRAMS:
            return f"{n_programs} programs (more than {MLP_MAX_PROGRAMS}: atomics outweigh bandwidth)"
        return None
