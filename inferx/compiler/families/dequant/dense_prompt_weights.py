"""dense-prompt-weights: a prompt's int4 GEMMs read their weights dequantized once per launch of the
entry, not unpacked in every row block.

    %y = ix.kernel <qgemm> (%x, %g, %c, %s, %m) { ... ix.rmsnorm_ss %x, %g, ...; ix.qlinear %n, %c, %s mins %m }
becomes
    %w = ix.kernel <dequant> (%c, %s, %m, %g [, %w_before]) { ix.dequantize ... norm_weight ... [into ...] }
    %y = ix.kernel <qgemm> (%x, %g, %c, %s, %m, %w) { ...; ix.qlinear %n, %c, %s mins %m dense %arg }

A prompt's tile would otherwise dequantize each code once per block of rows, in the same K steps
as its tensor-core work, which the GPU then runs in turns (docs/performance.md). Dequantized
once, into a buffer of x's dtype, the GEMM's K loop is a plain one, at the cost of writing and
reading the weight at two bytes an element. Short prompts are better off with the codes: below
``min_rows`` rows the dequantize kernel is an empty launch and the GEMM reads the codes (the
qgemm and dequant families pick by the same row buckets). The RMSNorm weight the GEMM applies
to x goes into the dequantized weight, as the prompt tile applies it to its W tile.

Every dequantize of an entry writes into one buffer, the size of its largest weight: each
writes in place over the one before (``into``), which its GEMM has read by then, as launches
run in order.

Applies to each kernel whose body holds an ``ix.qlinear`` of kernel inputs with 16-bit x on
rows holding ``seq`` (prompts; a decode kernel and ``prefill_last``'s LM head keep the codes)
and no ``dense`` yet. Runs after fuse (and norm-stats); the pipeline runs it only where prompts
may reach ``min_rows``.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, BlockArgument, Region, SSAValue
from xdsl.passes import ModulePass

from inferx.compiler.families.common.rows import norm_scale
from inferx.compiler.families.dequant.codegen import TEMPLATE
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import int_attr
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp
from inferx.compiler.ir.types import DimAttr, DType, TensorType


@dataclass(frozen=True)
class DensePromptWeights(ModulePass):
    name = "dense-prompt-weights"

    min_rows: int = 129

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [o for o in op.ops if isinstance(o, FuncOp)]:
            found = [(k, q) for k in func.body.block.ops if isinstance(k, KernelOp)
                     for q in [_prompt_qlinear(k)] if q is not None]
            if not found:
                continue
            size = max(_nk(q)[0] * _nk(q)[1] for _, q in found)
            before: SSAValue | None = None
            for kernel, q in found:
                before = _rewrite(kernel, q, size, self.min_rows, before)


def _nk(q: nn.QLinearOp) -> tuple[int, int]:
    n, k = q.codes.type.shape  # type: ignore[attr-defined]
    assert isinstance(n, int) and isinstance(k, int)
    return n, k


def _prompt_qlinear(kernel: KernelOp) -> nn.QLinearOp | None:
    q = next((o for o in kernel.body.block.ops if isinstance(o, nn.QLinearOp)), None)
    if q is None or q.dense is not None:
        return None
    weights = [q.codes, q.scales, q.mins, q.col_scale]
    if not all(isinstance(v, BlockArgument) for v in weights if v is not None):
        return None
    x_t = q.input.type
    assert isinstance(x_t, TensorType)
    if x_t.dtype not in (DType.bf16, DType.f16) or "seq" not in sy.symbols_of(sy.product(x_t.shape[:-1])):
        return None
    return q


def _norm_weight(kernel: KernelOp, q: nn.QLinearOp) -> SSAValue | None:
    """The kernel input holding the weight of the RMSNorm whose result the qlinear reads."""
    norm = q.input.owner
    if not isinstance(norm, nn.RMS_NORMS) or norm.parent_block() is not kernel.body.block:
        return None
    g = norm_scale(kernel, norm)
    return kernel.inputs[g.index] if isinstance(g, BlockArgument) else None


def _rewrite(kernel: KernelOp, q: nn.QLinearOp, size: int, min_rows: int, before: SSAValue | None) -> SSAValue:
    """Puts the dequantize kernel before ``kernel`` and makes ``q`` read its result; returns it."""
    x_t = q.input.type
    assert isinstance(x_t, TensorType)
    outer = [kernel.inputs[v.index] if isinstance(v, BlockArgument) else None  # type: ignore[union-attr]
             for v in (q.codes, q.scales, q.mins, q.col_scale)]
    g = _norm_weight(kernel, q)
    ins = [v for v in (*outer, g, before) if v is not None]
    body = Block(arg_types=[v.type for v in ins])
    args = iter(body.args)
    c, s, m, col, gw, into = (next(args) if v is not None else None for v in (*outer, g, before))
    dense_t = TensorType((size,), x_t.dtype)
    dq = nn.DequantizeOp.make(c, s, m, col, gw, into, result_types=[dense_t], group=q.attributes["group"],
                              min_rows=int_attr(min_rows), rows=DimAttr(sy.product(x_t.shape[:-1])))
    body.add_ops([dq, YieldOp.build(operands=[[dq.results[0]]])])
    name = kernel.attributes["name"].data  # type: ignore[attr-defined]
    made = KernelOp.build(operands=[ins], result_types=[[dense_t]],
                          attributes={"template": StringAttr(TEMPLATE), "name": StringAttr(f"{name}_w")},
                          regions=[Region(body)])
    made.results[0].name_hint = "dense_w"
    block = kernel.parent_block()
    assert block is not None
    block.insert_op_before(made, kernel)
    arg = kernel.body.block.insert_arg(dense_t, len(kernel.body.block.args))
    kernel.operands = [*kernel.operands, made.results[0]]
    attrs = dict(q.attributes)
    attrs["dense_min_rows"] = int_attr(min_rows)
    new = nn.QLinearOp.make(q.input, q.codes, q.scales, q.mins, q.col_scale, q.bias, arg, result_types=None, **attrs)
    kernel.body.block.insert_op_before(new, q)
    q.result.replace_all_uses_with(new.results[0])
    kernel.body.block.erase_op(q)
    return made.results[0]
