"""The GEMM template: ``y = x[..., K] @ W + bias`` with an optional norm prologue and any
epilogue the tile emitter can express (bias, activations, SiLU-times-up, residual add, casts,
split/reshape/transpose into heads, RoPE, KV-cache write).

Applies to a kernel whose body is ``[rmsnorm | layernorm] -> linear -> epilogue``. The norm is
fused without a separate pass over x: the K loop accumulates the row statistics while it feeds
``x * gamma`` to the dot, and the accumulator is scaled at the end:
``rmsnorm(x) @ W = rsqrt(mean(x^2) + eps) * ((x * gamma) @ W)``. RoPE needs each element's
partner (``d +- rot/2``); the K loop keeps a second accumulator over the partner rows of W, so
rotation happens in registers. Tile shapes: BM x BN x BK, powers of two, chosen by ``schedule``.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from inferx.compiler.families.common.hardware import HOPPER_SMS
from inferx.compiler.families.common.partials import row_sum_squares
from inferx.compiler.families.common.rope import (
    hoisted_rope,
    pairing,
    partner_expr,
    partner_swap,
    rope_regions,
    rope_row_inputs,
)
from inferx.compiler.families.common.rows import GEMV_MAX_ROWS, gated_split, norm_operand, norm_scale
from inferx.compiler.families.common.source import module_source as _module
from inferx.compiler.families.common.splitk import split_k_reduce, split_k_scratch
from inferx.compiler.families.common.tile import GRID_WAIT, Emitter, Tile, attr_str
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import get_float
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp
from inferx.compiler.ir.types import DType, TensorType
from inferx.passes.fold_norm_weights import weight_only
from inferx.runtime.kernel_source import KernelSource, Param, Scratch

# Prefill GEMMs of few rows (batch x seq) stream their weights about as often as they multiply
# them: on GPU targets the compiler generates a variant of each prefill GEMM for prompts of up to
# each of these many rows, whose tiles fill the SMs at its rows (see ``gemm_heuristic``; the
# tuner measures each at its rows), and the launch plan picks one by rows. Each is a task bucket
# (``autotune.task.rows_bucket``).
PREFILL_ROW_BUCKETS = (128, 512)

# x values per thread a split-K program may hold for its row statistics, and the longest K range
# whose statistics it takes so (``early_stats``)
EARLY_STATS_VALUES = 64
EARLY_STATS_SPAN = 512


def early_stats(bm: int, span: int, num_warps: int) -> bool:
    """Whether a split-K program with a folded RMSNorm takes its rows' statistics from x loaded
    ahead of its K loop ([BM, span] values, summed after the loop) rather than from a pass over x
    before it. The pass's latency stands in front of the program's weight stream, a sizeable
    share of a small decode GEMM's time. Against the pass, early loads are faster over short
    ranges and slower over long ones (docs/performance.md), hence ``EARLY_STATS_SPAN``.
    Summing squares inside the K loop costs more still on mma.sync tiles, and on wgmma tiles the x
    tile shared by the dot and the sums computed wrong results in Triton 3.6. The tile must fit
    in a few registers a thread, and
    ``span`` be a power of two (one ``tl.arange``)."""
    return (span & (span - 1) == 0 and span <= EARLY_STATS_SPAN
            and bm * span <= EARLY_STATS_VALUES * 32 * num_warps)



NORMS = (*nn.RMS_NORMS, nn.LayerNormOp)


@dataclass(frozen=True)
class GemmSchedule:
    bm: int
    bn: int
    bk: int
    num_warps: int = 4
    num_stages: int = 2
    # Split-K (dot path): SPLIT_K programs per output tile each reduce K / SPLIT_K of the product
    # into fp32 partials; the last to arrive sums them and runs the prologue's scaling and the
    # epilogue. More programs for few-row GEMMs whose N alone does not fill 132 SMs.
    split_k: int = 1
    # TMA (dot path): x and W tiles come through tensor descriptors made on the device (the copy
    # engine fills shared memory, no address arithmetic per element); each program keeps its two
    # 128-byte descriptors in the compiler's global scratch. For boxes of contiguous W rows only
    # (see ``tma_applies``); a gated GEMM loads its gate and up rows as one box of 2*BN rows
    # where they are stored in pairs (interleave-pairs), else as two boxes.
    tma: int = 0
    # Persistent grid (dot path, no split-K): PERSISTENT x 132 programs (an H100/H200 has 132
    # SMs) loop over the output tiles, the loop flattened where Triton can (so the next tile's
    # loads may start under this one's epilogue). 0: one program per tile.
    persistent: int = 0
    # Tile order (dot path): 0 walks every row tile of one column of W tiles before the next
    # column (W tiles reused across all rows, x re-read per column); GROUP_M > 0 walks GROUP_M row
    # tiles across all the columns before the next group (x tiles of the group stay in L2 while
    # the W columns stream past), the grid one-dimensional.
    group_m: int = 0
    # Unrolled K loop (GEMV mode): the loop becomes straight-line code (``tl.static_range``), so
    # every step's W loads may be issued before the first products are reduced (num_stages then
    # means nothing). It helps some decode GEMVs and slows others (docs/performance.md), so the
    # tuner picks it per task.
    unroll: int = 0
    # Deferred reduction (GEMV mode, one row): each K step adds its products into [BN, BK] fp32
    # sums (and x's squares into [1, BK]), reduced over K once after the loop, so a step is loads
    # and FMAs: a reduction per step runs across the program's warps and converts its result's
    # layout through shared memory (Triton 3.6's TTGIR for the Llama-3.2-1B down GEMV on 8 warps:
    # two layout conversions and a cross-warp reduction each step). Not yet measured.
    defer: int = 0

    @property
    def gemv(self) -> bool:
        return self.bm <= GEMV_MAX_ROWS

    def to_dict(self) -> dict[str, int]:
        """The schedule as the tuning database stores it (split_k, tma, persistent, group_m, unroll
        and defer only when on)."""
        d = {"bm": self.bm, "bn": self.bn, "bk": self.bk, "num_warps": self.num_warps, "num_stages": self.num_stages}
        if self.split_k != 1:
            d["split_k"] = self.split_k
        if self.tma:
            d["tma"] = self.tma
        if self.persistent:
            d["persistent"] = self.persistent
        if self.group_m:
            d["group_m"] = self.group_m
        if self.unroll:
            d["unroll"] = self.unroll
        if self.defer:
            d["defer"] = self.defer
        return d


def applies(kernel: KernelOp) -> str | None:
    """None if this template implements the kernel, else the reason it does not."""
    ops = list(kernel.body.block.ops)
    i = 1 if isinstance(ops[0], NORMS) else 0
    if i >= len(ops) or not isinstance(ops[i], nn.LinearOp):
        return "the body does not start with [norm ->] linear"
    if i == 1 and ops[1].operands[0] != ops[0].results[0]:
        return "the norm does not feed the linear"
    return None


def generate(kernel: KernelOp, name: str, schedule: GemmSchedule, target: str = "sm_90",
             preload: bool = False, grid_wait: bool = False) -> KernelSource:
    """The kernel's Triton source under ``schedule`` (the family object supplies the heuristic's
    when there is no record). ``preload``: a GEMV whose W is a stored weight loads its first
    W tiles before anything else, and with ``grid_wait`` (a kernel made safe for PDL, see
    ``codegen.with_grid_dependency``) then waits for the kernel before it (``GRID_WAIT``)."""
    sched = schedule
    gemv = sched.gemv  # decode: W streamed once per program of BM <= 8 rows, no dot
    em = Emitter(kernel, name)
    ops = list(kernel.body.block.ops)
    norm = ops[0] if isinstance(ops[0], NORMS) else None
    lin = ops[1 if norm else 0]
    assert isinstance(lin, nn.LinearOp)
    x_val = norm.operands[0] if norm else lin.input
    x_t, y_t = x_val.type, lin.result.type
    assert isinstance(x_t, TensorType) and isinstance(y_t, TensorType)
    if not isinstance(x_t.shape[-1], int) or not isinstance(y_t.shape[-1], int):
        raise em.error(lin, "K and N must be static")
    k_dim, n_dim = x_t.shape[-1], y_t.shape[-1]
    layout = attr_str(lin, "w_layout", "nk")
    low = x_t.dtype in (DType.f16, DType.bf16)
    epilogue = ops[(2 if norm else 1) :]
    # Row sums of squares of an output (norm-stats): reduced across the row block's programs
    # after the epilogue, not a tile op
    row_sums = [o for o in epilogue if isinstance(o, nn.SumSquaresOp)]
    if len(row_sums) > 1:
        raise em.error(row_sums[1], "one row-sum output per GEMM is generated")
    epilogue = [o for o in epilogue if not isinstance(o, nn.SumSquaresOp)]
    pre = isinstance(norm, nn.RMSNormSumSquaresOp)  # the statistics come as an input
    regions = rope_regions(em, lin, epilogue)
    partner = partner_expr(regions)
    paired = pairing(regions, sched.bn) if partner else None
    gated = gated_split(lin, epilogue)
    n_tile = n_dim // 2 if gated else n_dim
    if gated:
        epilogue = [o for o in epilogue if o not in gated.ops]
    pairs = bool(gated and gated.pairs)

    split = sched.split_k
    defer = bool(sched.defer)
    if defer and (not gemv or sched.bm != 1 or isinstance(norm, nn.LayerNormOp)):
        raise em.error(lin, f"a deferred reduction is generated in GEMV mode at BM 1 without LayerNorm: {sched}")
    acc_shape = "(BN, BK)" if defer else "(BM, BN)"
    k_range = f"0, {k_dim}"
    if split > 1:
        if gemv:
            raise em.error(lin, f"split-K is generated for the dot path (BM >= 16), not GEMV mode: {sched}")
        if isinstance(norm, nn.LayerNormOp):
            raise em.error(norm, "split-K with a LayerNorm prologue is not generated")
        if k_dim % (split * sched.bk):
            raise em.error(lin, f"split-K {split} x BK {sched.bk} must divide K={k_dim}")
        k_range = f"k_lo, k_lo + {k_dim // split}"

    n_tiles = -(-n_tile // sched.bn)
    x_ptr, w_ptr = f"in{_idx(x_val)}", f"in{_idx(lin.weight)}"
    if sched.tma:  # made once per program, before any tile loop
        why = tma_applies(sched, layout, bool(partner and not paired), paired, norm, k_dim, x_t.dtype, lin, pairs)
        if why is not None:
            raise em.error(lin, f"TMA loads: {why} ({sched})")
        em.emit(f"x_desc = tl.make_tensor_descriptor({x_ptr}, shape=[{em.dim(sy.product(x_t.shape[:-1]))}, "
                f"{k_dim}], strides=[{k_dim}, 1], block_shape=[BM, BK])")
        box = "2 * BN" if pairs else "BN"
        em.emit(f"w_desc = tl.make_tensor_descriptor({w_ptr}, shape=[{n_dim}, {k_dim}], strides=[{k_dim}, 1], "
                f"block_shape=[{box}, BK])")
    if sched.group_m and gemv:
        raise em.error(lin, f"a grouped tile order is generated for the dot path: {sched}")
    if sched.persistent and (gemv or split > 1):
        raise em.error(lin, f"a persistent grid is generated for the dot path without split-K: {sched}")
    if sched.persistent or sched.group_m:  # a linear tile index
        em.emit(f"num_m = tl.cdiv({em.dim(sy.product(x_t.shape[:-1]))}, BM)")
        if sched.persistent:
            # Flattened (the next tile's loads may start under this one's epilogue), except around
            # the row-sum reduction's branch and loop, which Triton 3.6 does not flatten
            flatten = ", flatten=True" if not row_sums else ""
            em.emit(f"for tile in tl.range(tl.program_id(0), num_m * {n_tiles}, tl.num_programs(0){flatten}):")
            em.indent += 1  # the rest of the kernel is one tile's work
        else:
            em.emit("tile = tl.program_id(0)")
        _tile_coords(em, sched.group_m, n_tiles)
    else:
        em.emit("pid_m = tl.program_id(0)")
        em.emit("pid_n = tl.program_id(1)")
    if split > 1:
        em.emit("pid_k = tl.program_id(2)")
        em.emit(f"k_lo = pid_k * {k_dim // split}")
    em.emit("r = pid_m * BM + tl.arange(0, BM)")
    if paired and paired != "t":
        em.emit("t = pid_n * BN + tl.arange(0, BN)")
        em.emit(f"c = {paired}")
    else:
        em.emit("c = pid_n * BN + tl.arange(0, BN)")
    rows = em.dim(sy.product(x_t.shape[:-1]))
    em.emit(f"M = {rows}")
    em.emit("rm = r < M")
    em.emit(f"cn = c < {n_tile}")
    # A gated GEMM on the dot path interleaves: one [BM, 2*BN] accumulator whose column 2j is
    # gate column j and 2j+1 up column j, split in registers after the loop. One wide dot instead
    # of two narrow ones, which is markedly faster for long prompts (docs/performance.md).
    # With the W rows stored in pairs (interleave-pairs) a tile's
    # 2*BN rows are contiguous: one load, one TMA box, also under split-K. With the halves
    # stored apart the rows are gathered (no split-K); under TMA, where each box is a run of
    # contiguous rows, gate and up rows come as two boxes into two accumulators instead.
    interleaved = bool(gated) and not gemv and (pairs or (split == 1 and not sched.tma))
    if interleaved:
        em.emit("t2 = tl.arange(0, 2 * BN)")
        em.emit("cj = pid_n * BN + t2 // 2")
        em.emit("cw = pid_n * 2 * BN + t2" if pairs else f"cw = cj + (t2 % 2) * {n_tile}")
        em.emit(f"cwn = cj < {n_tile}")
        em.emit("acc2 = tl.zeros((BM, 2 * BN), dtype=tl.float32)")
    else:
        em.emit(f"acc = tl.zeros({acc_shape}, dtype=tl.float32)")
    # W rows of the gate half (gc) and the up half (pc) of output columns c
    gc = "c"
    if pairs:
        gc = "gc"
        em.emit("gc = 2 * c")
        em.emit("pc = gc + 1")
    elif gated:
        em.emit(f"pc = c + {n_tile}")
    if gated and not interleaved:
        em.emit(f"accp = tl.zeros({acc_shape}, dtype=tl.float32)")
    # A second accumulator over other weight rows: the up half of a gated split, or RoPE partners
    # when a tile does not already hold them (with paired columns they are a swap of halves).
    second = (gated and not interleaved) or (partner and not paired)
    has_accp = bool(second or interleaved)  # an accp after the K loop (split off acc2 or its own)
    if partner and not paired:
        em.emit(f"pc = c + {partner}")
        em.emit(f"accp = tl.zeros({acc_shape}, dtype=tl.float32)")
    # No K masks where BK divides K (masked loads cost a few percent of a large GEMM's time)
    ragged = k_dim % sched.bk != 0
    precision = "" if low else ', input_precision="ieee"'

    def w_tile(cols: str, cmask: str = "cn", n: str = "") -> str:
        """A tile of W rows ``cols`` at the K step whose names end in ``n``."""
        kk, km = f"kk{n}", f"km{n}"
        if gemv:  # [BN, BK]: K is contiguous, so each row is one run of 16-byte loads
            where = (
                f"{cols}[:, None] * {k_dim} + {kk}[None, :]"
                if layout == "nk"
                else f"{kk}[None, :] * {n_dim} + {cols}[:, None]"
            )
            return f"tl.load({w_ptr} + {where}, mask={cmask}[:, None] & {km}[None, :], other=0)"
        kmw = f" & {km}[:, None]" if ragged else ""
        if layout == "nk":
            return f"tl.load({w_ptr} + {cols}[None, :] * {k_dim} + {kk}[:, None], mask={cmask}[None, :]{kmw}, other=0)"
        return f"tl.load({w_ptr} + {kk}[:, None] * {n_dim} + {cols}[None, :], mask={cmask}[None, :]{kmw}, other=0)"

    def accumulate(acc: str, w: str, a: str) -> None:
        if defer:  # [BN, BK] products of one row, summed over K after the loop
            em.emit(f"{acc} += {w}.to(tl.float32) * {a}.to(tl.float32)")
        elif gemv and sched.bm == 1:  # one row of x against BN rows of W: multiply and reduce, no tensor cores
            em.emit(f"{acc} += tl.sum({w}.to(tl.float32) * {a}.to(tl.float32), 1)[None, :]")
        elif gemv:  # BM rows against the same [BN, BK] tile: [BM, BN, BK] products reduced over K
            em.emit(f"{acc} += tl.sum({w}.to(tl.float32)[None, :, :] * {a}.to(tl.float32)[:, None, :], 2)")
        else:
            if not low:
                em.emit(f"{w} = {w}.to(tl.float32)")
            em.emit(f"{acc} += tl.dot({a}, {w}{precision})")

    # Preload (decode GEMVs under PDL): the first K step's W tiles are loaded before the grid wait,
    # while the kernel before this one still runs; W must be a stored weight, which no kernel writes.
    preload = preload and gemv and weight_only(kernel.operands[_idx(lin.weight)])
    if preload:
        em.emit("kk0 = tl.arange(0, BK)")
        em.emit(f"km0 = kk0 < {k_dim}")
        em.emit(f"w0 = {w_tile(gc, n='0')}")
        if second:
            em.emit(f"wp0 = {w_tile('pc', n='0')}")
        if grid_wait:
            em.emit(GRID_WAIT)
    if pre:
        assert isinstance(norm, nn.RMSNormSumSquaresOp)
        em.emit(f"ss = tl.load(in{_idx(norm.sumsq)} + r, mask=rm, other=0)")
    elif norm is not None:
        em.emit("ss = tl.zeros((BM, BK), dtype=tl.float32)" if defer else "ss = tl.zeros((BM,), dtype=tl.float32)")
        if isinstance(norm, nn.LayerNormOp):
            em.emit("s1 = tl.zeros((BM,), dtype=tl.float32)")
            em.emit("gw = tl.zeros((BN,), dtype=tl.float32)")
            em.emit("bw = tl.zeros((BN,), dtype=tl.float32)")
    g = norm_scale(kernel, norm) if norm is not None else None
    folded = isinstance(norm, nn.RMSNormOp) and g is None and not gemv
    span = k_dim // split
    early = folded and split > 1 and early_stats(sched.bm, span, sched.num_warps)
    if early:
        # A split-K program's rows of x over its K range, loaded before the K loop and summed
        # after it: the loads are in flight under the weight stream, where a pass of their own
        # stood before it (why and when: ``early_stats``)
        em.emit(f"xs1 = tl.load({x_ptr} + r[:, None] * {k_dim} + (k_lo + tl.arange(0, {span}))[None, :], "
                "mask=rm[:, None], other=0)")
    elif folded:
        # The scale is folded into W (fold-norm-weights): the row statistics come from a pass of
        # their own over x, so the main loop is a plain GEMM whose x tiles go to the dot as loaded
        # in chunks of 256 columns where they divide the range (faster than chunks of BK for long
        # prompts; docs/performance.md)
        chunk = max(sched.bk, 256) if span % max(sched.bk, 256) == 0 else sched.bk
        em.emit(f"for k1 in range({k_range}, {chunk}):")
        em.indent += 1
        em.emit(f"kk1 = k1 + tl.arange(0, {chunk})")
        k1_mask = f" & (kk1 < {k_dim})[None, :]" if span % chunk else ""
        em.emit(f"a1 = tl.load({x_ptr} + r[:, None] * {k_dim} + kk1[None, :], "
                f"mask=rm[:, None]{k1_mask}, other=0).to(tl.float32)")
        em.emit("ss += tl.sum(a1 * a1, 1)")
        em.indent -= 1
    ln_g = norm_operand(norm, "weight") if isinstance(norm, nn.LayerNormOp) else None
    ln_b = norm_operand(norm, "bias") if isinstance(norm, nn.LayerNormOp) else None

    def k_step(n: str) -> None:
        """One K step: x's slice, the norm's sums, W's tiles into the accumulators. Names end in
        ``n``; the step "0" is the first, whose W tiles were preloaded."""
        kk, km, a, w, wp = (f"{v}{n}" for v in ("kk", "km", "a", "w", "wp"))
        if not n:
            em.emit(f"{kk} = k0 + tl.arange(0, BK)")
            em.emit(f"{km} = {kk} < {k_dim}")
        kmx = f" & {km}[None, :]" if ragged else ""
        if sched.tma:  # rows past M and columns past K read as zeros
            em.emit(f"{a} = x_desc.load([pid_m * BM, k0])")
        else:
            em.emit(f"{a} = tl.load({x_ptr} + r[:, None] * {k_dim} + {kk}[None, :], mask=rm[:, None]{kmx}, other=0)")
        if norm is not None and not folded and not (pre and g is None):
            em.emit(f"{a} = {a}.to(tl.float32)")
            if not pre:
                em.emit(f"ss += {a} * {a}" if defer else f"ss += tl.sum({a} * {a}, 1)")
            if g is not None:
                em.emit(f"g{n} = tl.load(in{_idx(g)} + {kk}, mask={km}, other=0).to(tl.float32)")
                em.emit(f"{a} = {a} * g{n}[None, :]")
            if isinstance(norm, nn.LayerNormOp):
                em.emit(
                    "s1 += tl.sum(tl.load(" + f"{x_ptr} + r[:, None] * {k_dim} + {kk}[None, :], "
                    f"mask=rm[:, None] & {km}[None, :], other=0).to(tl.float32), 1)"
                )
            if low and not gemv:
                em.emit(f"{a} = {a}.to({_tl(x_t.dtype)})")
        elif not low:
            em.emit(f"{a} = {a}.to(tl.float32)")
        loaded = n == "0"
        if interleaved and sched.tma:  # pairs: the tile's 2*BN rows as one box
            em.emit(f"{w} = w_desc.load([pid_n * 2 * BN, k0]).T")
            accumulate("acc2", w, a)
        elif interleaved:
            em.emit(f"{w} = {w_tile('cw', 'cwn')}")
            accumulate("acc2", w, a)
        elif sched.tma:  # [BN, BK] rows of W, K contiguous, taken transposed by the dot
            em.emit(f"{w} = w_desc.load([pid_n * BN, k0]).T")
            accumulate("acc", w, a)
        else:
            if not loaded:
                em.emit(f"{w} = {w_tile(gc)}")
            accumulate("acc", w, a)
        if second and sched.tma:  # the up half's rows: the same box n_tile rows further on
            em.emit(f"{wp} = w_desc.load([{n_tile} + pid_n * BN, k0]).T")
            accumulate("accp", wp, a)
        elif second:
            if not loaded:
                em.emit(f"{wp} = {w_tile('pc')}")
            accumulate("accp", wp, a)
        if isinstance(norm, nn.LayerNormOp):
            em.emit(f"wf{n} = {w}.to(tl.float32)")
            gk = (f"tl.load(in{_idx(ln_g)} + {kk}, mask={km}, other=0).to(tl.float32)" if ln_g is not None
                  else f"{km}.to(tl.float32)")
            bk_axis = ("[None, :]", 1) if gemv else ("[:, None]", 0)
            em.emit(f"gw += tl.sum(({gk}){bk_axis[0]} * wf{n}, {bk_axis[1]})")
            if ln_b is not None:
                bk = f"tl.load(in{_idx(ln_b)} + {kk}, mask={km}, other=0).to(tl.float32)"
                em.emit(f"bw += tl.sum({bk}{bk_axis[0]} * wf{n}, {bk_axis[1]})")

    if preload:  # the first step, its W tiles already loaded: names ending in 0, none carried by the loop
        k_step("0")
        k_range = f"BK, {k_dim}"
    em.emit(f"for k0 in {'tl.static_range' if sched.unroll else 'range'}({k_range}, BK):")
    em.indent += 1
    k_step("")
    em.indent -= 1
    if early:
        em.emit("xf1 = xs1.to(tl.float32)")
        em.emit("ss = tl.sum(xf1 * xf1, 1)")
    if interleaved:
        em.emit("acc, accp = tl.split(tl.reshape(acc2, (BM, BN, 2)))")
    if defer:
        em.emit("acc = tl.sum(acc, 1)[None, :]")
        if second:
            em.emit("accp = tl.sum(accp, 1)[None, :]")
        if norm is not None and not pre:
            em.emit("ss = tl.sum(ss, 1)")
    if split > 1:
        split_k_reduce(em, second=has_accp, norm=norm is not None and not pre, n_tiles=n_tiles)
    if norm is not None:
        eps = get_float(norm.attributes, "eps")
        if isinstance(norm, nn.RMS_NORMS):
            em.emit(f"scale = tl.rsqrt(ss / {k_dim} + {eps!r})")
            em.emit("acc = acc * scale[:, None]")
            if has_accp:
                em.emit("accp = accp * scale[:, None]")
        else:
            em.emit(f"mu = s1 / {k_dim}")
            em.emit(f"rstd = tl.rsqrt(ss / {k_dim} - mu * mu + {eps!r})")
            em.emit("acc = rstd[:, None] * (acc - mu[:, None] * gw[None, :]) + bw[None, :]")
            if partner or gated:
                raise em.error(norm, "LayerNorm prologue with RoPE or a gated split is not generated")
    if lin.bias is not None:
        em.emit(f"acc += tl.load(in{_idx(lin.bias)} + {gc}, mask=cn, other=0).to(tl.float32)[None, :]")
        if has_accp:
            em.emit(f"accp += tl.load(in{_idx(lin.bias)} + pc, mask=cn, other=0).to(tl.float32)[None, :]")
    if paired:  # each tile is [lo half | hi half] of the same pairs: the partner of one is the other
        em.emit(partner_swap(regions, sched.bn))
    rows_shape = list(x_t.shape[:-1])
    row_inputs = rope_row_inputs(epilogue, rows_shape)
    for v in row_inputs:
        em.emit(f"row{_idx(v)} = tl.load(in{_idx(v)} + r, mask=rm, other=0)")
    # cos and sin by the GPU's approximations in tiles, by polynomials in GEMVs (why: sincos)
    hoisted = hoisted_rope(em, epilogue, regions, row_inputs, fast=not gemv) if paired else None
    lead = em.unravel("r[:, None]", y_t.shape[:-1])
    for v in row_inputs:
        em.row_values[v] = (f"row{_idx(v)}[:, None]", list(lead))
    if hoisted is not None:
        em.applied.update(hoisted)
    mask = "(rm[:, None] & cn[None, :])"
    if gated:
        for acc, r in zip(("acc", "accp"), gated.results, strict=True):
            em.values[r] = Tile(acc, [*lead, "c[None, :]"], mask, r.type)  # type: ignore[arg-type]
    em.values[lin.result] = Tile(
        "acc", [*lead, "c[None, :]"], "(rm[:, None] & cn[None, :])", y_t, "accp" if partner else None
    )
    yields = list(ops[-1].operands) if isinstance(ops[-1], YieldOp) else []
    em.deferred.update(yields.index(o.results[0]) for o in row_sums if o.results[0] in yields)
    em.run_epilogue(epilogue)
    params = em.params()
    m_code = em.dim(sy.product(x_t.shape[:-1]))
    row_scratch: list[tuple[str, Scratch]] = []
    for op in row_sums:
        row_scratch += row_sum_squares(em, op, yields, n_tiles, m_code, sched.bm)
    grid: tuple[str, ...] = (f"cdiv({m_code}, {sched.bm})", f"cdiv({n_tile}, {sched.bn})")
    if sched.persistent:
        grid = (f"min(cdiv({m_code}, {sched.bm}) * {n_tiles}, {sched.persistent * HOPPER_SMS})",)
    elif sched.group_m:
        grid = (f"cdiv({m_code}, {sched.bm}) * {n_tiles}", "1")
    constexprs = {"BM": sched.bm, "BN": sched.bn, "BK": sched.bk}
    scratch: tuple[Scratch, ...] = ()
    if split > 1:
        tiles = f"((({m_code}) + {sched.bm - 1}) // {sched.bm}) * {n_tiles}"
        named = split_k_scratch(tiles, split, sched.bm, sched.bn, has_accp, norm is not None)
        params += [Param(n, "scratch", index=i, dtype=sc.dtype) for i, (n, sc) in enumerate(named)]
        scratch = tuple(sc for _, sc in named)
        grid = (*grid, str(split))
        constexprs["SPLIT_K"] = split
    if row_scratch:
        first = len(scratch)
        params += [Param(n, "scratch", index=first + i, dtype=sc.dtype) for i, (n, sc) in enumerate(row_scratch)]
        scratch = (*scratch, *(sc for _, sc in row_scratch))
    args = ", ".join([p.name for p in params] + [f"{c}: tl.constexpr" for c in constexprs])
    source = _module(name, args, em.lines)
    return KernelSource(
        name=name,
        template="gemm",
        source=source,
        params=tuple(params),
        grid=grid,
        constexprs=constexprs,
        aliases=em.aliases,
        scratch=scratch,
        num_warps=sched.num_warps,
        num_stages=sched.num_stages,
    )


def _tile_coords(em: Emitter, group_m: int, n_tiles: int) -> None:
    """``pid_m``, ``pid_n`` of the linear tile index ``tile`` over ``num_m`` row tiles: row tiles
    first (one column of W tiles at a time), or with ``group_m`` groups of that many row tiles,
    each walked across every column (row tiles first within a column of the group)."""
    if not group_m:
        em.emit("pid_m = tile % num_m")
        em.emit("pid_n = tile // num_m")
        return
    em.emit(f"first_m = (tile // {group_m * n_tiles}) * {group_m}")
    em.emit(f"group_rows = tl.minimum(num_m - first_m, {group_m})")
    em.emit(f"pid_m = first_m + (tile % {group_m * n_tiles}) % group_rows")
    em.emit(f"pid_n = (tile % {group_m * n_tiles}) // group_rows")


def _idx(v: SSAValue) -> int:
    from xdsl.ir import BlockArgument

    if not isinstance(v, BlockArgument):
        raise ValueError(f"expected a kernel input, got {v}")
    return v.index


def _tl(dtype: DType) -> str:
    from inferx.compiler.families.common.tile import TL_DTYPE

    return TL_DTYPE[dtype]


# ON_GPU: the module is compiled for a GPU, not run by Triton's interpreter (which the runtime
# selects with TRITON_INTERPRET while it loads the module): inline PTX only under it.
def tma_applies(sched: GemmSchedule, layout: str, gathered: bool, paired: str | None, norm: Operation | None,
                k_dim: int, x_dtype: DType, lin: nn.LinearOp, pairs: bool = False) -> str | None:
    """Why TMA loads cannot feed this GEMM's dot, or None: they need the dot path, tile dims up to
    256 (a TMA box; gate|up ``pairs`` take 2*BN rows per box), W in [N, K] layout with each tile's
    rows contiguous (a gated split stored apart takes its gate and up rows as two boxes; RoPE
    partners outside the tile and permuted RoPE columns are not boxes), no LayerNorm prologue, and
    16-byte aligned rows of x and W."""
    w_t = lin.weight.type
    assert isinstance(w_t, TensorType)
    itemsize = {DType.f32: 4, DType.f16: 2, DType.bf16: 2}
    if sched.gemv:
        return "GEMV mode loads rows of W itself"
    if max(sched.bm, sched.bn * (2 if pairs else 1), sched.bk) > 256:
        return "a TMA box is at most 256 elements per dim" + (" (gate|up pairs: 2*BN rows)" if pairs else "")
    if layout != "nk":
        return f"W is stored {layout}, not [N, K]"
    if gathered:
        return "the tiles gather W rows (RoPE partners in other tiles)"
    if paired not in (None, "t"):
        return "the tiles hold permuted RoPE columns"
    if isinstance(norm, nn.LayerNormOp):
        return "a LayerNorm prologue is not generated with TMA"
    for what, dt in (("x", x_dtype), ("W", w_t.dtype)):
        if dt not in itemsize or (k_dim * itemsize[dt]) % 16:
            return f"rows of {what} ({k_dim} x {dt.value}) are not a multiple of 16 bytes"
    return None
