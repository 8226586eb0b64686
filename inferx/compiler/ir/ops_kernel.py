"""Kernel IR: ``ix.kernel`` holds one fused group of ix ops that becomes one GPU launch.

    %q, %kc, %vc = ix.kernel "gemm" (%x, %w, %pos, %k0, %v0) {name = "layer0.qkv"} : (...) -> (...) {
    ^bb0(%a: ..., ...):
      ... ix ops on the block arguments ...
      ix.yield %q1, %kc1, %vc1 : ...
    }

The body is ordinary ix IR, so the reference interpreter runs a fused module exactly as it ran
the unfused one: fusion is checked by comparing the two. ``template`` names the code template
that will implement the body (``gemm``, ``attention``, ``gather``, ``pointwise``, ``reduction``,
``mlp``, ``attention_o``); ``schedule`` (a dictionary, optional) holds the tile sizes the tuner or the heuristic
chose.
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr
from xdsl.irdl import (
    IRDLOperation,
    attr_def,
    irdl_op_definition,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import IsolatedFromAbove, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from inferx.compiler.ir.types import TensorType

TEMPLATES = ("gemm", "attention", "gather", "pointwise", "reduction", "mlp", "attention_o")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends an ``ix.kernel`` body; its operands are the kernel's results."""

    name = "ix.yield"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator())
    assembly_format = "($values^ `:` type($values))? attr-dict"


@irdl_op_definition
class KernelOp(IRDLOperation):
    """One fused group: a launch of ``template`` over the ops of its body."""

    name = "ix.kernel"
    template = attr_def(StringAttr)
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    body = region_def("single_block")
    traits = traits_def(Pure(), IsolatedFromAbove())
    assembly_format = "$template `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs) $body"

    def verify_(self) -> None:
        if self.template.data not in TEMPLATES:
            raise VerifyException(
                f"ix.kernel: template {self.template.data!r} is not one of {', '.join(TEMPLATES)}"
            )
        block = self.body.block
        arg_types = [a.type for a in block.args]
        in_types = [v.type for v in self.inputs]
        if arg_types != in_types:
            raise VerifyException("ix.kernel: the body's arguments must have the types of the kernel's inputs")
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("ix.kernel: the body must end with ix.yield")
        if [v.type for v in last.values] != [r.type for r in self.outputs]:
            raise VerifyException("ix.kernel: ix.yield's types must equal the kernel's result types")
        for op in block.ops:
            if isinstance(op, KernelOp):
                raise VerifyException("ix.kernel: kernels do not nest")


KERNEL_OPS = [KernelOp, YieldOp]
