"""The GEMM template's schedule space: its geometry (shared by the constraints and the cost
model), the constraints that prune a candidate before anything is built, its knobs and
``GemmSpace``.

Split-K is a knob of the dot path (``split_k``, 1 = off, left out of stored schedules and keys,
so records written before it existed still match); so are TMA loads (``tma``), and, for prefill
tasks only, persistent grids (``persistent``, programs per SM) and the grouped tile order
(``group_m``, row tiles per group); for decode tasks in GEMV mode only, the unrolled K loop
(``unroll``) and, at one row, the reduction over K deferred to after the loop (``defer``).
Warp specialization has no knob. Triton 3.6 compiles ``tl.range(warp_specialize=True)`` for sm_90
(a producer and two consumer warpgroups, 12 warps a program), but not for the RoPE and gated
epilogues, and the o and down GEMMs (residual and row-sum epilogues) it does compile compute wrong
results on Hopper; on a bare persistent TMA GEMM it is right but no faster than the same
tiles unspecialized. Stream-K has no knob either: one program per SM taking an even share of
the tiles' K steps, shared tiles reduced by the last program to arrive, is right but slower
than plain tiles on nearly every Llama-3-8B GEMM at 16 and 128 rows (docs/performance.md).
``GemmSpace.template_fields`` names the fields the template takes today, and a schedule is
handed to the template without knobs it does not know only when they are off (see
``GemmSpace.emit``), so a space can grow before the template does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from inferx.compiler.families.common.hardware import DTYPE_BYTES, H200, HOPPER_SMS, Hopper
from inferx.compiler.families.common.space import (
    OFF_VALUES,
    Knob,
    KnobSearch,
    Schedule,
    first_broken_rule,
    resident_programs,
    wave_fraction,
)
from inferx.compiler.families.gemm.codegen import GEMV_MAX_ROWS
from inferx.compiler.families.gemm.schedule import gemm_schedule
from inferx.compiler.families.gemm.task import Task
from inferx.compiler.families.interface import AnyTask, ScheduleError

# --- GEMM geometry, shared by constraints and cost models ----------------------------------------


def weight_tiles(task: Task, s: Mapping[str, int]) -> int:
    """Weight tiles each K step loads: two for a gated (gate|up) GEMM (BN rows of each half, as one
    run of 2*BN rows where they are stored in pairs); two for RoPE when a tile is wider than a
    head's rotate-half pair run (BN > 128) and may read its partners elsewhere, unless the task
    knows its tiles hold whole heads (BN a multiple of its head dim: partners in the tile)."""
    if task.gated:
        return 2
    if "rope" in task.epilogue.split("+") and s["bn"] > 128:
        head = task.rope_head_dim
        return 1 if head and s["bn"] % head == 0 else 2
    return 1


def smem_per_stage(task: Task, s: Mapping[str, int]) -> int:
    """Bytes of shared memory one pipeline stage holds: the x tile and the weight tile(s)."""
    xb, wb = DTYPE_BYTES.get(task.x_dtype, 4), DTYPE_BYTES.get(task.w_dtype, 4)
    return s["bm"] * s["bk"] * xb + weight_tiles(task, s) * s["bn"] * s["bk"] * wb


def smem_bytes(task: Task, s: Mapping[str, int]) -> int:
    """Shared memory of the whole pipeline: one buffer per stage (the dot reads its operands from
    shared memory even unpipelined; GEMV mode with one stage loads straight into registers)."""
    if _gemv(s) and s["num_stages"] == 1:
        return 0
    return smem_per_stage(task, s) * s["num_stages"]


def acc_values_per_thread(task: Task, s: Mapping[str, int]) -> float:
    """fp32 values each thread holds live: the accumulator(s) on the dot path; in GEMV mode the
    [BN, BK] product tile that is reduced each K step."""
    threads = 32 * s["num_warps"]
    if _gemv(s):
        return s["bm"] * s["bn"] * s["bk"] * weight_tiles(task, s) / threads
    return s["bm"] * s["bn"] * weight_tiles(task, s) / threads


def grid(task: Task, s: Mapping[str, int]) -> tuple[int, int]:
    """Programs along M and N for the task's row bucket."""
    return math.ceil(task.rows / s["bm"]), math.ceil(task.tile_n / s["bn"])


def programs(task: Task, s: Mapping[str, int]) -> int:
    """Programs of one launch: the M x N tile grid, times SPLIT_K; a persistent grid's count
    where that is fewer."""
    gm, gn = grid(task, s)
    n = gm * gn * s.get("split_k", 1)
    return min(n, s["persistent"] * HOPPER_SMS) if s.get("persistent", 0) else n


def blocks_per_sm(task: Task, s: Mapping[str, int], hw: Hopper = H200) -> int:
    """Programs resident per SM (accumulators plus addresses and loads in registers)."""
    return resident_programs(hw, s["num_warps"], smem_bytes(task, s), acc_values_per_thread(task, s))


