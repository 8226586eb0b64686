"""The fp8gemm template's schedule space: its geometry (shared by the constraints and the cost
model), its constraints, its knobs and ``Fp8GemmSpace``.

The knobs are the schedule's own fields (bm, bn, bk, num_warps, num_stages, and for prefill
tasks ``tma``, left out of stored schedules where off); validity is
``codegen.fp8gemm_schedule`` first (the one statement of it), then the constraints here, which
prune what would run but cannot be good on Hopper. The geometry is the gemm template's on the
same tiles with a byte a weight (and a byte an element of x where it arrives E4M3), plus, where
the kernel quantizes x itself, the E4M3 tile of x the dot reads from shared memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from inferx.compiler.families.common.hardware import H200, Hopper
from inferx.compiler.families.common.space import DecodePrefillKnobs, Knob, first_broken_rule, p2
from inferx.compiler.families.fp8gemm.codegen import OPTIONAL, fp8gemm_schedule
from inferx.compiler.families.fp8gemm.task import Fp8GemmTask
from inferx.compiler.families.gemm import space as gemm_space
from inferx.compiler.families.gemm.task import Task
from inferx.compiler.families.interface import AnyTask

# --- fp8gemm geometry, shared by constraints and cost models --------------------------------------


def as_gemm(task: Fp8GemmTask) -> Task:
    """The task as the gemm template's geometry and cost model read it, on the same tiles: W a
    byte a weight ("i8"), x as it arrives (a byte where it is E4M3 already)."""
    x = "i8" if task.x_scale == "given" else task.x_dtype
    return Task(task.template, x, "i8", task.out_dtype, task.k, task.n, task.tile_n, "nk", task.prologue, task.epilogue,
                task.shape, task.rows, task.rope_head_dim)


def smem_bytes(task: Fp8GemmTask, s: Mapping[str, int]) -> int:
    """Shared memory of a program: x's and W's tiles per pipeline stage, and where the kernel
    quantizes x, the [BM, BK] E4M3 tile the dot reads."""
    quantized_a = 0 if task.x_scale == "given" else s["bm"] * s["bk"]
    return gemm_space.smem_bytes(as_gemm(task), s) + quantized_a


def values_per_thread(task: Fp8GemmTask, s: Mapping[str, int]) -> float:
    """fp32 accumulator values each thread holds (two [BM, BN] tiles for a gate|up split)."""
    return gemm_space.acc_values_per_thread(as_gemm(task), s)


# --- constraints: each returns why a schedule cannot work well, or None --------------------------

Fp8GemmConstraint = Callable[[Fp8GemmTask, Mapping[str, int], Hopper], "str | None"]


def bk_divides_k(task: Fp8GemmTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    """The K loop takes whole steps of BK (the template refuses others)."""
    return f"BK={s['bk']} does not divide K={task.k}" if task.k % s["bk"] else None


# Rows of a decode tile at most: a batch bucket's rows in a few row tiles at most
DECODE_MAX_BM = 64


def tile_fits_problem(task: Fp8GemmTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    """A tile no larger than the problem rounded up to a power of two (at least 16, tl.dot's
    least), else it computes masked lanes only; at most ``DECODE_MAX_BM`` rows for decode."""
    if s["bm"] > max(16, p2(task.rows)):
        return f"BM={s['bm']} exceeds the task's rows ({task.rows}) rounded up to a power of two"
    if task.shape == "decode" and s["bm"] > DECODE_MAX_BM:
        return f"BM={s['bm']}: a decode tile holds at most {DECODE_MAX_BM} rows"
    if s["bn"] > max(16, p2(task.tile_n)):
        return f"BN={s['bn']} exceeds the task's N ({task.tile_n}) rounded up to a power of two"
    return None


def dot_tile_shape(task: Fp8GemmTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    """FP8 wgmma is issued per warpgroup (4 warps) on M=64 tiles: BM >= 64 wants whole
    warpgroups; a tile with fewer accumulator values than threads idles some."""
    if s["bm"] >= 64 and s["num_warps"] < 4:
        return f"BM={s['bm']} runs on wgmma, which needs whole warpgroups (4, 8 or 16 warps), got {s['num_warps']}"
    threads = 32 * s["num_warps"]
    if s["bm"] * s["bn"] < threads:
        return f"a {s['bm']}x{s['bn']} tile has fewer values than the {threads} threads of {s['num_warps']} warps"
    return None


def fits_registers(task: Fp8GemmTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    per_thread = values_per_thread(task, s)
    if per_thread > hw.max_acc_regs:
        return (f"accumulators need {per_thread:g} fp32 registers per thread (> {hw.max_acc_regs}) "
                f"with {s['num_warps']} warps")
    return None


def shared_memory_fits(task: Fp8GemmTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    need = smem_bytes(task, s)
    if need > hw.smem_per_block:
        return f"shared memory {need} B with {s['num_stages']} stages exceeds {hw.smem_per_block} B"
    return None


def rope_tiles_hold_whole_heads(task: Fp8GemmTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    """As the gemm space's rule: a prefill RoPE tile holds whole heads."""
    return gemm_space.rope_tiles_hold_whole_heads(as_gemm(task), s, hw)


