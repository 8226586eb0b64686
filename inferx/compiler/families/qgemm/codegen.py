"""The int4 GEMM template: ``y = x[..., K] @ W^T`` with ``W[N, K]`` held as packed 4-bit codes
(``ix.qlinear``, its bias added to the product), after an optional RMSNorm of x, then any
epilogue the tile emitter can express (residual add, activations, casts, reshape/transpose into
heads, RoPE, KV-cache write, a gated ``act(gate) * up`` of the output's two halves).

Applies to a kernel whose body starts with an ``ix.qlinear`` of kernel inputs, or with an
``ix.rmsnorm`` of a kernel input feeding one. Each program computes a BM x BN tile of y. Its K
loop, in steps of BK within one quantization group, loads the packed bytes of its W rows (uint8
[BN, BK / 2], two codes to a byte, element 2j in the low nibble), unpacks them into [BN, BK]
codes (``tl.interleave`` of the low and high nibbles), dequantizes them in fp32 with the group's
scale and minimum (``q * s + m``, or ``(q - 8) * s`` without minimums: ``quant.dequantize``'s
numerics), scales x's columns by the norm's weight and ``col_scale`` where there are any, and
accumulates ``x_tile @ w_tile^T`` in fp32: ``tl.dot`` on the dot path (BM >= 16), a broadcast
product summed over K in GEMV mode (BM <= GEMV_MAX_ROWS). The norm's row statistics are summed
from the same x loads and applied to the accumulators after the loop (``rmsnorm(x) @ W^T =
rsqrt(mean(x^2) + eps) * ((x * g) @ W^T)``). Under RoPE each tile holds both partners of the
columns it computes where ``pairing`` finds such a layout (the partner accumulator is a swap of
the tile's halves, so each W row is read once), else a second accumulator reads the partner
rows; a gated split keeps a second accumulator over the up half's rows.
"""

from __future__ import annotations

from xdsl.ir import BlockArgument, SSAValue

from inferx.compiler.families.common.int4 import UNPACK_ASM, dequantized_128, unpacked_bits
from inferx.compiler.families.common.linear_tile import (
    bind_tile_results,
    emit_tile_columns,
    linear_applies,
    linear_op,
    linear_prologue,
    tile_layout,
)
from inferx.compiler.families.common.partials import row_sum_squares
from inferx.compiler.families.common.rows import norm_scale
from inferx.compiler.families.common.source import module_source
from inferx.compiler.families.common.splitk import split_k_reduce, split_k_scratch
from inferx.compiler.families.common.tile import TL_DTYPE, Emitter
from inferx.compiler.families.qgemm.schedule import QGemmSchedule, check_fits
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import get_float, get_int
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp
from inferx.compiler.ir.types import DType, TensorType
from inferx.runtime.kernel_source import KernelSource, Param, Scratch

TEMPLATE = "qgemm"


def prologue_of(kernel: KernelOp) -> nn.RMSNormOp | nn.RMSNormSumSquaresOp | None:
    """The RMSNorm the kernel's qlinear reads, when the body starts with one (its statistics as an
    input where norm-stats gave it them: ``ix.rmsnorm_ss``)."""
    return linear_prologue(kernel, nn.QLinearOp, nn.RMS_NORMS)  # type: ignore[return-value]


def qlinear_of(kernel: KernelOp) -> nn.QLinearOp:
    return linear_op(kernel, nn.QLinearOp, nn.RMS_NORMS)  # type: ignore[return-value]


def applies(kernel: KernelOp) -> str | None:
    """None if this template implements the kernel, else the reason it does not."""
    return linear_applies(kernel, nn.QLinearOp, nn.RMS_NORMS, "a qlinear")


