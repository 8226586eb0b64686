"""Two kernels joined into one: the producer of a value and its only reader, whose bodies become
one body of a fused template (used by fuse-decode-mlp and fuse-decode-attention-o)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, Region, SSAValue

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp


def linear_reader(first: KernelOp) -> KernelOp | None:
    """The GEMM kernel (its body starts with a linear) of ``first``'s only result, when that
    kernel is the result's only reader and the linear its only use there."""
    if len(first.outputs) != 1:
        return None
    uses = list(first.outputs[0].uses)
    if len(uses) != 1 or not isinstance(uses[0].operation, KernelOp):
        return None
    second = uses[0].operation
    lin = second.body.block.first_op
    if not isinstance(lin, nn.LinearOp):
        return None
    arg = second.body.block.args[uses[0].index]
    if lin.input != arg or len(list(arg.uses)) != 1:
        return None
    return second


def join(first: KernelOp, second: KernelOp, template: str, applies: Callable[[KernelOp], str | None]) -> bool:
    """Replaces ``first`` and ``second`` (which reads ``first``'s only result) by one ``template``
    kernel at ``second``'s place, whose body is ``first``'s then ``second``'s and whose inputs are
    both kernels' without the joining value, if ``applies`` accepts it (returns None); else
    changes nothing. True if joined."""
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
        attributes={**second.attributes, "template": StringAttr(template)}, regions=[Region(body)],
    )
    if applies(fused) is not None:
        fused.erase()
        return False
    block = second.parent_block()
    assert block is not None
    block.insert_op_before(fused, second)
    for old, new in zip(second.outputs, fused.outputs, strict=True):
        new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    block.erase_op(second)
    block.erase_op(first)
    return True
