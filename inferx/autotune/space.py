"""Schedule spaces: the knobs of a template, the rules that prune a candidate before anything is
built, and the sampling and mutation the search draws from.

A schedule is a plain dict of knob values (the form the tuning database stores). A space emits
only schedules its template accepts (``SCHEDULE_FORMS`` in the database) and that pass every
constraint. A constraint is a cheap check returning the reason a schedule cannot work on Hopper,
or None; they run in order and the first reason is reported (``why_invalid``). Wave quantization
is not a constraint: a schedule that leaves SMs idle in the last wave works, it is only slower,
so it is a score (``wave_efficiency``) the cost models use.

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
New knobs are added as ``Knob``s with the value that means "off" listed
first; ``GemmSpace.template_fields`` names the fields the template takes today, and a schedule is
handed to the template without knobs it does not know only when they are off (see
``GemmSpace.emit``), so a space can grow before the template does.

``AttentionSpace`` has one knob set per shape: decode (SPLITS, BN, warps, stages) and prefill
(BM, BN, warps, stages). The fused decode kernels' spaces are in ``space_fused``.
``space_for(template, target)`` gives one template's space; ``spaces_for(target)`` gives every
tunable template's, dispatching on the task (what the tuner uses when a model's tasks mix
templates).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from inferx.autotune.database import OPTIONAL_KNOBS, ScheduleError, attention_schedule, gemm_schedule
from inferx.autotune.task import AnyTask, AttentionTask, Task
from inferx.compiler.codegen.gemm import GEMV_MAX_ROWS, HOPPER_SMS

Schedule = dict[str, int]

DTYPE_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "i8": 1, "i32": 4}


@dataclass(frozen=True)
class Hopper:
    """The figures of one Hopper part the constraints and the roofline model use. Bandwidth and
    tensor-core peak are what a good kernel reaches, not the data sheet's."""

    name: str = "h200"
    sms: int = 132
    smem_per_block: int = 232448  # 227 KB of dynamic shared memory per block
    smem_per_sm: int = 233472  # 228 KB per SM
    regs_per_sm: int = 65536
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    l2_bytes: int = 50 * 1024 * 1024
    dram_bytes_per_s: float = 4.2e12
    tensor_flops: float = 700e12  # bf16/f16 dense through wgmma
    mma_flops: float = 350e12  # tensor cores without wgmma (BM < 64 or fewer than 4 warps)
    fma_flops: float = 60e12  # CUDA cores (GEMV mode multiplies and reduces)
    dram_latency_s: float = 700e-9
    # fixed cost of a launch in a CUDA graph (its start, the ramp to full bandwidth, its drain): a
    # chain of plain streaming kernels fits about this per launch on Hopper (``inferx bench``)
    launch_s: float = 2.3e-6
    max_acc_regs: int = 128  # fp32 accumulator values per thread before spills threaten


H200 = Hopper()
H100 = Hopper(name="h100", l2_bytes=50 * 1024 * 1024, dram_bytes_per_s=3.0e12)
HARDWARE = {"h200": H200, "h100": H100, "sm_90": H200}


