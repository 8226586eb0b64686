"""The FP8 input template: ``ix.fp8_quantize`` of x, or of an RMSNorm of x, as a kernel that writes
x's rows as E4M3 bytes and their scales, for the prompt FP8 GEMMs that read them
(``ix.fp8_linear``'s ``row_scales``).

A program owns BM rows and walks K in steps of BK: with a norm, the rows' sums of squares (a
pass, or loaded where norm-stats made the norm ``ix.rmsnorm_ss``); then the rows' largest
magnitude of the norm's output rounded to x's dtype (a pass; none with a static ``x_scale``);
then each step divided by its row's scale, converted to E4M3 (``common.e4m3``) and stored. The
values are those the fp8gemm kernel quantizes in its own K loop, so the GEMM that reads them
computes what it would have.

A decode batch's kernel (x's rows without ``seq``) takes one row a program; in a batch bucket
below its quantize's ``min_rows`` it is an empty launch (``Fp8QuantSchedule.skip``: no program,
so a session launches nothing), where the GEMMs reading it quantize x in their tiles.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import BlockArgument, SSAValue

from inferx.compiler.families.common.e4m3 import emit_normed_rows, emit_row_scales, emit_to_bytes
from inferx.compiler.families.common.rows import norm_scale
from inferx.compiler.families.common.source import module_source
from inferx.compiler.families.common.tile import TL_DTYPE, Emitter
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.fp8 import FP8_MAX
from inferx.compiler.ir.ops_base import get_int
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import DType, TensorType
from inferx.runtime.kernel_source import KernelSource

TEMPLATE = "fp8quant"
NORMS = (nn.RMSNormOp, nn.RMSNormSumSquaresOp)


@dataclass(frozen=True)
class Fp8QuantSchedule:
    """BM rows a program, K in steps of BK (BK divides K); ``skip``: the row bucket's launch has
    no programs."""

    bm: int = 4
    bk: int = 512
    num_warps: int = 4
    skip: bool = False


def parts(kernel: KernelOp) -> tuple[nn.RMSNormOp | nn.RMSNormSumSquaresOp | None, nn.Fp8QuantizeOp]:
    """(the norm, or None; the quantize) of the kernel's body."""
    ops = list(kernel.body.block.ops)
    norm = ops[0] if isinstance(ops[0], NORMS) else None
    q = ops[1 if norm is not None else 0]
    assert isinstance(q, nn.Fp8QuantizeOp)
    return norm, q  # type: ignore[return-value]


def applies(kernel: KernelOp) -> str | None:
    """None if this template implements the kernel, else the reason it does not."""
    ops = list(kernel.body.block.ops)
    body = ops[1:] if ops and isinstance(ops[0], NORMS) else ops
    if len(body) != 2 or not isinstance(body[0], nn.Fp8QuantizeOp):
        return "the body is not an fp8_quantize (after an RMSNorm) and its yield"
    q = body[0]
    norm = ops[0] if body is not ops else None
    x = norm.input if isinstance(norm, NORMS) else q.input
    if not isinstance(x, BlockArgument) or (norm is not None and q.input is not norm.results[0]):
        return "the fp8_quantize does not read a kernel input or its norm"
    k = x.type.shape[-1]  # type: ignore[attr-defined]
    if not isinstance(k, int):
        return "K must be static"
    return None


def decode_rows(kernel: KernelOp) -> bool:
    """x's rows are a batch of single tokens (no ``seq`` among them)."""
    _, q = parts(kernel)
    return "seq" not in sy.symbols_of(sy.product(q.input.type.shape[:-1]))  # type: ignore[attr-defined]


def heuristic_schedule(kernel: KernelOp, target: str, rows: int | None) -> Fp8QuantSchedule:
    """BK: the largest of 1024 down to 16 dividing K (64 at most on the cpu target, whose
    interpreter runs a Python step per program and step); on the GPU 4 rows a program for
    prompts, 1 for a decode batch (a batch of 64 rows in 64 programs), 16 on the cpu target. An
    empty launch in a row bucket below the quantize's ``min_rows`` (``rows`` None: the largest)."""
    _, q = parts(kernel)
    k = q.input.type.shape[-1]  # type: ignore[attr-defined]
    top = 64 if target == "cpu" else 1024
    bk = next(b for b in (1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1) if b <= top and k % b == 0)
    skip = rows is not None and rows < get_int(q.attributes, "min_rows", 1)
    bm = 16 if target == "cpu" else 1 if decode_rows(kernel) else 4
    return Fp8QuantSchedule(bm, bk, 4, skip)


def generate(kernel: KernelOp, name: str, schedule: Fp8QuantSchedule) -> KernelSource:
    em = Emitter(kernel, name)
    norm, q = parts(kernel)
    x_v = norm.input if norm is not None else q.input
    x_t = x_v.type
    assert isinstance(x_t, TensorType)
    k = x_t.shape[-1]
    assert isinstance(k, int)
    if k % schedule.bk:
        raise em.error(q, f"BK {schedule.bk} must divide K = {k}")
    rows = em.dim(sy.product(x_t.shape[:-1]))
    e = em.emit
    if schedule.skip:
        return _empty(em, name, schedule)
    e("r = tl.program_id(0) * BM + tl.arange(0, BM)")
    e(f"rm = r < {rows}")
    e("kk = tl.arange(0, BK)")
    g = norm_scale(kernel, norm) if norm is not None else None
    value = emit_normed_rows(em, f"in{_idx(x_v)}", k, norm, g,
                             None if x_t.dtype is DType.f32 else TL_DTYPE[x_t.dtype])
    emit_row_scales(em, value, k, f"in{_idx(q.x_scale)}" if q.x_scale is not None else None)
    e("tl.store(out1 + r, sx, mask=rm)")
    e(f"for k0 in range(0, {k}, BK):")
    em.indent += 1
    value()
    e("a = a / sx[:, None]")
    if q.x_scale is not None:
        e(f"a = tl.minimum(tl.maximum(a, -{FP8_MAX!r}), {FP8_MAX!r})")
    emit_to_bytes(em, "a", "b")
    e(f"tl.store(out0 + r[:, None] * {k} + (k0 + kk)[None, :], b, mask=rm[:, None])")
    em.indent -= 1
    params = em.params()
    constexprs = {"BM": schedule.bm, "BK": schedule.bk}
    args = ", ".join([p.name for p in params] + [f"{c}: tl.constexpr" for c in constexprs])
    return KernelSource(
        name=name,
        template=TEMPLATE,
        source=module_source(name, args, em.lines),
        params=tuple(params),
        grid=(f"cdiv({rows}, {schedule.bm})",),
        constexprs=constexprs,
        num_warps=schedule.num_warps,
        num_stages=1,
    )


def _empty(em: Emitter, name: str, schedule: Fp8QuantSchedule) -> KernelSource:
    """The launch of a row bucket below ``min_rows``: no programs (the grid's one dim 0)."""
    em.emit("pass")
    params = em.params()
    constexprs = {"BM": schedule.bm, "BK": schedule.bk}
    args = ", ".join([p.name for p in params] + [f"{c}: tl.constexpr" for c in constexprs])
    return KernelSource(name=name, template=TEMPLATE, source=module_source(name, args, em.lines),
                        params=tuple(params), grid=("0",), constexprs=constexprs, num_warps=1, num_stages=1)


def _idx(v: SSAValue) -> int:
    assert isinstance(v, BlockArgument)
    return v.index
