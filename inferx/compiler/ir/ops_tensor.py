"""`ix` ops on whole tensors: weights, constants, elementwise math, casts, reductions, and the
shape ops (reshape, transpose, concat, split, slice, broadcast).

Every op is pure: a value is never written in place, so cse and dce apply to all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, StringAttr
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure

from inferx.compiler.ir import shapes as sh
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import (
    IxOp,
    get_dim,
    get_flag,
    get_int,
    get_ints,
    get_str,
    need_float,
    same_dtype,
)
from inferx.compiler.ir.shapes import ShapeError
from inferx.compiler.ir.types import TensorType

FUNCTIONAL = "operands attr-dict `:` functional-type(operands, results)"


def _stated(outs: Sequence[TensorType] | None, n: int = 1) -> list[TensorType]:
    if outs is None or len(outs) != n:
        raise ShapeError(f"needs {n} stated result type(s)")
    return list(outs)


# sources ---------------------------------------------------------------------------------------


@irdl_op_definition
class WeightOp(IxOp):
    """A tensor of the weight store, referenced by name, never inlined."""

    name = "ix.weight"
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "attr-dict `:` type($result)"

    @classmethod
    def infer(cls, ins, attrs, outs):
        key = attrs.get("name")
        if not isinstance(key, StringAttr) or not key.data:
            raise ShapeError("needs a non-empty string attribute 'name' naming the weight")
        (out,) = _stated(outs)
        for d in out.shape:
            if not sy.is_static(d):
                raise ShapeError(f"weight '{key.data}' must have a static shape, got {out}")
        return [out]


@irdl_op_definition
class ConstantOp(IxOp):
    """A tensor of one repeated scalar ``value`` (a splat), of any shape and dtype."""

    name = "ix.constant"
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "attr-dict `:` type($result)"

    @classmethod
    def infer(cls, ins, attrs, outs):
        (out,) = _stated(outs)
        value = attrs.get("value")
        if value is None:
            raise ShapeError("missing attribute 'value' (the scalar to splat)")
        if out.dtype.is_float and not isinstance(value, (FloatAttr, IntegerAttr)):
            raise ShapeError(f"attribute 'value' must be a number, got {value}")
        if not out.dtype.is_float and not isinstance(value, IntegerAttr):
            raise ShapeError(
                f"attribute 'value' of a {out.dtype.value} tensor must be an integer, got {value}"
            )
        if out.dtype.value == "bool" and value.value.data not in (0, 1):
            raise ShapeError(f"attribute 'value' of a bool tensor must be 0 or 1, got {value}")
        return [out]

    @property
    def scalar(self) -> float | int:
        v = self.attributes["value"]
        assert isinstance(v, (FloatAttr, IntegerAttr))
        return v.value.data


# elementwise -----------------------------------------------------------------------------------


class BinaryOp(IxOp):
    """``lhs <op> rhs`` with NumPy broadcasting; both operands share the element type."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL
    COMMUTATIVE: ClassVar[bool] = False

    @classmethod
    def infer(cls, ins, attrs, outs):
        a, b = ins
        same_dtype(a, b, "lhs and rhs")
        if a.dtype.value == "bool":
            raise ShapeError("arithmetic on bool tensors is not defined; cast first")
        return [TensorType(sh.broadcast(a.shape, b.shape), a.dtype)]


@irdl_op_definition
class AddOp(BinaryOp):
    name = "ix.add"
    COMMUTATIVE: ClassVar[bool] = True


@irdl_op_definition
class SubOp(BinaryOp):
    name = "ix.sub"


@irdl_op_definition
class MulOp(BinaryOp):
    name = "ix.mul"
    COMMUTATIVE: ClassVar[bool] = True


@irdl_op_definition
class DivOp(BinaryOp):
    name = "ix.div"


@irdl_op_definition
class MaxOp(BinaryOp):
    name = "ix.max"
    COMMUTATIVE: ClassVar[bool] = True


@irdl_op_definition
class MinOp(BinaryOp):
    name = "ix.min"
    COMMUTATIVE: ClassVar[bool] = True


@irdl_op_definition
class PowOp(BinaryOp):
    name = "ix.pow"

    @classmethod
    def infer(cls, ins, attrs, outs):
        need_float(ins[0], "pow's base")
        return super().infer(ins, attrs, outs)


class UnaryOp(IxOp):
    """A float function applied to every element."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL
    FLOAT_ONLY: ClassVar[bool] = True

    @classmethod
    def infer(cls, ins, attrs, outs):
        (x,) = ins
        if cls.FLOAT_ONLY:
            need_float(x, "input")
        elif x.dtype.value == "bool":
            raise ShapeError("arithmetic on bool tensors is not defined; cast first")
        return [x]


@irdl_op_definition
class NegOp(UnaryOp):
    name = "ix.neg"
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class ExpOp(UnaryOp):
    name = "ix.exp"


@irdl_op_definition
class RsqrtOp(UnaryOp):
    name = "ix.rsqrt"


@irdl_op_definition
class SqrtOp(UnaryOp):
    name = "ix.sqrt"


@irdl_op_definition
class SiluOp(UnaryOp):
    name = "ix.silu"


@irdl_op_definition
class SigmoidOp(UnaryOp):
    name = "ix.sigmoid"


@irdl_op_definition
class TanhOp(UnaryOp):
    name = "ix.tanh"


@irdl_op_definition
class GeluOp(UnaryOp):
    """GELU; ``approximate = "tanh"`` for the tanh form, ``"none"`` (default) for the erf form."""

    name = "ix.gelu"

    @classmethod
    def infer(cls, ins, attrs, outs):
        get_str(attrs, "approximate", ("none", "tanh"), default="none")
        return super().infer(ins, attrs, outs)


@irdl_op_definition
class CastOp(IxOp):
    """Converts the element type; the stated result has the input's shape."""

    name = "ix.cast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        (out,) = _stated(outs)
        sh.same(ins[0].rank, out.rank, "input and result must have the same rank")
        for i, (a, b) in enumerate(zip(ins[0].shape, out.shape, strict=True)):
            sh.same(a, b, f"result dim {i} must equal the input's")
        return [out]


