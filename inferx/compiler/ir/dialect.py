"""The `ix` dialect: every op and attribute, and the context that parses `ix` modules."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.ir import Dialect

from inferx.compiler.ir.ops_kernel import KERNEL_OPS
from inferx.compiler.ir.ops_nn import NN_OPS
from inferx.compiler.ir.ops_tensor import TENSOR_OPS
from inferx.compiler.ir.types import DimAttr, ShapeAttr, TensorType

IX_OPS = [*TENSOR_OPS, *NN_OPS]
IX = Dialect("ix", [*IX_OPS, *KERNEL_OPS], [TensorType, DimAttr, ShapeAttr])


def make_context() -> Context:
    """A context with builtin, func and ix loaded, and nothing else."""
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Func)
    ctx.load_dialect(IX)
    return ctx
