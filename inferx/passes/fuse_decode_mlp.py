"""fuse-decode-mlp: a decode step's gate|up GEMM kernel and the down-projection kernel that reads
its only result become one ``ix.kernel "mlp"``, so a decoder layer's MLP is one launch.

    %h = ix.kernel "gemm" (%x, %g, %w1) { rmsnorm, linear, gate|up slices, silu, mul; ix.yield %m }
    %y = ix.kernel "gemm" (%h, %w2, %res) { ^bb0(%a, ...): linear %a, ...; add %res, ...; ix.yield }
becomes
    %y = ix.kernel "mlp" (%x, %g, %w1, %w2, %res) { rmsnorm, linear, ..., mul, linear, add; ix.yield }

Expects fused IR (runs after fuse and norm-stats). Applies where the first kernel has one result,
read only by the second kernel as the input of the linear that starts its body, the first
kernel's rows hold no ``seq`` (decode), and the merged body is one the mlp template implements
(``codegen.mlp.applies``: a gated MLP with an RMSNorm prologue, no biases, weights stored [N, K]);
other kernels are left as they are. Guarantees: the module computes what it computed before (the
body is the two bodies joined), one kernel fewer per merged pair. Not in the default pipeline:
the compiler runs it when asked (``--fuse-mlp``), for decode buckets of up to 8 rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp


@dataclass(frozen=True)
class FuseDecodeMlp(ModulePass):
    name = "fuse-decode-mlp"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [o for o in op.ops if isinstance(o, FuncOp)]:
            for first in [o for o in func.body.block.ops if isinstance(o, KernelOp)]:
                second = _reader(first)
                if second is not None:
                    _merge(first, second)


def _reader(first: KernelOp) -> KernelOp | None:
    """The kernel whose body starts with a linear of ``first``'s only result, when it is the
    result's only reader."""
    if first.template.data != "gemm" or len(first.outputs) != 1:
        return None
    uses = list(first.outputs[0].uses)
    if len(uses) != 1 or not isinstance(uses[0].operation, KernelOp):
        return None
    second = uses[0].operation
    lin = second.body.block.first_op
    if second.template.data != "gemm" or not isinstance(lin, nn.LinearOp):
        return None
    arg = second.body.block.args[uses[0].index]
    if lin.input != arg or len(list(arg.uses)) != 1:
        return None
    return second


def _merge(first: KernelOp, second: KernelOp) -> None:
    """Replaces the pair by one "mlp" kernel at the second's place, if the template implements it."""
    from inferx.compiler.codegen import mlp

    h = first.outputs[0]
    inputs: list[SSAValue] = []
    for v in [*first.inputs, *second.inputs]:
        if v != h and v not in inputs:
            inputs.append(v)
    body = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = {}
    for arg, v in zip(first.body.block.args, first.inputs, strict=True):
        mapping[arg] = body.args[inputs.index(v)]
    for op in first.body.block.ops:
        if isinstance(op, YieldOp):
            joined = mapping[op.values[0]]
            break
        body.add_op(op.clone(value_mapper=mapping))
    for arg, v in zip(second.body.block.args, second.inputs, strict=True):
        mapping[arg] = joined if v == h else body.args[inputs.index(v)]
    for op in second.body.block.ops:
        body.add_op(op.clone(value_mapper=mapping))
    for arg, v in zip(body.args, inputs, strict=True):
        arg.name_hint = v.name_hint
    fused = KernelOp.build(
        operands=[inputs], result_types=[[r.type for r in second.outputs]],
        attributes={**second.attributes, "template": StringAttr("mlp")}, regions=[Region(body)],
    )
    if mlp.applies(fused) is not None:
        fused.erase()
        return
    block = second.parent_block()
    assert block is not None
    block.insert_op_before(fused, second)
    for old, new in zip(second.outputs, fused.outputs, strict=True):
        new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    block.erase_op(second)
    block.erase_op(first)

