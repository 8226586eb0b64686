"""The int4 GEMM template: ``y = x[..., K] @ W^T`` with ``W[N, K]`` held as packed 4-bit codes
(``ix.qlinear``), then any epilogue the tile emitter can express (residual add, activations,
casts, reshape/transpose into heads, RoPE, KV-cache write).

Applies to a kernel whose body starts with an ``ix.qlinear`` of kernel inputs (no prologue:
fuse leaves a norm before a quantized linear in a kernel of its own). Each program computes a
BM x BN tile of y. Its K loop, in steps of BK within one quantization group, loads the packed
bytes of its W rows (uint8 [BN, BK / 2], two codes to a byte, element 2j in the low nibble),
unpacks them into [BN, BK] codes (``tl.interleave`` of the low and high nibbles), dequantizes
them in fp32 with the group's scale and minimum (``q * s + m``, or ``(q - 8) * s`` without
minimums: ``quant.dequantize``'s numerics), scales x's columns by ``col_scale`` where there is
one, and accumulates ``x_tile @ w_tile^T`` in fp32: ``tl.dot`` on the dot path (BM >= 16), a
broadcast product summed over K in GEMV mode (BM <= GEMV_MAX_ROWS). Under RoPE a second
accumulator holds each column's partner (``common/rope.py``), so rotation happens in registers.
"""

from __future__ import annotations

from xdsl.ir import BlockArgument, SSAValue

from inferx.compiler.families.common.rope import partner_expr, rope_regions
from inferx.compiler.families.common.source import module_source
from inferx.compiler.families.common.tile import TL_DTYPE, Emitter, Tile
from inferx.compiler.families.qgemm.schedule import QGemmSchedule, check_fits
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import get_int
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import DType, TensorType
from inferx.runtime.kernel_source import KernelSource

TEMPLATE = "qgemm"


def qlinear_of(kernel: KernelOp) -> nn.QLinearOp:
    op = kernel.body.block.first_op
    assert isinstance(op, nn.QLinearOp)
    return op


def applies(kernel: KernelOp) -> str | None:
    """None if this template implements the kernel, else the reason it does not."""
    op = kernel.body.block.first_op
    if not isinstance(op, nn.QLinearOp):
        return "the body does not start with a qlinear"
    if not all(isinstance(v, BlockArgument) for v in op.operands):
        return "the qlinear's operands are not all kernel inputs"
    x_t, y_t = op.input.type, op.result.type
    assert isinstance(x_t, TensorType) and isinstance(y_t, TensorType)
    if not isinstance(x_t.shape[-1], int) or not isinstance(y_t.shape[-1], int):
        return "K and N must be static"
    return None


