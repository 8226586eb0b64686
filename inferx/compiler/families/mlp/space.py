"""The fused decode MLP template's schedule space (``mlp.codegen``): BI, BK, BN, warps, stages,
with BM the bucket's rows; the geometry its constraints and cost model share, and ``MlpSpace``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from inferx.compiler.families.common.hardware import H200, HOPPER_SMS, Hopper
from inferx.compiler.families.common.rows import GEMV_MAX_ROWS
from inferx.compiler.families.common.space import Knob, WholeSchedule
from inferx.compiler.families.interface import AnyTask, ScheduleError
from inferx.compiler.families.mlp.schedule import mlp_schedule
from inferx.compiler.families.mlp.task import MlpTask

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
class MlpSpace(WholeSchedule):
    """The schedules of the fused decode MLP template (``mlp.codegen``) for one target: BI, BK, BN,
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
