"""Kernel IR: ``ix.kernel`` holds one fused group of ix ops that becomes one GPU launch.

    %q, %kc, %vc = ix.kernel <GEMM> (%x, %w, %pos, %k0, %v0) {name = "layer0.qkv"} : (...) -> (...) {
    ^bb0(%a: ..., ...):
      ... ix ops on the block arguments ...
      ix.yield %q1, %kc1, %vc1 : ...
    }

The body is ordinary ix IR, so the reference interpreter runs a fused module exactly as it ran
the unfused one: fusion is checked by comparing the two. ``template`` names the code template
that will implement the body: a kernel family's name (``inferx.compiler.families``), or empty for a
kernel that fuse made and bind-families has not bound yet.
"""

from __future__ import annotations

import re

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

# A family's name: lower-case words joined by underscores (which families exist is the registry's).
TEMPLATE_NAME = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")


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
        if self.template.data and not TEMPLATE_NAME.fullmatch(self.template.data):
            raise VerifyException(
                f"ix.kernel: template {self.template.data!r} is not a family name (lower-case words joined by _)"
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
