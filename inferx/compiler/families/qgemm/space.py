"""The qgemm template's schedule space: its geometry (shared by the constraints and the cost
model), its constraints, its knobs and ``QGemmSpace``.

The knobs are the schedule's own fields (bm, bn, bk, num_warps, num_stages, and for decode tasks
split_k and prefetch, left out of stored schedules where off); validity is
``schedule.qgemm_schedule`` and ``schedule.check_fits`` first (the one statement of it), then the
constraints here, which prune what would run but cannot be good on Hopper. The shapes it draws:

- decode tasks of one row: GEMV mode at BM 1 (the deferred one-row kernel, steps of whole groups
  up to 2048 columns) and the dot path at BM 16 (one live row of 16);
- decode tasks of more rows: the dot path, BM 16 up to the rows' bucket (at most 64);
- prefill tasks: the dot path, BM 16 to 256.

GEMV mode at 2..8 rows a program is valid but not drawn, as ``benchmarks/qgemm_probe.py``'s
sweep, which the heuristic came from, tried the dot path alone above one row (a space that
wants it adds BM 2..8 to ``DECODE_KNOBS`` and relaxes ``gemv_at_one_row``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from inferx.compiler.families.common.hardware import DTYPE_BYTES, H200, Hopper
from inferx.compiler.families.common.space import (
    DecodePrefillKnobs,
    Knob,
    first_broken_rule,
    p2,
    resident_programs,
    wave_fraction,
)
from inferx.compiler.families.interface import AnyTask
from inferx.compiler.families.qgemm.schedule import OPTIONAL, check_fits, qgemm_schedule
from inferx.compiler.families.qgemm.task import QGemmTask

# --- qgemm geometry, shared by constraints and cost models ----------------------------------------


def gemv(s: Mapping[str, int]) -> bool:
    """GEMV mode (the space draws it at BM 1 alone: the deferred one-row kernel)."""
    return s["bm"] == 1


def weight_tiles(task: QGemmTask) -> int:
    """W row sets each K step loads: two for a gate|up split (the gate and the up rows of the
    tile's columns), else one. (An unpaired RoPE tile reads its partner rows too; the cost model
    does not know the pairing, which depends on the heads' layout.)"""
    return 2 if task.gated else 1


def step_bytes(task: QGemmTask, s: Mapping[str, int]) -> int:
    """Bytes one program loads per K step: x's [BM, BK] and the packed codes [BN, BK / 2] of each
    weight tile (scales and minimums, one per row per group, are left out)."""
    return s["bm"] * s["bk"] * DTYPE_BYTES.get(task.x_dtype, 4) + weight_tiles(task) * s["bn"] * s["bk"] // 2


def smem_bytes(task: QGemmTask, s: Mapping[str, int]) -> int:
    """Shared memory of a program, an estimate: on the dot path a buffer of x and the codes per
    pipeline stage, and the unpacked 16-bit W tile(s) the dot reads; in GEMV mode one buffer per
    stage beyond the first (one stage loads straight into registers)."""
    if gemv(s):
        return step_bytes(task, s) * (s["num_stages"] - 1)
    return step_bytes(task, s) * s["num_stages"] + weight_tiles(task) * s["bn"] * s["bk"] * 2


def values_per_thread(task: QGemmTask, s: Mapping[str, int]) -> float:
    """fp32 values each thread holds live across the K loop: the [BM, BN] accumulator(s) on the dot
    path; the deferred GEMV's [BN, BK / 2] sums per weight tile."""
    threads = 32 * s["num_warps"]
    if gemv(s):
        return weight_tiles(task) * s["bn"] * s["bk"] / 2 / threads
    return weight_tiles(task) * s["bm"] * s["bn"] / threads


def grid(task: QGemmTask, s: Mapping[str, int]) -> tuple[int, int]:
    """Programs along M and N for the task's row bucket."""
    return math.ceil(task.rows / s["bm"]), math.ceil(task.tile_n / s["bn"])


def programs(task: QGemmTask, s: Mapping[str, int]) -> int:
    """Programs of a launch: the tiles times the split-K slices."""
    gm, gn = grid(task, s)
    return gm * gn * s.get("split_k", 1)


def blocks_per_sm(task: QGemmTask, s: Mapping[str, int], hw: Hopper = H200) -> int:
    """Programs resident per SM."""
    return resident_programs(hw, s["num_warps"], smem_bytes(task, s), values_per_thread(task, s))


def wave_efficiency(task: QGemmTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
    """The fraction of SM slots busy over all waves (a score, never a filter)."""
    return wave_fraction(hw, programs(task, s), blocks_per_sm(task, s, hw))


# --- constraints: each returns why a schedule cannot work well, or None --------------------------

QGemmConstraint = Callable[[QGemmTask, Mapping[str, int], Hopper], "str | None"]


def fits_the_group(task: QGemmTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    """``schedule.check_fits``: BK within one group (or whole groups dividing K at BM 1)."""
    return check_fits(qgemm_schedule(s), task.group, task.k)


def gemv_at_one_row(task: QGemmTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    """GEMV mode is drawn at BM 1 for decode tasks of one row (the deferred one-row kernel)."""
    if s["bm"] <= 8 and (s["bm"] != 1 or task.shape != "decode" or task.rows != 1):
        return f"GEMV mode (BM={s['bm']}) is searched at BM 1 for decode tasks of one row only"
    return None


# Rows of a decode tile at most: a batch bucket's rows in a few row tiles at most
DECODE_MAX_BM = 64


def tile_fits_problem(task: QGemmTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    """A tile no larger than the problem rounded up to a power of two (of at least 16: tl.dot's
    least), else it only computes masked lanes; at most ``DECODE_MAX_BM`` rows for decode."""
    if not gemv(s) and s["bm"] > max(16, p2(task.rows)):
        return f"BM={s['bm']} exceeds the task's rows ({task.rows}) rounded up to a power of two"
    if task.shape == "decode" and s["bm"] > DECODE_MAX_BM:
        return f"BM={s['bm']}: a decode tile holds at most {DECODE_MAX_BM} rows"
    if s["bn"] > max(16, p2(task.tile_n)):
        return f"BN={s['bn']} exceeds the task's N ({task.tile_n}) rounded up to a power of two"
    return None


def threads_have_work(task: QGemmTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    """BM >= 64 runs on wgmma (whole warpgroups); a tile with fewer values than threads idles
    some (the GEMV's tile is its [BN, BK / 2] sums)."""
    threads = 32 * s["num_warps"]
    if not gemv(s) and s["bm"] >= 64 and s["num_warps"] < 4:
        return f"BM={s['bm']} runs on wgmma, which needs whole warpgroups (4, 8 or 16 warps), got {s['num_warps']}"
    tile = s["bn"] * s["bk"] // 2 if gemv(s) else s["bm"] * s["bn"]
    if tile < threads:
        return f"a tile of {tile} values has fewer than the {threads} threads of {s['num_warps']} warps"
    return None


# fp32 sums a deferred GEMV holds per thread: at most 16384 of [BN, BK] per program at 4 warps,
# the limit ``benchmarks/qgemm_probe.py`` swept within
GEMV_MAX_PER_THREAD = 64


def fits_registers(task: QGemmTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    per_thread = values_per_thread(task, s)
    limit = GEMV_MAX_PER_THREAD if gemv(s) else hw.max_acc_regs
    if per_thread > limit:
        what = "deferred GEMV sums" if gemv(s) else "accumulators"
        return f"{what} need {per_thread:g} fp32 registers per thread (> {limit}) with {s['num_warps']} warps"
    return None


def shared_memory_fits(task: QGemmTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    need = smem_bytes(task, s)
    if need > hw.smem_per_block:
        return f"shared memory {need} B with {s['num_stages']} stages exceeds {hw.smem_per_block} B"
    return None


QGEMM_CONSTRAINTS: tuple[QGemmConstraint, ...] = (
    fits_the_group,
    gemv_at_one_row,
    tile_fits_problem,
    threads_have_work,
    fits_registers,
    shared_memory_fits,
)

# The first value of each knob is the default (the heuristic's where it has one).
DECODE_KNOBS: tuple[Knob, ...] = (
    Knob("bm", (16, 1, 32, 64)),
    Knob("bn", (32, 8, 16, 64, 128)),
    Knob("bk", (128, 32, 64, 256, 512, 1024, 2048)),
    Knob("num_warps", (4, 2, 8)),
    Knob("num_stages", (4, 2, 3)),
    Knob("split_k", (1, 2, 4, 8)),
    Knob("prefetch", (0, 1)),
)
PREFILL_KNOBS: tuple[Knob, ...] = (
    Knob("bm", (128, 16, 32, 64, 256)),
    Knob("bn", (128, 32, 64, 256)),
    Knob("bk", (64, 32, 128)),
    Knob("num_warps", (8, 4)),
    Knob("num_stages", (3, 2, 4)),
)


@dataclass(frozen=True)
class QGemmSpace(DecodePrefillKnobs):
    """The schedules of the qgemm template for one target: decode tasks draw from
    ``decode_knobs``, prefill tasks from ``prefill_knobs``. Every schedule it returns is accepted
    by ``qgemm_schedule``, fits the task's group (``check_fits``) and passes ``constraints``."""

    hw: Hopper = H200
    decode_knobs: tuple[Knob, ...] = DECODE_KNOBS
    prefill_knobs: tuple[Knob, ...] = PREFILL_KNOBS
    constraints: tuple[QGemmConstraint, ...] = QGEMM_CONSTRAINTS
    _sorted: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False, compare=False)

    template = "qgemm"
    optional = OPTIONAL

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None:
        """The first rule ``s`` breaks for ``task`` (the template's own checks first), or None."""
        if not isinstance(task, QGemmTask):
            return f"the qgemm space does not schedule {task.template} tasks"
        return first_broken_rule(task, s, self.emit, qgemm_schedule, self.constraints, self.hw)