def wave_efficiency(task: Task, s: Mapping[str, int], hw: Hopper = H200) -> float:
    """The fraction of SM slots busy over all waves (a score, never a filter)."""
    return wave_fraction(hw, programs(task, s), blocks_per_sm(task, s, hw))


# --- constraints: each returns why a schedule cannot work, or None --------------------------------


def gemv_only_for_decode(task: Task, s: Mapping[str, int], hw: Hopper) -> str | None:
    if _gemv(s) and task.shape != "decode":
        return f"GEMV mode (BM <= {GEMV_MAX_ROWS}) runs a few rows per program: only for decode tasks"
    return None


# Weight values per thread an unrolled GEMV may hold in flight: 128 bf16 values are 64 registers
UNROLL_MAX_W_PER_THREAD = 128


def unroll_fits(task: Task, s: Mapping[str, int], hw: Hopper) -> str | None:
    """An unrolled K loop (GEMV mode) holds the program's BM x BN x K slice of W in registers, its
    loads issued together: at most ``UNROLL_MAX_W_PER_THREAD`` values per thread; one stage, as the
    stage count means nothing to straight-line code (two schedules would be one kernel)."""
    if not s.get("unroll", 0):
        return None
    if s["num_stages"] != 1:
        return f"an unrolled K loop has no pipeline stages: num_stages must be 1, got {s['num_stages']}"
    per_thread = s["bn"] * task.k * weight_tiles(task, s) / (32 * s["num_warps"])
    if per_thread > UNROLL_MAX_W_PER_THREAD:
        return (f"an unrolled K loop holds BN x K = {s['bn']} x {task.k} weights per tile: {per_thread:g} per thread "
                f"(> {UNROLL_MAX_W_PER_THREAD}) with {s['num_warps']} warps")
    return None


# fp32 sums of products a deferred GEMV may hold per thread (BN x BK per weight tile over the
# program's threads). At 128 ptxas for sm_90 does not spill (one warp: 172 registers for a gate|up
# pair at BN 4 x BK 512, 255 for the 8B qkv at BN 4 x BK 1024), but so few programs fit an SM that
# they stream several times slower; within 64, a task's best deferred GEMV is about as fast as
# its best plain one (docs/performance.md)
DEFER_MAX_PER_THREAD = 64


def defer_fits(task: Task, s: Mapping[str, int], hw: Hopper) -> str | None:
    """A deferred reduction (GEMV mode, one row) holds [BN, BK] fp32 sums per weight tile, at most
    ``DEFER_MAX_PER_THREAD`` per thread; not with a LayerNorm prologue (its per-step sums of W)."""
    if not s.get("defer", 0):
        return None
    if not _gemv(s) or s["bm"] != 1:
        return f"a deferred reduction runs in GEMV mode at BM 1, got BM {s['bm']}"
    if task.prologue == "layernorm":
        return "a deferred reduction with a LayerNorm prologue is not generated"
    per_thread = s["bn"] * s["bk"] * weight_tiles(task, s) / (32 * s["num_warps"])
    if per_thread > DEFER_MAX_PER_THREAD:
        return (f"a deferred reduction holds BN x BK = {s['bn']} x {s['bk']} sums per tile: {per_thread:g} per thread "
                f"(> {DEFER_MAX_PER_THREAD}) with {s['num_warps']} warps")
    return None


def shared_memory_fits(task: Task, s: Mapping[str, int], hw: Hopper) -> str | None:
    need = smem_bytes(task, s)
    if need > hw.smem_per_block:
        return (f"shared memory {smem_per_stage(task, s)} B per stage x {s['num_stages']} stages = {need} B "
                f"exceeds {hw.smem_per_block} B")
    return None


def accumulator_fits_registers(task: Task, s: Mapping[str, int], hw: Hopper) -> str | None:
    per_thread = acc_values_per_thread(task, s)
    limit = hw.max_acc_regs * (2 if _gemv(s) else 1)  # GEMV products are consumed as they are made
    if per_thread > limit:
        what = "GEMV product tile" if _gemv(s) else "accumulator"
        return f"{what} needs {per_thread:g} fp32 registers per thread (> {limit}) with {s['num_warps']} warps"
    return None


def dot_tile_shape(task: Task, s: Mapping[str, int], hw: Hopper) -> str | None:
    """wgmma is issued per warpgroup (4 warps) on M=64 tiles: BM >= 64 wants whole warpgroups; a
    tile with fewer accumulator values than threads leaves threads idle."""
    if _gemv(s):
        return None
    if s["bm"] >= 64 and s["num_warps"] < 4:
        return f"BM={s['bm']} runs on wgmma, which needs whole warpgroups (4, 8 or 16 warps), got {s['num_warps']}"
    if s["bm"] * s["bn"] < 32 * s["num_warps"]:
        threads = 32 * s["num_warps"]
        return f"a {s['bm']}x{s['bn']} tile has fewer values than the {threads} threads of {s['num_warps']} warps"
    return None