@dataclass(frozen=True)
class Knob:
    """One tunable: its name and the values it may take (the first is the default)."""

    name: str
    values: tuple[int, ...]


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
    """Programs resident per SM, limited by shared memory, threads, registers and the block cap."""
    threads = 32 * s["num_warps"]
    smem = smem_bytes(task, s)
    by_smem = hw.smem_per_sm // smem if smem else hw.max_blocks_per_sm
    regs = min(255, 32 + int(acc_values_per_thread(task, s)) * 2)  # accumulators plus addresses, loads
    by_regs = hw.regs_per_sm // (regs * threads)
    return max(0, min(by_smem, hw.max_threads_per_sm // threads, by_regs, hw.max_blocks_per_sm))


def wave_efficiency(task: Task, s: Mapping[str, int], hw: Hopper = H200) -> float:
    """The fraction of SM slots busy over all waves: programs / (waves * slots). 1.0 when the last
    wave is full; a score, never a filter."""
    slots = hw.sms * max(1, blocks_per_sm(task, s, hw))
    n = programs(task, s)
    return n / (math.ceil(n / slots) * slots)


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


# Knob values that mean "off" and are left out of a schedule's key, so a record written before the
# knob existed and the same schedule with the knob spelled out are one schedule.
OFF_VALUES = OPTIONAL_KNOBS


def schedule_key(s: Mapping[str, int]) -> str:
    """Canonical text of a schedule (sorted keys, knobs that are off left out): equal keys if and
    only if equal schedules."""
    return json.dumps({k: v for k, v in s.items() if OFF_VALUES.get(k) != v}, sort_keys=True,
                      separators=(",", ":"))


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


class Space(Protocol):
    """What the search asks of a schedule space; ``of(task)`` is the space that owns ``task``
    (itself for a one-template space)."""

    def of(self, task: AnyTask) -> Space: ...

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None: ...

    def emit(self, s: Mapping[str, int]) -> Schedule: ...

    def complete(self, s: Mapping[str, int]) -> Schedule: ...

    def all_valid(self, task: AnyTask) -> list[Schedule]: ...

    def sample(self, task: AnyTask, rng: random.Random, n: int, tries: int = 50) -> list[Schedule]: ...

    def mutate(self, task: AnyTask, s: Mapping[str, int], rng: random.Random, tries: int = 20) -> Schedule | None: ...

    def crossover(self, task: AnyTask, a: Mapping[str, int], b: Mapping[str, int], rng: random.Random,
                  tries: int = 10) -> Schedule | None: ...


class _KnobSearch:
    """Sampling, mutation, crossover and enumeration over a space's knobs for a task (the knobs
    may depend on the task: ``knobs_for``); validity is the space's ``why_invalid``."""

    _sorted: dict[str, tuple[int, ...]]

    def knobs_for(self, task: AnyTask) -> tuple[Knob, ...]:
        raise NotImplementedError

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None:
        raise NotImplementedError

    def all_valid(self, task: AnyTask) -> list[Schedule]:
        """Every valid schedule of ``task`` (a few thousand points at most)."""
        return [s for s in self._product(self.knobs_for(task)) if self.why_invalid(task, s) is None]

    def sample(self, task: AnyTask, rng: random.Random, n: int, tries: int = 50) -> list[Schedule]:
        """Up to ``n`` distinct valid schedules drawn uniformly from the knob product, rejecting
        invalid ones (``tries`` draws per wanted schedule)."""
        knobs = self.knobs_for(task)
        seen: dict[str, Schedule] = {}
        for _ in range(n * tries):
            if len(seen) >= n:
                break
            s = {k.name: rng.choice(k.values) for k in knobs}
            if self.why_invalid(task, s) is None:
                seen.setdefault(schedule_key(s), s)
        return list(seen.values())

    def mutate(self, task: AnyTask, s: Mapping[str, int], rng: random.Random, tries: int = 20) -> Schedule | None:
        """A valid neighbour of ``s``: one knob moved one step along its sorted values (or, one time
        in four, to any value); None if ``tries`` attempts all break a rule."""
        knobs = self.knobs_for(task)
        for _ in range(tries):
            knob = rng.choice(knobs)
            values = self._ordered(knob)
            i = values.index(s[knob.name]) if s[knob.name] in values else 0
            if rng.random() < 0.25:
                j = rng.randrange(len(values))
            else:
                j = min(len(values) - 1, max(0, i + rng.choice((-1, 1))))
            child = {**s, knob.name: values[j]}
            if child != dict(s) and self.why_invalid(task, child) is None:
                return child
        return None

    def crossover(self, task: AnyTask, a: Mapping[str, int], b: Mapping[str, int], rng: random.Random,
                  tries: int = 10) -> Schedule | None:
        """A valid child taking each knob from one parent at random; None if none of ``tries`` is."""
        for _ in range(tries):
            child = {k.name: (a if rng.random() < 0.5 else b)[k.name] for k in self.knobs_for(task)}
            if self.why_invalid(task, child) is None:
                return child
        return None

    def _ordered(self, knob: Knob) -> tuple[int, ...]:
        if knob.name not in self._sorted:
            self._sorted[knob.name] = tuple(sorted(knob.values))
        return self._sorted[knob.name]

    @staticmethod
    def _product(knobs: tuple[Knob, ...]) -> Iterator[Schedule]:
        def rec(i: int, acc: Schedule) -> Iterator[Schedule]:
            if i == len(knobs):
                yield dict(acc)
                return
            for v in knobs[i].values:
                acc[knobs[i].name] = v
                yield from rec(i + 1, acc)

        yield from rec(0, {})


class _WholeSchedule(_KnobSearch):
    """A one-template space whose every knob is a field of its template's schedule."""

    def of(self, task: AnyTask) -> _WholeSchedule:
        return self

    def emit(self, s: Mapping[str, int]) -> Schedule:
        """The template's schedule dict (every knob is a field of the template)."""
        return {k: int(v) for k, v in s.items()}

    def complete(self, s: Mapping[str, int]) -> Schedule:
        """A stored schedule as a point of the space: records name all their knobs."""
        return self.emit(s)


@dataclass(frozen=True)
class GemmSpace(_KnobSearch):
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
        try:
            gemm_schedule(self.emit(s))
        except (ScheduleError, TypeError, KeyError) as e:
            return str(e)
        for check in self.constraints:
            reason = check(task, s, self.hw)
            if reason is not None:
                return reason
        return None

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


# --- attention geometry, shared by constraints and cost models -----------------------------------


def _p2(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


def attention_bm(task: AttentionTask, s: Mapping[str, int]) -> int:
    """Query rows of a program's tile: the schedule's BM in prefill; in decode the GQA group (query
    heads per KV head) padded to a power of two of at least 16."""
    if task.shape == "decode":
        return max(16, _p2(task.q_heads // max(1, task.kv_heads)))
    return s["bm"]


def attention_head_tiles(task: AttentionTask) -> tuple[int, int]:
    """(BD, BDV): the head dims padded to powers of two of at least 16, as the template pads them."""
    return max(16, _p2(task.head_dim)), max(16, _p2(task.head_dim_v))


def attention_smem_bytes(task: AttentionTask, s: Mapping[str, int]) -> int:
    """Shared memory: a K tile [BD, BN] and a V tile [BN, BDV] per pipeline stage, and the Q tile."""
    bd, bdv = attention_head_tiles(task)
    kvb, qb = DTYPE_BYTES.get(task.kv_dtype, 4), DTYPE_BYTES.get(task.dtype, 4)
    return s["bn"] * (bd + bdv) * kvb * s["num_stages"] + attention_bm(task, s) * bd * qb


def attention_values_per_thread(task: AttentionTask, s: Mapping[str, int]) -> float:
    """fp32 values each thread holds live: the output accumulator [BM, BDV] and the scores [BM, BN]."""
    _, bdv = attention_head_tiles(task)
    return attention_bm(task, s) * (bdv + s["bn"]) / (32 * s["num_warps"])


def attention_programs(task: AttentionTask, s: Mapping[str, int]) -> int:
    """Programs of one launch: SPLITS x batch x KV heads in decode; query blocks x query heads for
    one prompt in prefill."""
    if task.shape == "decode":
        return s["splits"] * task.rows * task.kv_heads
    return math.ceil(task.rows / s["bm"]) * task.q_heads


def attention_blocks_per_sm(task: AttentionTask, s: Mapping[str, int], hw: Hopper = H200) -> int:
    """Programs resident per SM, limited by shared memory, threads, registers and the block cap."""
    threads = 32 * s["num_warps"]
    regs = min(255, 32 + int(attention_values_per_thread(task, s)) * 2)
    by_smem = hw.smem_per_sm // max(1, attention_smem_bytes(task, s))
    return max(0, min(by_smem, hw.max_threads_per_sm // threads, hw.regs_per_sm // (regs * threads),
                      hw.max_blocks_per_sm))


def attention_wave_efficiency(task: AttentionTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
    """The fraction of SM slots busy over all waves (a score, never a filter)."""
    slots = hw.sms * max(1, attention_blocks_per_sm(task, s, hw))
    programs = attention_programs(task, s)
    return programs / (math.ceil(programs / slots) * slots)


AttentionConstraint = Callable[[AttentionTask, Mapping[str, int], Hopper], "str | None"]


def attention_tile_fits_problem(task: AttentionTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    """A slice must hold keys: SPLITS x BN <= the context (decode); a tile no wider than the prompt
    or the context rounded up to a power of two (prefill), else it only computes masked lanes."""
    if task.shape == "decode":
        if s["splits"] * s["bn"] > task.ctx:
            return (f"SPLITS={s['splits']} x BN={s['bn']} exceeds the context {task.ctx}: "
                    "some slices would hold no keys")
        return None
    if s["bm"] > max(16, _p2(task.rows)):
        return f"BM={s['bm']} exceeds the task's rows ({task.rows}) rounded up to a power of two"
    if s["bn"] > max(16, task.ctx):
        return f"BN={s['bn']} exceeds the context {task.ctx}"
    return None


def attention_dot_shape(task: AttentionTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    """BM >= 64 runs on wgmma (whole warpgroups); a tile with fewer scores than threads idles some."""
    bm = attention_bm(task, s)
    if bm >= 64 and s["num_warps"] < 4:
        return f"BM={bm} runs on wgmma, which needs whole warpgroups (4, 8 or 16 warps), got {s['num_warps']}"
    if bm * s["bn"] < 32 * s["num_warps"]:
        return (f"a {bm}x{s['bn']} score tile has fewer values than the {32 * s['num_warps']} threads "
                f"of {s['num_warps']} warps")
    return None


def attention_shared_memory_fits(task: AttentionTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    need = attention_smem_bytes(task, s)
    if need > hw.smem_per_block:
        return (f"shared memory of the K/V tiles x {s['num_stages']} stages and the Q tile = {need} B "
                f"exceeds {hw.smem_per_block} B")
    return None


def attention_fits_registers(task: AttentionTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    per_thread = attention_values_per_thread(task, s)
    if per_thread > hw.max_acc_regs:
        return (f"accumulator and scores need {per_thread:g} fp32 registers per thread (> {hw.max_acc_regs}) "
                f"with {s['num_warps']} warps")
    return None


ATTENTION_CONSTRAINTS: tuple[AttentionConstraint, ...] = (
    attention_tile_fits_problem,
    attention_dot_shape,
    attention_shared_memory_fits,
    attention_fits_registers,
)

# The first value of each knob fills a stored schedule that leaves the knob out. (The decode
# heuristic, attention.heuristic_schedule, picks its slices and key blocks by the batch bucket.)
ATTENTION_DECODE_KNOBS: tuple[Knob, ...] = (
    Knob("splits", (16, 1, 2, 4, 8, 32, 64, 128)),
    Knob("bn", (32, 16, 64, 128, 256)),
    Knob("num_warps", (4, 1, 2, 8)),
    Knob("num_stages", (2, 1, 3, 4)),
)
ATTENTION_PREFILL_KNOBS: tuple[Knob, ...] = (
    Knob("bm", (64, 16, 32, 128, 256)),
    Knob("bn", (32, 16, 64, 128, 256)),
    Knob("num_warps", (4, 1, 2, 8, 16)),
    Knob("num_stages", (2, 1, 3, 4)),
)


@dataclass(frozen=True)
class AttentionSpace(_WholeSchedule):
    """The schedules of the attention template for one target: decode tasks draw from
    ``decode_knobs``, prefill tasks from ``prefill_knobs``. Every schedule it returns is accepted
    by ``attention_schedule`` and passes ``constraints``."""

    hw: Hopper = H200
    decode_knobs: tuple[Knob, ...] = ATTENTION_DECODE_KNOBS
    prefill_knobs: tuple[Knob, ...] = ATTENTION_PREFILL_KNOBS
    constraints: tuple[AttentionConstraint, ...] = ATTENTION_CONSTRAINTS
    _sorted: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False, compare=False)

    template = "attention"

    def knobs_for(self, task: AnyTask) -> tuple[Knob, ...]:
        return self.decode_knobs if task.shape == "decode" else self.prefill_knobs

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None:
        """The first rule ``s`` breaks for ``task`` (the template's own check first), or None."""
        if not isinstance(task, AttentionTask):
            return f"the attention space does not schedule {task.template} tasks"
        want = {k.name for k in self.knobs_for(task)}
        if set(s) != want:
            return f"a {task.shape} attention schedule has the knobs {sorted(want)}, got {sorted(s)}"
        try:
            attention_schedule(self.emit(s))
        except (ScheduleError, TypeError, KeyError) as e:
            return str(e)
        for check in self.constraints:
            reason = check(task, s, self.hw)
            if reason is not None:
                return reason
        return None


# --- every template ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spaces:
    """The spaces of several templates behind one face: each call goes to the space of the task's
    template (``of``)."""

    by_template: Mapping[str, Space]

    def of(self, task: AnyTask) -> Space:
        space = self.by_template.get(task.template)
        if space is None:
            raise ValueError(f"no schedule space for template {task.template!r}")
        return space

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None:
        return self.of(task).why_invalid(task, s)

    def emit(self, s: Mapping[str, int]) -> Schedule:
        raise TypeError("Spaces.emit needs the task's template: call of(task).emit(s)")

    def complete(self, s: Mapping[str, int]) -> Schedule:
        raise TypeError("Spaces.complete needs the task's template: call of(task).complete(s)")

    def all_valid(self, task: AnyTask) -> list[Schedule]:
        return self.of(task).all_valid(task)

    def sample(self, task: AnyTask, rng: random.Random, n: int, tries: int = 50) -> list[Schedule]:
        return self.of(task).sample(task, rng, n, tries)

    def mutate(self, task: AnyTask, s: Mapping[str, int], rng: random.Random, tries: int = 20) -> Schedule | None:
        return self.of(task).mutate(task, s, rng, tries)

    def crossover(self, task: AnyTask, a: Mapping[str, int], b: Mapping[str, int], rng: random.Random,
                  tries: int = 10) -> Schedule | None:
        return self.of(task).crossover(task, a, b, rng, tries)


# The tunable templates and their spaces (explicit: no registration on import).
def _makers() -> dict[str, Callable[[Hopper], Space]]:
    """The tunable templates and their spaces (explicit: no registration on import; the fused
    decode kernels' live in ``space_fused``, which builds on this module)."""
    from inferx.autotune.space_fused import AttentionOSpace, MlpSpace

    return {"gemm": GemmSpace, "attention": AttentionSpace, "mlp": MlpSpace, "attention_o": AttentionOSpace}


def space_for(template: str, target: str) -> Space:
    """The schedule space of ``template`` on ``target``; ValueError for a template with none."""
    makers = _makers()
    if template not in makers:
        raise ValueError(f"no schedule space for template {template!r}")
    return makers[template](HARDWARE.get(target, H200))


def spaces_for(target: str) -> Spaces:
    """Every tunable template's space on ``target``, dispatching on each task's template."""
    return Spaces({t: make(HARDWARE.get(target, H200)) for t, make in _makers().items()})


def complete(space: Space, s: Mapping[str, int]) -> Schedule:
    """A stored schedule as a point of the space: knobs it does not name take their default."""
    return space.complete(s)


def dedupe(schedules: Sequence[Mapping[str, int]]) -> list[Schedule]:
    """``schedules`` in order with repeats dropped."""
    seen: dict[str, Schedule] = {}
    for s in schedules:
        seen.setdefault(schedule_key(s), dict(s))
    return list(seen.values())
