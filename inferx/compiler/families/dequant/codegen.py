"""The dequantization template: ``ix.dequantize`` as a kernel that writes an int4 weight [N, K],
dequantized and rounded to the buffer's dtype, row-major into the start of its 1-D output (in
place where it has ``into``).

Each program unpacks a BN x BK block of codes (BK within one quantization group: one scale and
minimum per row) into the floats 128 + q (``common.int4``: byte permutes on the GPU), dequantizes
them with one fused multiply-add against ``m - 128 s`` (``-136 s`` without minimums), multiplies
them by the column scales (``norm_weight * col_scale``, in that order, as the int4 GEMM's prompt
tile does) and stores them. So the weight the reading GEMM gets is bit for bit the one its own
prompt tile would have made in registers.

Below its op's ``min_rows`` the reading GEMM reads the codes, so the kernel of that row bucket
is an empty launch (``DequantSchedule.skip``: no programs, so a session launches nothing)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import BlockArgument, SSAValue

from inferx.compiler.families.common.int4 import dequantized_128, unpacked_bits
from inferx.compiler.families.common.source import module_source
from inferx.compiler.families.common.tile import TL_DTYPE, Emitter
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_base import get_int
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import TensorType
from inferx.runtime.kernel_source import KernelSource

TEMPLATE = "dequant"


@dataclass(frozen=True)
class DequantSchedule:
    """BN rows by BK columns of W a program; ``skip``: the row bucket's launch does nothing."""

    bn: int = 64
    bk: int = 128
    num_warps: int = 4
    skip: bool = False


def dequantize_of(kernel: KernelOp) -> nn.DequantizeOp:
    op = kernel.body.block.first_op
    assert isinstance(op, nn.DequantizeOp)
    return op


def applies(kernel: KernelOp) -> str | None:
    """None if this template implements the kernel, else the reason it does not."""
    op = kernel.body.block.first_op
    if not isinstance(op, nn.DequantizeOp):
        return "the body does not start with a dequantize"
    if not all(isinstance(v, BlockArgument) for v in op.operands):
        return "the dequantize's operands are not all kernel inputs"
    if len(list(kernel.body.block.ops)) != 2:
        return "the body holds more than the dequantize"
    return None


def heuristic_schedule(kernel: KernelOp, target: str, rows: int | None) -> DequantSchedule:
    """An empty launch in a row bucket below ``min_rows`` (``rows`` None: the longest prompts'
    bucket), else 64 W rows by one group (up to 128 columns) a program."""
    op = dequantize_of(kernel)
    group = get_int(op.attributes, "group")
    skip = rows is not None and rows < get_int(op.attributes, "min_rows")
    return DequantSchedule(64, min(group, 128), 4, skip)


def generate(kernel: KernelOp, name: str, schedule: DequantSchedule) -> KernelSource:
    em = Emitter(kernel, name)
    op = dequantize_of(kernel)
    codes_t, out_t = op.codes.type, op.result.type
    assert isinstance(codes_t, TensorType) and isinstance(out_t, TensorType)
    n, k = codes_t.shape
    assert isinstance(n, int) and isinstance(k, int)
    group = get_int(op.attributes, "group")
    if group % schedule.bk and not schedule.skip:
        raise em.error(op, f"BK {schedule.bk} must divide the quantization group {group}")
    e = em.emit
    if schedule.skip:
        e("pass")
    else:
        codes, scales = (f"in{_idx(v)}" for v in (op.codes, op.scales))
        e("c = tl.program_id(0) * BN + tl.arange(0, BN)")
        e("k0 = tl.program_id(1) * BK")
        e(f"cn = c < {n}")
        e("j = tl.arange(0, BK // 2)")
        e(f"b = tl.load({codes} + c[:, None] * {k // 2} + (k0 // 2 + j)[None, :], mask=cn[:, None], other=0)")
        unpacked_bits(em, "b", 0x43000000, 2)
        e(f"s = tl.load({scales} + c * {k // group} + k0 // {group}, mask=cn, other=0).to(tl.float32)")
        if op.mins is not None:
            e(f"mn = tl.load(in{_idx(op.mins)} + c * {k // group} + k0 // {group}, mask=cn, other=0).to(tl.float32)")
        dequantized_128(em, "w", op.mins is not None)
        col_scales = [v for v in (op.norm_weight, op.col_scale) if v is not None]
        if col_scales:
            e("kk = k0 + tl.arange(0, BK)")
            e("xg = " + " * ".join(f"tl.load(in{_idx(v)} + kk).to(tl.float32)" for v in col_scales))
            e("w = w * xg[None, :]")
        e(f"tl.store(out0 + c[:, None] * {k} + (k0 + tl.arange(0, BK))[None, :], w.to({TL_DTYPE[out_t.dtype]}), "
          "mask=cn[:, None])")
    params = em.params()
    constexprs = {"BN": schedule.bn, "BK": schedule.bk}
    args = ", ".join([p.name for p in params] + [f"{c}: tl.constexpr" for c in constexprs])
    aliases = {0: _idx(op.into)} if op.into is not None else {}
    grid = ("0", "1") if schedule.skip else (f"cdiv({n}, {schedule.bn})", str(k // schedule.bk))
    return KernelSource(
        name=name,
        template=TEMPLATE,
        source=module_source(name, args, em.lines),
        params=tuple(params),
        grid=grid,
        constexprs=constexprs,
        aliases=aliases,
        num_warps=schedule.num_warps,
        num_stages=1,
    )


def _idx(v: SSAValue) -> int:
    assert isinstance(v, BlockArgument)
    return v.index