def rope_tiles_hold_whole_heads(task: Task, s: Mapping[str, int], hw: Hopper) -> str | None:
    """A prefill RoPE GEMM's tiles hold whole heads (BN a multiple of head_dim, in their natural
    column order). The permuted tiles the template makes otherwise run, but never win: half a
    head per tile is slower (a permuted tile's columns come in runs, which Triton 3.6 stores a
    bf16 at a time), and several heads in permuted order much slower; one head per tile is best
    in every prefill bucket (docs/performance.md). Decode tiles of a few rows store little, and
    narrower ones can win there. Where the
    task does not know its head dim (read back from a record), nothing is pruned."""
    head = task.rope_head_dim
    if task.shape != "prefill" or not head or _gemv(s) or s["bn"] % head == 0:
        return None
    return f"BN={s['bn']}: a prefill RoPE tile holds whole heads (BN a multiple of head_dim {head})"


def tile_fits_problem(task: Task, s: Mapping[str, int], hw: Hopper) -> str | None:
    """A tile dim more than twice the problem's (rounded up to a power of two) only computes masked
    lanes."""
    p2 = lambda v: 1 << max(0, (v - 1).bit_length())  # noqa: E731
    for knob, dim, what in (("bm", task.rows, "rows"), ("bn", task.tile_n, "N"), ("bk", task.k, "K")):
        floor = 1 if knob == "bm" and _gemv(s) else 16  # GEMV rows cost CUDA-core work: no padding
        if s[knob] > max(floor, p2(dim)):
            return f"{knob.upper()}={s[knob]} exceeds the task's {what} ({dim}) rounded up to a power of two"
    return None


def split_k_fits(task: Task, s: Mapping[str, int], hw: Hopper) -> str | None:
    """Split-K runs on the dot path, without a LayerNorm prologue, with K a multiple of
    SPLIT_K x BK (each program reduces whole K steps), and only where the M x N tiles alone leave
    SMs idle: on a grid that fills them it adds partial sums and nothing else (and on a large
    one its fp32 partials outgrow 32-bit offsets: a Llama-3-8B lm_head at 4096 rows in 16 x 16
    tiles, split 8, wanted 16 GB of them and faulted)."""
    split = s.get("split_k", 1)
    if split == 1:
        return None
    if _gemv(s):
        return f"split-K ({split}) runs on the dot path (BM >= 16), not in GEMV mode"
    if task.prologue == "layernorm":
        return "split-K with a LayerNorm prologue is not generated"
    if task.k % (split * s["bk"]):
        return f"split-K {split} x BK {s['bk']} does not divide K={task.k}"
    gm, gn = grid(task, s)
    if gm * gn >= hw.sms:
        return f"split-K ({split}) on {gm * gn} tiles: they already fill the {hw.sms} SMs"
    return None


def tma_fits(task: Task, s: Mapping[str, int], hw: Hopper) -> str | None:
    """TMA loads take whole tiles of contiguous rows on the dot path: W in [N, K] layout (a gated
    GEMM takes its gate and up rows as two boxes of BN rows, or as one of 2*BN where they are
    stored in pairs, so BN <= 128 there: a box is at most 256 rows), K rows 16-byte aligned,
    a RoPE GEMM only on tiles of whole heads (other tiles gather partner columns or permute them,
    and the template refuses them). Decode tasks of 16 rows and
    more take them too, with split-K (each program's boxes start at its K range)."""
    if not s.get("tma", 0):  # (the template refuses them in GEMV mode)
        return None
    if task.w_layout != "nk":
        return f"TMA loads need W in [N, K] layout, not {task.w_layout}"
    if task.prologue == "layernorm":
        return "TMA loads with a LayerNorm prologue are not generated"
    if (task.k * DTYPE_BYTES.get(task.x_dtype, 4)) % 16 or (task.k * DTYPE_BYTES.get(task.w_dtype, 4)) % 16:
        return f"TMA needs 16-byte aligned rows: K={task.k} is not"
    if "pairs" in task.epilogue.split("+") and 2 * s["bn"] > 256:
        return f"TMA loads of gate|up pairs take 2*BN rows per box, at most 256: BN={s['bn']}"
    if "rope" in task.epilogue.split("+"):
        # Whole heads in natural column order are boxes (tiles of two 64-wide heads on TMA matched
        # HF); a tile of part of a head gathers its partners or permutes its columns.
        head = task.rope_head_dim
        if head and s["bn"] % head:
            return f"TMA loads of a RoPE GEMM need tiles of whole heads (BN a multiple of head_dim {head})"
        if not head and s["bn"] not in (64, 128):
            return "TMA loads of a RoPE GEMM need tiles of whole heads (head_dim unknown: BN 64 or 128)"
    return None