def generate(kernel: KernelOp, name: str, schedule: QGemmSchedule) -> KernelSource:
    """The kernel's Triton source under ``schedule``; CodegenError where the schedule does not fit
    the kernel's group (``schedule.check_fits``)."""
    sched = schedule
    em = Emitter(kernel, name)
    norm = prologue_of(kernel)
    q = qlinear_of(kernel)
    x_t, y_t = q.input.type, q.result.type
    assert isinstance(x_t, TensorType) and isinstance(y_t, TensorType)
    k_dim, n_dim = x_t.shape[-1], y_t.shape[-1]
    assert isinstance(k_dim, int) and isinstance(n_dim, int)
    group = get_int(q.attributes, "group")
    why = check_fits(sched, group, k_dim)
    if why is not None:
        raise em.error(q, f"{why}: {sched}")
    ops = list(kernel.body.block.ops)
    epilogue = ops[2 if norm is not None else 1:]
    # row sums of squares of an output (norm-stats): reduced across the row block's programs
    # after the epilogue, not a tile op
    row_sums = [o for o in epilogue if isinstance(o, nn.SumSquaresOp)]
    if len(row_sums) > 1:
        raise em.error(row_sums[1], "one row-sum output per GEMM is generated")
    epilogue = [o for o in epilogue if not isinstance(o, nn.SumSquaresOp)]
    pre = isinstance(norm, nn.RMSNormSumSquaresOp)  # the statistics come as an input
    layout = tile_layout(em, q, epilogue, sched.bn)
    partner, paired, gated = layout.partner, layout.paired, layout.gated
    n_tile, epilogue = layout.n_tile, layout.epilogue
    x_ptr = f"in{_idx(norm.input if norm is not None else q.input)}"
    codes, scales = (f"in{_idx(v)}" for v in (q.codes, q.scales))
    mins = f"in{_idx(q.mins)}" if q.mins is not None else None
    x_scales = [f"in{_idx(v)}" for v in (norm_scale(kernel, norm) if norm is not None else None, q.col_scale)
                if v is not None]
    rows = em.dim(sy.product(x_t.shape[:-1]))

    split = sched.split_k
    k_range = f"0, {k_dim}"
    if split > 1:
        if sched.gemv or sched.dense:
            raise em.error(q, f"split-K is generated on the dot path over codes (no dense weight): {sched}")
        if k_dim % (split * sched.bk):
            raise em.error(q, f"split-K {split} x BK {sched.bk} must divide K={k_dim}")
        k_range = f"k_lo, k_lo + {k_dim // split}"
    if sched.prefetch and not sched.deferred:
        raise em.error(q, f"prefetch is generated in GEMV mode at BM 1: {sched}")

    e = em.emit
    ids = ("pid_k = tl.program_id(2)", f"k_lo = pid_k * {k_dim // split}") if split > 1 else ()
    # (W rows, accumulator, dequantized tile) of the tile's columns and of a second set of rows
    pairs = tuple((cols, acc, "w" if acc == "acc" else "wp")
                  for cols, acc in emit_tile_columns(em, layout, rows, after_ids=ids))
    if sched.dense:
        if q.dense is None or sched.gemv:
            raise em.error(q, f"a dense-weight schedule needs the qlinear's dense operand and the dot path: {sched}")
        if sched.tma and ((partner and paired != "t") or (gated and gated.pairs)):
            raise em.error(q, f"TMA loads need each tile's W rows contiguous (RoPE partners in the tile in their "
                              f"natural order, no interleaved gate|up): {sched}")
        starts = {"c": "pid_n * BN", "pc": f"pid_n * BN + {n_tile}"}  # TMA: c, or the up half's run
        _dense_k_loop(em, sched, pairs, x_ptr, f"in{_idx(q.dense)}", norm is not None and not pre, k_dim, n_dim,
                      rows, starts)
    elif sched.deferred:
        _deferred_k_loop(em, sched, pairs, x_ptr, codes, scales, mins, x_scales, norm is not None and not pre, k_dim,
                         group)
    else:
        _k_loop(em, sched, pairs, x_ptr, codes, scales, mins, x_scales, norm is not None and not pre, k_dim, group,
                x_t.dtype, k_range)
    n_tiles = -(-n_tile // sched.bn)
    if split > 1:
        split_k_reduce(em, second=len(pairs) > 1, norm=norm is not None and not pre, n_tiles=n_tiles)
    if isinstance(norm, nn.RMSNormSumSquaresOp):
        e(f"ss = tl.load(in{_idx(norm.sumsq)} + r, mask=rm, other=0)")
    if norm is not None:
        e(f"scale = tl.rsqrt(ss / {k_dim} + {get_float(norm.attributes, 'eps')!r})")
        for _, acc, _ in pairs:
            e(f"{acc} = {acc} * scale[:, None]")
    if q.bias is not None:
        for cols, acc, _ in pairs:
            e(f"{acc} += tl.load(in{_idx(q.bias)} + {cols}, mask=cn, other=0).to(tl.float32)[None, :]")
    # cos and sin of the ropes' rotation by the GPU's approximations on the dot path, as the bf16 GEMM
    bind_tile_results(em, q, layout, sched.bn, fast=not sched.gemv)
    yields = list(ops[-1].operands) if isinstance(ops[-1], YieldOp) else []
    em.deferred.update(yields.index(o.results[0]) for o in row_sums if o.results[0] in yields)
    em.run_epilogue(epilogue)
    row_scratch: list[tuple[str, Scratch]] = []
    for op in row_sums:
        row_scratch += row_sum_squares(em, op, yields, n_tiles, rows, sched.bm)
    params = em.params()
    grid: tuple[str, ...] = (f"cdiv({rows}, {sched.bm})", f"cdiv({n_tile}, {sched.bn})")
    constexprs = {"BM": sched.bm, "BN": sched.bn, "BK": sched.bk}
    named: list[tuple[str, Scratch]] = []
    if split > 1:
        tiles = f"((({rows}) + {sched.bm - 1}) // {sched.bm}) * {n_tiles}"
        named = split_k_scratch(tiles, split, sched.bm, sched.bn, len(pairs) > 1, norm is not None)
        grid = (*grid, str(split))
        constexprs["SPLIT_K"] = split
    named += row_scratch
    params += [Param(n, "scratch", index=i, dtype=sc.dtype) for i, (n, sc) in enumerate(named)]
    args = ", ".join([p.name for p in params] + [f"{c}: tl.constexpr" for c in constexprs])
    return KernelSource(
        name=name,
        template=TEMPLATE,
        source=module_source(name, args, em.lines),
        params=tuple(params),
        grid=grid,
        constexprs=constexprs,
        aliases=em.aliases,
        scratch=tuple(sc for _, sc in named),
        num_warps=sched.num_warps,
        num_stages=sched.num_stages,
    )


def _idx(v: SSAValue) -> int:
    assert isinstance(v, BlockArgument)
    return v.index


def _dequantize(em: Emitter, w: str, cols: str, codes: str, scales: str, mins: str | None, k_dim: int,
                group: int) -> None:
    """Loads the BK / 2 bytes of each of BN rows ``cols`` at step k0, unpacks them along K (low
    nibble first) and dequantizes them with the step's one group scale (and minimum)."""
    e = em.emit
    e(f"b = {_codes_step(codes, cols, k_dim)}")
    e(f"{w} = tl.interleave(b & 15, b >> 4).to(tl.float32)")
    _group_scales(em, cols, scales, mins, k_dim, group)
    if mins is not None:
        e(f"{w} = {w} * s[:, None] + mn[:, None]")
    else:
        e(f"{w} = ({w} - 8.0) * s[:, None]")


def _codes_step(codes: str, cols: str, k_dim: int) -> str:
    """The load of step k0's packed bytes of W rows ``cols``: uint8 [BN, BK / 2]."""
    return f"tl.load({codes} + {cols}[:, None] * {k_dim // 2} + (k0 // 2 + j)[None, :], mask=cn[:, None], other=0)"


def _group_scales(em: Emitter, cols: str, scales: str, mins: str | None, k_dim: int, group: int) -> None:
    """``s`` (and ``mn``): the scale (and minimum) of W rows ``cols`` in the step's group ``g``."""
    em.emit(f"s = tl.load({scales} + {cols} * {k_dim // group} + g, mask=cn, other=0).to(tl.float32)")
    if mins is not None:
        em.emit(f"mn = tl.load({mins} + {cols} * {k_dim // group} + g, mask=cn, other=0).to(tl.float32)")


# 16-bit floats whose bits OR-ed with a code q in 0..15 read OFFSET + q exactly: bf16 128 + q,
# f16 1024 + q. A tile made so needs no conversion instruction (a quarter-rate one on Hopper).
MAGIC = {DType.bf16: ("0x4300", 128.0), DType.f16: ("0x6400", 1024.0)}


# From this many rows a tile on the dot path with 16-bit x dequantizes its W tile (``_tile_dot``);
# below it the codes go to the tensor cores as they are (``_offset_codes_dot``).
TILE_MIN_BM = 64


def _k_loop(em: Emitter, sched: QGemmSchedule, pairs: tuple[tuple[str, str, str], ...], x_ptr: str, codes: str,
            scales: str, mins: str | None, x_scales: list[str], stats: bool, k_dim: int, group: int,
            x_dtype: DType, k_range: str) -> None:
    """The K loop of the dot path and of GEMV mode at BM > 1 over ``k_range`` (all of K, or the
    program's slice under split-K): steps of BK within one group, each
    [BM, BN] product accumulated as it is made (``tl.dot``, or summed over the step's K). With
    ``stats``, the rows' sums of squares of x into ``ss`` [BM] before x is scaled.

    On the dot path with 16-bit x, two forms, by BM. From ``TILE_MIN_BM`` rows (prefill tiles) the
    W tile is dequantized in fp32, scaled by x's column scales (the norm's weight, ``col_scale``)
    instead of x, rounded to x's dtype and accumulated by ``tl.dot`` into one accumulator: the
    per-code work is spread over many rows, and x goes to the tensor cores as loaded. Below it
    the codes go to the tensor cores as ``OFFSET + q`` (``MAGIC``: one OR a code, no conversion),
    and the step's product ``d = x @ (OFFSET + q)^T`` becomes ``x @ W^T`` in its epilogue:
    ``d * s + (m - OFFSET * s) * sum(x)`` (``m = -8 s`` without minimums), with ``sum(x)`` over
    the step's columns of x as the dot reads them. The fp32 sum carries the offset's share
    (OFFSET / 15 of the codes' at most), which costs a few of its 24 bits; the products
    themselves are exact."""
    e = em.emit
    low = x_dtype in (DType.f16, DType.bf16)
    tl_dtype = TL_DTYPE.get(x_dtype)
    magic = MAGIC.get(x_dtype) if not sched.gemv else None
    tile = magic is not None and sched.bm >= TILE_MIN_BM
    e("j = tl.arange(0, BK // 2)")
    _loop_head(em, pairs, stats, k_range)
    e("kk = k0 + tl.arange(0, BK)")
    e(f"a = tl.load({x_ptr} + r[:, None] * {k_dim} + kk[None, :], mask=rm[:, None], other=0)")
    if tile:
        if stats:
            e("af = a.to(tl.float32)")
            e("ss += tl.sum(af * af, 1)")
        if x_scales:
            e("xg = " + " * ".join(f"tl.load({sc} + kk).to(tl.float32)" for sc in x_scales))
    else:
        if x_scales or stats or not low or sched.gemv:
            e("a = a.to(tl.float32)")
        if stats:
            e("ss += tl.sum(a * a, 1)")
        for sc in x_scales:
            e(f"a = a * tl.load({sc} + kk).to(tl.float32)[None, :]")
        if (x_scales or stats) and low and not sched.gemv:
            e(f"a = a.to({tl_dtype})")
    e(f"g = k0 // {group}")
    if magic is not None and not tile:
        e("xs = tl.sum(a.to(tl.float32), 1)")
    for cols, acc, w in pairs:
        if tile:
            _tile_dot(em, str(tl_dtype), bool(x_scales), cols, acc, w, codes, scales, mins, k_dim, group)
        elif magic is not None:
            _offset_codes_dot(em, magic, tl_dtype, cols, acc, w, codes, scales, mins, k_dim, group)
        else:
            _dequantize(em, w, cols, codes, scales, mins, k_dim, group)
            if sched.gemv:
                e(f"{acc} += tl.sum(a[:, None, :] * {w}[None, :, :], 2)")
            else:  # fp32 x: the dequantized tile as it is
                e(f"{acc} = tl.dot(a, tl.trans({w}), {acc}, input_precision=\"ieee\")")
    em.indent -= 1


def _loop_head(em: Emitter, pairs: tuple[tuple[str, str, str], ...], stats: bool, k_range: str) -> None:
    """The [BM, BN] accumulators, the rows' sums of squares with ``stats``, and the head of the K
    loop over ``k_range`` (the emitter left inside it)."""
    for _, acc, _ in pairs:
        em.emit(f"{acc} = tl.zeros((BM, BN), dtype=tl.float32)")
    if stats:
        em.emit("ss = tl.zeros((BM,), dtype=tl.float32)")
    em.emit(f"for k0 in range({k_range}, BK):")
    em.indent += 1


def _dense_k_loop(em: Emitter, sched: QGemmSchedule, pairs: tuple[tuple[str, str, str], ...], x_ptr: str, dense: str,
                  stats: bool, k_dim: int, n_dim: int, rows: str, starts: dict[str, str]) -> None:
    """The K loop over a dense weight (``QGemmSchedule.dense``): W rows ``cols`` of the row-major
    [N, K] weight at the start of ``dense``, which already holds the norm's weight and the column
    scale, into ``tl.dot`` with x's tile as loaded (through TMA descriptors with ``sched.tma``:
    rows past M and N read as zeros; ``starts`` gives each row set's first row, its rows being a
    run). With ``stats``, x's rows' sums of squares into ``ss``."""
    e = em.emit
    if sched.tma:
        e(f"x_desc = tl.make_tensor_descriptor({x_ptr}, shape=[{rows}, {k_dim}], strides=[{k_dim}, 1], "
          "block_shape=[BM, BK])")
        e(f"w_desc = tl.make_tensor_descriptor({dense}, shape=[{n_dim}, {k_dim}], strides=[{k_dim}, 1], "
          "block_shape=[BN, BK])")
    _loop_head(em, pairs, stats, f"0, {k_dim}")
    if sched.tma:
        e("a = x_desc.load([pid_m * BM, k0])")
    else:
        e("kk = k0 + tl.arange(0, BK)")
        e(f"a = tl.load({x_ptr} + r[:, None] * {k_dim} + kk[None, :], mask=rm[:, None], other=0)")
    if stats:
        e("af = a.to(tl.float32)")
        e("ss += tl.sum(af * af, 1)")
    for cols, acc, w in pairs:
        if sched.tma:  # the tile's rows are a run from its first
            e(f"{w} = w_desc.load([{starts[cols]}, k0])")
        else:
            e(f"{w} = tl.load({dense} + {cols}[:, None] * {k_dim} + kk[None, :], mask=cn[:, None], other=0)")
        e(f"{acc} = tl.dot(a, tl.trans({w}), {acc})")
    em.indent -= 1


def _tile_dot(em: Emitter, tl_dtype: str, x_scaled: bool, cols: str, acc: str, w: str, codes: str, scales: str,
              mins: str | None, k_dim: int, group: int) -> None:
    """One dot-path step from ``TILE_MIN_BM`` rows (``_k_loop``'s docstring): W rows ``cols``
    unpacked into the floats 128 + q (``UNPACK_ASM_128`` on the GPU), dequantized by one fused
    multiply-add against ``m - 128 s`` (``-136 s`` without minimums), times x's column
    scales ``xg`` where ``x_scaled``, rounded to x's dtype, and ``x @ W^T`` added to ``acc``."""
    e = em.emit
    e(f"b = {_codes_step(codes, cols, k_dim)}")
    unpacked_bits(em, "b", 0x43000000, 2)
    _group_scales(em, cols, scales, mins, k_dim, group)
    dequantized_128(em, w, mins is not None)
    if x_scaled:
        e(f"{w} = {w} * xg[None, :]")
    e(f"{acc} = tl.dot(a, tl.trans({w}.to({tl_dtype})), {acc})")


def _offset_codes_dot(em: Emitter, magic: tuple[str, float], tl_dtype: str | None, cols: str, acc: str, w: str,
                      codes: str, scales: str, mins: str | None, k_dim: int, group: int) -> None:
    """One dot-path step with 16-bit x (``_k_loop``'s docstring): W rows ``cols`` as the codes
    OR-ed into ``MAGIC``'s bits, their product with x made ``x @ W^T`` into ``acc``."""
    e = em.emit
    bits, offset = magic
    e(f"b = {_codes_step(codes, cols, k_dim)}.to(tl.int16)")
    e(f"{w} = tl.interleave((b & 15) | {bits}, (b >> 4) | {bits}).to({tl_dtype}, bitcast=True)")
    _group_scales(em, cols, scales, mins, k_dim, group)
    if mins is not None:
        e(f"cst = mn - {offset!r} * s")
    else:
        e(f"cst = {-(offset + 8.0)!r} * s")
    e(f"d = tl.dot(a, tl.trans({w}))")
    e(f"{acc} += d * s[None, :] + xs[:, None] * cst[None, :]")


def _deferred_k_loop(em: Emitter, sched: QGemmSchedule, pairs: tuple[tuple[str, str, str], ...], x_ptr: str,
                     codes: str, scales: str, mins: str | None, x_scales: list[str], stats: bool, k_dim: int,
                     group: int) -> None:
    """GEMV mode at BM 1: a step of BK is S = BK / GS sub-steps of GS = min(BK, group) columns,
    each within one group. W's step is loaded as [BN, S, GS / 2] bytes, so that each sub-step's
    scale ([BN, S], loaded once per step) broadcasts over its codes with no reshape. The low and
    high nibbles stay apart, each against x's even or odd columns (x's step loaded whole and split
    in registers), so no interleave. A nibble q becomes the float 2^23 + q (``UNPACK_ASM`` on the
    GPU) and ``q * s`` is one fused multiply-add with ``-2^23 * s`` (exact: the product is not
    rounded, and ``2^23 * s`` is a power of two times s), so a code costs that and the
    multiply-add into the accumulator. The minimum (``-8 * s`` without minimums) is applied per
    sub-step to the sum of x's columns, ``m * sum(x)``, into [BN, S]. The products are added into
    [BN, S, GS / 2] fp32 accumulators and summed over K after the loop, not at every step; the
    norm's squares of x (``stats``) likewise into [S, GS / 2], then ``ss`` [1].

    A step's loads (x, x's column scales, each W row set's codes, scales and minimums) come first,
    then its arithmetic. With ``sched.prefetch`` they are issued one step ahead (the next step's
    loads, masked off past K, before this step's arithmetic, carried by the loop), so a program's
    loads from memory overlap its own arithmetic: Triton pipelines only loads that feed a dot."""
    e = em.emit
    gs = min(sched.bk, group)
    e(f"js = tl.arange(0, BK // {gs})")
    e(f"jj = tl.arange(0, {gs // 2})")
    # x's step as [S, GS / 2, 2]: column pairs, split into the even and odd columns
    e(f"kx = js[:, None, None] * {gs} + 2 * jj[None, :, None] + tl.arange(0, 2)[None, None, :]")
    for _, acc, _ in pairs:
        e(f"{acc}3 = tl.zeros((BN, BK // {gs}, {gs // 2}), dtype=tl.float32)")
        e(f"{acc}m = tl.zeros((BN, BK // {gs}), dtype=tl.float32)")
    if stats:
        e(f"ss3 = tl.zeros((BK // {gs}, {gs // 2}), dtype=tl.float32)")

    def loads(k: str, within: str | None, sfx: str) -> list[str]:
        """The step at column ``k``'s loads into names ending in ``sfx``, masked by ``within`` too
        where given (the condition that the step lies within K). Returns the names."""
        names = [f"xa{sfx}"]
        k = k if k.isidentifier() or k.isdigit() else f"({k})"
        more = f" & {within}" if within else ""
        e(f"xa{sfx} = tl.load({x_ptr} + pid_m * {k_dim} + {k} + kx, mask=(pid_m < M){more}, other=0)")
        for i, sc in enumerate(x_scales):
            for half in (0, 1):
                names.append(f"xg{i}{half}{sfx}")
                e(f"{names[-1]} = tl.load({sc} + {k} + js[:, None] * {gs} + 2 * jj[None, :] + {half}"
                  f"{f', mask={within}, other=0' if within else ''})")
        e(f"g{sfx} = ({k} + js * {gs}) // {group}")
        for p, (cols, _, _) in enumerate(pairs):
            names.append(f"b{p}{sfx}")
            e(f"{names[-1]} = tl.load({codes} + {cols}[:, None, None] * {k_dim // 2} + ({k} // 2 + js * {gs // 2})"
              f"[None, :, None] + jj[None, None, :], mask=cn[:, None, None]{more}, other=0)")
            for name, ptr in (("s", scales), ("mn", mins)):
                if ptr is not None:
                    names.append(f"{name}{p}{sfx}")
                    e(f"{names[-1]} = tl.load({ptr} + {cols}[:, None] * {k_dim // group} + g{sfx}[None, :], "
                      f"mask=cn[:, None]{more}, other=0)")
        return names

    if sched.prefetch:
        ahead = loads("0", None, "_n")
    e(f"for k0 in range(0, {k_dim}, BK):")
    em.indent += 1
    if sched.prefetch:
        for name in ahead:
            e(f"{name[:-2]} = {name}")
        loads("k0 + BK", f"(k0 + BK < {k_dim})", "_n")
    else:
        loads("k0", None, "")
    e("a0, a1 = tl.split(xa.to(tl.float32))")
    if stats:
        e("ss3 += a0 * a0 + a1 * a1")
    for i, _ in enumerate(x_scales):
        for half in (0, 1):
            e(f"a{half} = a{half} * xg{i}{half}.to(tl.float32)")
    e("xs = tl.sum(a0 + a1, 1)")
    for p, (_, acc, _) in enumerate(pairs):
        e(f"s = s{p}.to(tl.float32)")
        if mins is not None:
            e(f"{acc}m += mn{p}.to(tl.float32) * xs[None, :]")
        else:
            e(f"{acc}m += (-8.0 * s) * xs[None, :]")
        e("s3 = s[:, :, None]")
        e("if ON_GPU:")
        em.indent += 1
        e(f"f0, f1 = tl.inline_asm_elementwise({UNPACK_ASM}, \"=r,=r,=r,=r,=r,=r,=r,=r,r\", [b{p}], "
          "dtype=(tl.int32, tl.int32), is_pure=True, pack=4)")
        e("so = s3 * -8388608.0")
        e("w0 = tl.fma(f0.to(tl.float32, bitcast=True), s3, so)")
        e("w1 = tl.fma(f1.to(tl.float32, bitcast=True), s3, so)")
        em.indent -= 1
        e("else:")
        em.indent += 1
        e(f"bi = b{p}.to(tl.int32)")
        e("w0 = (((bi & 15) | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0) * s3")
        e("w1 = (((bi >> 4) | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0) * s3")
        em.indent -= 1
        e(f"{acc}3 = tl.fma(w0, a0[None, :, :], {acc}3)")
        e(f"{acc}3 = tl.fma(w1, a1[None, :, :], {acc}3)")
    em.indent -= 1
    for _, acc, _ in pairs:
        e(f"{acc} = (tl.sum(tl.sum({acc}3, 2), 1) + tl.sum({acc}m, 1))[None, :]")
    if stats:
        e("ss = tl.sum(tl.reshape(ss3, (1, BK // 2)), 1)")