def tma_fits(task: Fp8GemmTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    """TMA loads (``codegen.tma_applies``) take an x that arrives E4M3, rows of K 16-byte
    aligned, tiles of gate|up pairs of at most 128 columns (one box of 2 x BN rows, at most 256),
    RoPE tiles of whole heads (BN a multiple of the head dim; 64 or 128 where it is unknown)."""
    if not s.get("tma", 0):
        return None
    if task.x_scale != "given":
        return f"TMA loads take an x that arrives E4M3; this task's x is scaled by the kernel ({task.x_scale})"
    if task.k % 16:
        return f"TMA needs 16-byte aligned rows: K={task.k} is not"
    tags = task.epilogue.split("+")
    if "pairs" in tags and 2 * s["bn"] > 256:
        return f"TMA loads of gate|up pairs take 2*BN rows per box, at most 256: BN={s['bn']}"
    if "rope" in tags:
        head = task.rope_head_dim
        if head and s["bn"] % head:
            return f"TMA loads of a RoPE GEMM need tiles of whole heads (BN a multiple of head_dim {head})"
        if not head and s["bn"] not in (64, 128):
            return "TMA loads of a RoPE GEMM need tiles of whole heads (head_dim unknown: BN 64 or 128)"
    return None


FP8GEMM_CONSTRAINTS: tuple[Fp8GemmConstraint, ...] = (
    bk_divides_k,
    tile_fits_problem,
    dot_tile_shape,
    fits_registers,
    shared_memory_fits,
    rope_tiles_hold_whole_heads,
    tma_fits,
)

# The first value of each knob is the default (the heuristic's).
DECODE_KNOBS: tuple[Knob, ...] = (
    Knob("bm", (16, 32, 64)),
    Knob("bn", (64, 16, 32, 128, 256)),
    Knob("bk", (128, 32, 64, 256)),
    Knob("num_warps", (4, 2, 8)),
    Knob("num_stages", (4, 2, 3, 5)),
)
PREFILL_KNOBS: tuple[Knob, ...] = (
    Knob("bm", (128, 16, 32, 64, 256)),
    Knob("bn", (128, 32, 64, 256)),
    Knob("bk", (128, 32, 64, 256)),
    Knob("num_warps", (8, 4)),
    Knob("num_stages", (3, 2, 4, 5)),
    Knob("tma", (0, 1)),
)


@dataclass(frozen=True)
class Fp8GemmSpace(DecodePrefillKnobs):
    """The schedules of the fp8gemm template for one target: decode tasks draw from
    ``decode_knobs``, prefill tasks from ``prefill_knobs``. Every schedule it returns is accepted
    by ``fp8gemm_schedule`` and passes ``constraints``."""

    hw: Hopper = H200
    decode_knobs: tuple[Knob, ...] = DECODE_KNOBS
    prefill_knobs: tuple[Knob, ...] = PREFILL_KNOBS
    constraints: tuple[Fp8GemmConstraint, ...] = FP8GEMM_CONSTRAINTS
    _sorted: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False, compare=False)

    template = "fp8gemm"
    optional = OPTIONAL

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None:
        """The first rule ``s`` breaks for ``task`` (the template's own checks first), or None."""
        if not isinstance(task, Fp8GemmTask):
            return f"the fp8gemm space does not schedule {task.template} tasks"
        return first_broken_rule(task, s, self.emit, lambda d: fp8gemm_schedule(dict(d)), self.constraints, self.hw)