def group_m_fits(task: Task, s: Mapping[str, int], hw: Hopper) -> str | None:
    """A grouped tile order needs more row tiles than one group: with GROUP_M >= the task's row
    tiles every group is all of them, the order of ``group_m`` 0 with another grid."""
    g = s.get("group_m", 0)
    if g and g >= grid(task, s)[0]:
        return f"GROUP_M={g} covers all {grid(task, s)[0]} row tiles: the order of group_m 0"
    return None


Constraint = Callable[[Task, Mapping[str, int], Hopper], "str | None"]
GEMM_CONSTRAINTS: tuple[Constraint, ...] = (
    gemv_only_for_decode,
    unroll_fits,
    defer_fits,
    split_k_fits,
    tma_fits,
    group_m_fits,
    rope_tiles_hold_whole_heads,
    tile_fits_problem,
    dot_tile_shape,
    shared_memory_fits,
    accumulator_fits_registers,
)


def _gemv(s: Mapping[str, int]) -> bool:
    return s["bm"] <= GEMV_MAX_ROWS


# --- the GEMM space ------------------------------------------------------------------------------


GEMM_KNOBS: tuple[Knob, ...] = (
    Knob("bm", (64, 1, 2, 4, 8, 16, 32, 128, 256)),
    Knob("bn", (64, 4, 8, 16, 32, 128, 256)),
    Knob("bk", (64, 16, 32, 128, 256, 512, 1024)),
    Knob("num_warps", (4, 1, 2, 8, 16)),
    Knob("num_stages", (2, 1, 3, 4, 5, 6, 8)),
    Knob("split_k", (1, 2, 4, 8)),
    Knob("tma", (0, 1)),
    Knob("persistent", (0, 1, 2)),
    Knob("group_m", (0, 8)),
    Knob("unroll", (0, 1)),
    Knob("defer", (0, 1)),
)
# Knobs of prefill tasks alone (decode GEMMs are GEMVs or split-K over few row tiles), and of
# decode tasks alone (GEMV mode).
PREFILL_KNOBS = frozenset({"persistent", "group_m"})
DECODE_KNOBS = frozenset({"unroll", "defer"})


@dataclass(frozen=True)
class GemmSpace(KnobSearch):
    """The schedules of the GEMM template for one target. Every schedule it returns is accepted by
    ``gemm_schedule`` and passes ``constraints``."""

    hw: Hopper = H200
    knobs: tuple[Knob, ...] = GEMM_KNOBS
    constraints: tuple[Constraint, ...] = GEMM_CONSTRAINTS
    template_fields: frozenset[str] = frozenset({"bm", "bn", "bk", "num_warps", "num_stages", "split_k", "tma",
                                                 "persistent", "group_m", "unroll", "defer"})
    _sorted: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False, compare=False)

    template = "gemm"

    def of(self, task: AnyTask) -> GemmSpace:
        return self

    def knobs_for(self, task: AnyTask) -> tuple[Knob, ...]:
        """Every knob; persistent grids and grouped tile orders only for prefill tasks, unrolled
        GEMV loops only for decode tasks, deferred reductions only for decode tasks of one row."""
        other_shape = DECODE_KNOBS if isinstance(task, Task) and task.shape == "prefill" else PREFILL_KNOBS
        one_row = isinstance(task, Task) and task.shape == "decode" and task.rows == 1
        return tuple(k for k in self.knobs if k.name not in other_shape and (one_row or k.name != "defer"))

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None:
        """The first rule ``s`` breaks for ``task`` (the template's own check first), or None."""
        if not isinstance(task, Task):
            return f"the gemm space does not schedule {task.template} tasks"
        return first_broken_rule(task, s, self.emit, gemm_schedule, self.constraints, self.hw)

    def emit(self, s: Mapping[str, int]) -> Schedule:
        """The template's schedule dict: knobs the template does not take yet are dropped when they
        hold their default ("off"); a non-default one raises ScheduleError."""
        out: Schedule = {}
        defaults = {k.name: k.values[0] for k in self.knobs}
        for name, value in s.items():
            if OFF_VALUES.get(name) == value:
                continue  # off: stored as before the knob existed, so old records still match
            if name in self.template_fields:
                out[name] = int(value)
            elif value != defaults.get(name):
                raise ScheduleError(f"knob {name}={value} is not implemented by the gemm template")
        return out

    def complete(self, s: Mapping[str, int]) -> Schedule:
        """A stored schedule as a point of the space: knobs it does not name take their default."""
        return {k.name: int(s.get(k.name, k.values[0])) for k in self.knobs}
