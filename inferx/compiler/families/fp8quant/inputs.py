"""fp8-inputs: FP8 GEMMs read x quantized once by a kernel of its own.

A prompt's kernel (rows holding ``seq``):
    %y = ix.kernel <fp8gemm> (%x, %g, %c, %s) { %n = ix.rmsnorm %x, %g; ix.fp8_linear %n, %c, %s }
becomes
    %q, %r = ix.kernel <fp8quant> (%x, %g) { %n = ix.rmsnorm %x, %g; ix.fp8_quantize %n }
    %y = ix.kernel <fp8gemm> (%x, %g, %c, %s, %q, %r) { ix.fp8_linear %q', %c, %s row_scales %r' }

A decode kernel (rows of the batch, with ``decode-min-rows`` above 0) keeps its input and is
given x quantized as well, which it reads from that many rows:
    %q, %r = ix.kernel <fp8quant> (%x, %g) { ...; ix.fp8_quantize %n {min_rows = 64} }
    %y = ix.kernel <fp8gemm> (%x, %g, %c, %s, %q, %r) {
      %n = ix.rmsnorm %x, %g; ix.fp8_linear %n, %c, %s given %q', %r' {given_min_rows = 64} }
Below those rows the quantize kernel is an empty launch and the GEMM quantizes x in its tiles,
as before: at small batches a kernel more costs more than quantizing a few rows in every tile.

An fp8gemm kernel that quantizes x itself does it once per column tile of programs, reading x in
its dtype every time, and its loads of x feed arithmetic, which Triton does not pipeline; on E4M3
x the GEMM is a plain FP8 product whose loads go straight into the dot (docs/performance.md, "x
quantized once"). The values are the same: the quantize kernel makes what the GEMM's K loop
would (its norm, its rounding to x's dtype, its scales, static or per row). GEMMs that read the
same x through the same norm share one quantize kernel.

Applies to each kernel holding an ``ix.fp8_linear`` (the FP8 GEMMs) whose ``ix.fp8_linear``
reads a kernel input or an RMSNorm of one, and has no ``row_scales`` or ``given`` yet: prompts'
with ``prompts``, decode rows' with ``decode-min-rows``. Runs after fuse (and norm-stats).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from inferx.compiler.families.fp8quant.codegen import NORMS, TEMPLATE
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import int_attr
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp
from inferx.compiler.ir.types import TensorType


@dataclass(frozen=True)
class Fp8Inputs(ModulePass):
    name = "fp8-inputs"

    prompts: bool = True
    decode_min_rows: int = 0  # 0: decode kernels keep quantizing x in their tiles

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.decode_min_rows < 0:
            raise ValueError(f"decode-min-rows must be 0 (off) or more, got {self.decode_min_rows}")
        for func in [o for o in op.ops if isinstance(o, FuncOp)]:
            made: dict[tuple, tuple[SSAValue, SSAValue]] = {}
            for kernel in [k for k in func.body.block.ops if isinstance(k, KernelOp)]:
                found = _fp8_linear(kernel)
                if found is None:
                    continue
                if _prompt(found[0]):
                    if self.prompts:
                        _rewrite(kernel, *found, made, None)
                elif self.decode_min_rows:
                    _rewrite(kernel, *found, made, self.decode_min_rows)


def _prompt(f: nn.Fp8LinearOp) -> bool:
    x_t = f.input.type
    assert isinstance(x_t, TensorType)
    return "seq" in sy.symbols_of(sy.product(x_t.shape[:-1]))


def _fp8_linear(kernel: KernelOp) -> tuple[nn.Fp8LinearOp, nn.RMSNormOp | nn.RMSNormSumSquaresOp | None] | None:
    """(the linear, its norm or None) of an fp8gemm kernel this pass may rewrite."""
    f = next((o for o in kernel.body.block.ops if isinstance(o, nn.Fp8LinearOp)), None)
    if f is None or f.row_scales is not None or f.given is not None:
        return None
    norm = f.input.owner
    if isinstance(norm, NORMS) and norm.parent_block() is kernel.body.block:
        if not isinstance(norm.input, BlockArgument) or any(u.operation is not f for u in norm.results[0].uses):
            return None
        return f, norm
    return (f, None) if isinstance(f.input, BlockArgument) else None


def _outer(kernel: KernelOp, v: SSAValue | None) -> SSAValue | None:
    if v is None:
        return None
    assert isinstance(v, BlockArgument), "checked by _prompt_fp8_linear"
    return kernel.inputs[v.index]


def _rewrite(kernel: KernelOp, f: nn.Fp8LinearOp, norm: nn.RMSNormOp | nn.RMSNormSumSquaresOp | None,
             made: dict[tuple, tuple[SSAValue, SSAValue]], min_rows: int | None) -> None:
    """The kernel reading x quantized by an fp8quant kernel (made, or shared from ``made``): in
    place of x for a prompt (``min_rows`` None), beside it from ``min_rows`` rows for decode."""
    x = norm.input if norm is not None else f.input
    outer = [_outer(kernel, x)]
    if norm is not None:
        outer.append(_outer(kernel, norm.weight))
        outer.append(_outer(kernel, norm.sumsq) if isinstance(norm, nn.RMSNormSumSquaresOp) else None)
    else:
        outer += [None, None]
    outer.append(_outer(kernel, f.x_scale))
    eps = norm.attributes.get("eps") if norm is not None else None
    key = (*outer, eps, min_rows)
    if key not in made:
        made[key] = _quantize_kernel(kernel, norm, outer, min_rows)
    codes, scales = made[key]
    body = kernel.body.block
    a_codes = body.insert_arg(codes.type, len(body.args))
    a_scales = body.insert_arg(scales.type, len(body.args))
    kernel.operands = [*kernel.operands, codes, scales]
    x_t = f.input.type
    assert isinstance(x_t, TensorType)
    if min_rows is None:
        new = nn.Fp8LinearOp.make(a_codes, f.codes, f.scales, f.bias, None, a_scales,
                                  out_dtype=StringAttr(x_t.dtype.value))
    else:
        new = nn.Fp8LinearOp.make(f.input, f.codes, f.scales, f.bias, f.x_scale, None, a_codes, a_scales,
                                  given_min_rows=int_attr(min_rows))
    body.insert_op_before(new, f)
    f.result.replace_all_uses_with(new.results[0])
    body.erase_op(f)
    if min_rows is not None:
        return
    if norm is not None and not norm.results[0].uses:
        body.erase_op(norm)
    unused = [a for a in body.args if not a.uses]  # x and the norm's operands, read by the quantize kernel now
    keep = [v for v, a in zip(kernel.operands, body.args, strict=True) if a.uses]
    for a in unused:
        body.erase_arg(a)
    kernel.operands = keep


def _quantize_kernel(kernel: KernelOp, norm: nn.RMSNormOp | nn.RMSNormSumSquaresOp | None,
                     outer: list[SSAValue | None], min_rows: int | None
                     ) -> tuple[SSAValue, SSAValue]:
    """The fp8quant kernel of x (through ``norm``), put before ``kernel``: its (codes, scales);
    with ``min_rows``, one that may skip the work below that many rows."""
    ins = [v for v in outer if v is not None]
    body = Block(arg_types=[v.type for v in ins])
    args = iter(body.args)
    x, g, ss, xs = (next(args) if v is not None else None for v in outer)
    ops: list[Operation] = []
    n: SSAValue = x  # type: ignore[assignment]
    if norm is not None:
        eps = norm.attributes["eps"]
        nop = nn.RMSNormSumSquaresOp.make(x, g, ss, eps=eps) if ss is not None else nn.RMSNormOp.make(x, g, eps=eps)
        ops.append(nop)
        n = nop.results[0]
    q = nn.Fp8QuantizeOp.make(n, xs, min_rows=int_attr(min_rows) if min_rows is not None else None)
    ops += [q, YieldOp.build(operands=[[q.results[0], q.results[1]]])]
    body.add_ops(ops)
    name = kernel.attributes["name"].data  # type: ignore[attr-defined]
    types = [q.results[0].type, q.results[1].type]
    made = KernelOp.build(operands=[ins], result_types=[types],
                          attributes={"template": StringAttr(TEMPLATE), "name": StringAttr(f"{name}_x")},
                          regions=[Region(body)])
    made.results[0].name_hint, made.results[1].name_hint = "x_e4m3", "x_scales"
    block = kernel.parent_block()
    assert block is not None
    block.insert_op_before(made, kernel)
    return made.results[0], made.results[1]