def generate(kernel: KernelOp, name: str, schedule: QGemmSchedule) -> KernelSource:
    """The kernel's Triton source under ``schedule``; CodegenError where the schedule does not fit
    the kernel's group (``schedule.check_fits``)."""
    sched = schedule
    em = Emitter(kernel, name)
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
    epilogue = ops[1:]
    partner = partner_expr(rope_regions(em, q, epilogue))
    low = x_t.dtype in (DType.f16, DType.bf16)
    x_ptr, codes, scales = (f"in{_idx(v)}" for v in (q.input, q.codes, q.scales))
    mins = f"in{_idx(q.mins)}" if q.mins is not None else None
    col = f"in{_idx(q.col_scale)}" if q.col_scale is not None else None
    rows = em.dim(sy.product(x_t.shape[:-1]))

    e = em.emit
    e("pid_m = tl.program_id(0)")
    e("pid_n = tl.program_id(1)")
    e("r = pid_m * BM + tl.arange(0, BM)")
    e("c = pid_n * BN + tl.arange(0, BN)")
    e(f"M = {rows}")
    e("rm = r < M")
    e(f"cn = c < {n_dim}")
    pairs = (("c", "acc", "w"), *((("pc", "accp", "wp"),) if partner else ()))
    if partner:
        e(f"pc = c + {partner}")
    if sched.deferred:
        _deferred_k_loop(em, sched, pairs, x_ptr, codes, scales, mins, col, k_dim, group)
    else:
        _k_loop(em, sched, pairs, x_ptr, codes, scales, mins, col, k_dim, group, low, TL_DTYPE.get(x_t.dtype))
    lead = em.unravel("r[:, None]", y_t.shape[:-1])
    em.values[q.result] = Tile("acc", [*lead, "c[None, :]"], "(rm[:, None] & cn[None, :])", y_t,
                               "accp" if partner else None)
    em.run_epilogue(epilogue)
    params = em.params()
    constexprs = {"BM": sched.bm, "BN": sched.bn, "BK": sched.bk}
    args = ", ".join([p.name for p in params] + [f"{c}: tl.constexpr" for c in constexprs])
    return KernelSource(
        name=name,
        template=TEMPLATE,
        source=module_source(name, args, em.lines),
        params=tuple(params),
        grid=(f"cdiv({rows}, {sched.bm})", f"cdiv({n_dim}, {sched.bn})"),
        constexprs=constexprs,
        aliases=em.aliases,
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
    e(f"b = tl.load({codes} + {cols}[:, None] * {k_dim // 2} + (k0 // 2 + j)[None, :], mask=cn[:, None], other=0)")
    e(f"{w} = tl.interleave(b & 15, b >> 4).to(tl.float32)")
    e(f"s = tl.load({scales} + {cols} * {k_dim // group} + g, mask=cn, other=0).to(tl.float32)")
    if mins is not None:
        e(f"mn = tl.load({mins} + {cols} * {k_dim // group} + g, mask=cn, other=0).to(tl.float32)")
        e(f"{w} = {w} * s[:, None] + mn[:, None]")
    else:
        e(f"{w} = ({w} - 8.0) * s[:, None]")


def _k_loop(em: Emitter, sched: QGemmSchedule, pairs: tuple[tuple[str, str, str], ...], x_ptr: str, codes: str,
            scales: str, mins: str | None, col: str | None, k_dim: int, group: int, low: bool,
            tl_dtype: str | None) -> None:
    """The K loop of the dot path and of GEMV mode at BM > 1: steps of BK within one group, each
    [BM, BN] product accumulated as it is made (``tl.dot``, or summed over the step's K)."""
    e = em.emit
    e("j = tl.arange(0, BK // 2)")
    for _, acc, _ in pairs:
        e(f"{acc} = tl.zeros((BM, BN), dtype=tl.float32)")
    e(f"for k0 in range(0, {k_dim}, BK):")
    em.indent += 1
    e("kk = k0 + tl.arange(0, BK)")
    e(f"a = tl.load({x_ptr} + r[:, None] * {k_dim} + kk[None, :], mask=rm[:, None], other=0)")
    if col is not None or not low or sched.gemv:
        e("a = a.to(tl.float32)")
    if col is not None:
        e(f"a = a * tl.load({col} + kk).to(tl.float32)[None, :]")
        if low and not sched.gemv:
            e(f"a = a.to({tl_dtype})")
    e(f"g = k0 // {group}")
    for cols, acc, w in pairs:
        _dequantize(em, w, cols, codes, scales, mins, k_dim, group)
        if sched.gemv:
            e(f"{acc} += tl.sum(a[:, None, :] * {w}[None, :, :], 2)")
        elif low:
            e(f"{acc} = tl.dot(a, tl.trans({w}.to({tl_dtype})), {acc})")
        else:
            e(f"{acc} = tl.dot(a, tl.trans({w}), {acc}, input_precision=\"ieee\")")
    em.indent -= 1


def _deferred_k_loop(em: Emitter, sched: QGemmSchedule, pairs: tuple[tuple[str, str, str], ...], x_ptr: str,
                     codes: str, scales: str, mins: str | None, col: str | None, k_dim: int, group: int) -> None:
    """GEMV mode at BM 1: a step of BK is S = BK / GS sub-steps of GS = min(BK, group) columns,
    each within one group. W's step is loaded as [BN, S, GS / 2] bytes, so that each sub-step's
    scale and minimum ([BN, S], loaded once per step) broadcast over its codes with no reshape.
    The low and high nibbles stay apart, each against x's even or odd columns, so no interleave;
    a nibble becomes fp32 exactly by OR-ing it into the mantissa of 2^23 and subtracting 2^23
    (full-rate integer and float ops, not a conversion instruction). The products are added into
    [BN, S, GS / 2] fp32 accumulators and summed over K after the loop, not at every step."""
    e = em.emit
    gs = min(sched.bk, group)
    e(f"js = tl.arange(0, BK // {gs})")
    e(f"jj = tl.arange(0, {gs // 2})")
    e(f"kx = js[:, None] * {gs} + 2 * jj[None, :]")  # the even columns of each sub-step
    for _, acc, _ in pairs:
        e(f"{acc}3 = tl.zeros((BN, BK // {gs}, {gs // 2}), dtype=tl.float32)")
    e(f"for k0 in range(0, {k_dim}, BK):")
    em.indent += 1
    for half in (0, 1):
        e(f"a{half} = tl.load({x_ptr} + pid_m * {k_dim} + k0 + kx + {half}, mask=pid_m < M, other=0).to(tl.float32)")
        if col is not None:
            e(f"a{half} = a{half} * tl.load({col} + k0 + kx + {half}).to(tl.float32)")
    e(f"g = (k0 + js * {gs}) // {group}")
    # codes q in 0..15: (q | 0x4B000000) is the float 2^23 + q; the minimum (or -8 * scale) is
    # added after the offset 2^23 is taken away, so no precision is lost
    offset = "8388608.0" if mins is not None else "8388616.0"
    for cols, acc, _ in pairs:
        e(f"b = tl.load({codes} + {cols}[:, None, None] * {k_dim // 2} + (k0 // 2 + js * {gs // 2})[None, :, None] "
          "+ jj[None, None, :], mask=cn[:, None, None], other=0).to(tl.int32)")
        e(f"q0 = ((b & 15) | 0x4B000000).to(tl.float32, bitcast=True) - {offset}")
        e(f"q1 = ((b >> 4) | 0x4B000000).to(tl.float32, bitcast=True) - {offset}")
        e(f"s = tl.load({scales} + {cols}[:, None] * {k_dim // group} + g[None, :], mask=cn[:, None], "
          "other=0).to(tl.float32)[:, :, None]")
        if mins is not None:
            e(f"mn = tl.load({mins} + {cols}[:, None] * {k_dim // group} + g[None, :], mask=cn[:, None], "
              "other=0).to(tl.float32)[:, :, None]")
            e(f"{acc}3 += (q0 * s + mn) * a0[None, :, :] + (q1 * s + mn) * a1[None, :, :]")
        else:
            e(f"{acc}3 += (q0 * s) * a0[None, :, :] + (q1 * s) * a1[None, :, :]")
    em.indent -= 1
    for _, acc, _ in pairs:
        e(f"{acc} = tl.sum(tl.sum({acc}3, 2), 1)[None, :]")