# reductions ------------------------------------------------------------------------------------


class ReduceOp(IxOp):
    """Reduces over ``dims`` (array<i64>), dropping them unless ``keepdim`` is set."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        (x,) = ins
        dims = sorted({sh.norm_axis(d, x.rank) for d in get_ints(attrs, "dims")})
        if not dims:
            raise ShapeError("'dims' must name at least one dim")
        keep = get_flag(attrs, "keepdim")
        if cls.name == "ix.reduce_mean":
            need_float(x, "input")
        shape = [1 if i in dims else d for i, d in enumerate(x.shape) if keep or i not in dims]
        return [x.with_shape(shape)]


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    name = "ix.reduce_sum"


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    name = "ix.reduce_mean"


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    name = "ix.reduce_max"


# shape ops -------------------------------------------------------------------------------------


@irdl_op_definition
class ReshapeOp(IxOp):
    """Reinterprets the elements in row-major order; element counts must be provably equal."""

    name = "ix.reshape"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        (out,) = _stated(outs)
        same_dtype(ins[0], out, "input and result")
        sh.same(ins[0].numel(), out.numel(), "input and result must have the same element count")
        return [out]


@irdl_op_definition
class TransposeOp(IxOp):
    """Permutes dims: result dim i is input dim ``perm[i]``."""

    name = "ix.transpose"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        (x,) = ins
        perm = get_ints(attrs, "perm")
        if sorted(perm) != list(range(x.rank)):
            raise ShapeError(f"perm {list(perm)} is not a permutation of 0..{x.rank - 1}")
        return [x.with_shape(x.shape[p] for p in perm)]


@irdl_op_definition
class ConcatOp(IxOp):
    """Joins tensors along ``dim``; all other dims must be equal."""

    name = "ix.concat"
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        if not ins:
            raise ShapeError("needs at least one input")
        first = ins[0]
        if first.rank == 0:
            raise ShapeError("cannot concat rank-0 tensors: inputs must have rank >= 1")
        dim = sh.norm_axis(get_int(attrs, "dim"), first.rank)
        total: sy.Dim = 0
        for k, t in enumerate(ins):
            same_dtype(first, t, f"input #0 and input #{k}")
            if t.rank != first.rank:
                raise ShapeError(f"input #{k} has rank {t.rank}, input #0 has {first.rank}")
            for i, (a, b) in enumerate(zip(first.shape, t.shape, strict=True)):
                if i != dim:
                    sh.same(a, b, f"input #{k} dim {i} must match input #0 outside the concat dim")
            total = sy.add(total, t.shape[dim])
        shape = list(first.shape)
        shape[dim] = total
        return [first.with_shape(shape)]


@irdl_op_definition
class SplitOp(IxOp):
    """Cuts ``dim`` into consecutive pieces, one per stated result, whose sizes add up."""

    name = "ix.split"
    input = operand_def(TensorType)
    results_ = var_result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        (x,) = ins
        if not outs:
            raise ShapeError("needs at least one stated result")
        if x.rank == 0:
            raise ShapeError("cannot split a rank-0 tensor: input must have rank >= 1")
        dim = sh.norm_axis(get_int(attrs, "dim"), x.rank)
        total: sy.Dim = 0
        for k, t in enumerate(outs):
            same_dtype(x, t, f"input and result #{k}")
            if t.rank != x.rank:
                raise ShapeError(f"result #{k} has rank {t.rank}, input has {x.rank}")
            for i, (a, b) in enumerate(zip(x.shape, t.shape, strict=True)):
                if i != dim:
                    sh.same(a, b, f"result #{k} dim {i} must match the input outside the split dim")
            total = sy.add(total, t.shape[dim])
        sh.same(total, x.shape[dim], f"split sizes along dim {dim} must add up to the input's")
        return list(outs)


@irdl_op_definition
class SliceOp(IxOp):
    """Takes ``start`` to ``end`` (exclusive, #ix.dim) by ``step`` along ``dim``."""

    name = "ix.slice"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        (x,) = ins
        if x.rank == 0:
            raise ShapeError("cannot slice a rank-0 tensor: input must have rank >= 1")
        dim = sh.norm_axis(get_int(attrs, "dim"), x.rank)
        size = sh.slice_size(x.shape[dim], get_dim(attrs, "start"), get_dim(attrs, "end"),
                             get_int(attrs, "step", 1))
        shape = list(x.shape)
        shape[dim] = size
        return [x.with_shape(shape)]


@irdl_op_definition
class BroadcastToOp(IxOp):
    """Stretches the input to the stated shape by NumPy broadcasting."""

    name = "ix.broadcast_to"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        (out,) = _stated(outs)
        same_dtype(ins[0], out, "input and result")
        sh.broadcasts_to(ins[0].shape, out.shape)
        return [out]


TENSOR_OPS = [
    WeightOp, ConstantOp, AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp, NegOp, ExpOp, RsqrtOp,
    SqrtOp, SiluOp, SigmoidOp, TanhOp, GeluOp, CastOp, ReduceSumOp, ReduceMeanOp, ReduceMaxOp,
    ReshapeOp, TransposeOp, ConcatOp, SplitOp, SliceOp, BroadcastToOp,
]
