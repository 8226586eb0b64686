"""The rule table of canonicalize: one row per rewrite, each legal for every value of the dims.

A rule is an op class and a function that, given a matched op, returns the value that replaces
the op's result, a new op that replaces the op, or ``None`` when the rule does not apply. A rule
never erases an op it did not match: operands it leaves unused are dce's to remove.

Shapes: a rule that returns an existing value ``x`` fires only when the op's result type equals
``x``'s type, so broadcasting (``x[4] * ones[2, 4]``) is never folded away. Types compare by their
canonical symbolic dims, so the check holds for every value of the symbols.

Constant folding works on splats (``ix.constant``): operands are rounded to the result's float
type, the scalar is computed in f64 and rounded once to that type (exact for + - * / and sqrt,
within an ulp of a kernel for exp, tanh and the like). Left alone: f8 (no exact rounding here),
integer division (its rounding is not fixed by the dialect), integer overflow, and results that
are not finite (a division by zero, an exp past the dtype's range).

``x + 0 -> x`` ignores the sign of zero (``-0.0 + 0.0`` is ``+0.0``), as XLA and tinygrad do.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    FloatAttr,
    IntegerAttr,
    bf16,
    f16,
    f32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from inferx.compiler.ir.ops_base import IxOp, get_dim, get_int, get_ints, get_str, ints_attr
from inferx.compiler.ir.ops_tensor import (
    AddOp,
    BinaryOp,
    BroadcastToOp,
    CastOp,
    ConcatOp,
    ConstantOp,
    DivOp,
    ExpOp,
    GeluOp,
    MaxOp,
    MinOp,
    MulOp,
    NegOp,
    PowOp,
    ReshapeOp,
    RsqrtOp,
    SigmoidOp,
    SiluOp,
    SliceOp,
    SqrtOp,
    SubOp,
    TanhOp,
    TransposeOp,
    UnaryOp,
)
from inferx.compiler.ir.types import DType, TensorType

Replacement = SSAValue | Operation | None


@dataclass(frozen=True)
class Rule:
    """Rewrites ops of class ``op`` with ``rewrite`` (which may decline by returning ``None``)."""

    op: type[IxOp]
    rewrite: Callable[[Any], Replacement]


# helpers ---------------------------------------------------------------------------------------


def splat(value: SSAValue) -> float | int | None:
    """The scalar of ``value`` when an ``ix.constant`` defines it."""
    owner = value.owner
    return owner.scalar if isinstance(owner, ConstantOp) else None


def type_of(value: SSAValue) -> TensorType:
    assert isinstance(value.type, TensorType), value.type
    return value.type


def result_is(op: Operation, x: SSAValue) -> SSAValue | None:
    """``x`` when it can stand for ``op``'s single result: the types are equal."""
    return x if op.results[0].type == x.type else None


# constant folding ------------------------------------------------------------------------------

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

UNARY_FOLDS: dict[type[UnaryOp], Callable[[float], float]] = {
    NegOp: operator.neg,
    ExpOp: math.exp,
    RsqrtOp: lambda a: 1.0 / math.sqrt(a),
    SqrtOp: math.sqrt,
    SiluOp: lambda a: a / (1.0 + math.exp(-a)),
    SigmoidOp: lambda a: 1.0 / (1.0 + math.exp(-a)),
    TanhOp: math.tanh,
}

GELU_FOLDS: dict[str, Callable[[float], float]] = {
    "none": lambda a: 0.5 * a * (1.0 + math.erf(a / math.sqrt(2.0))),
    "tanh": lambda a: 0.5 * a * (1.0 + math.tanh(SQRT_2_OVER_PI * (a + 0.044715 * a**3))),
}

BINARY_FOLDS: dict[type[BinaryOp], Callable[[float, float], float]] = {
    AddOp: operator.add,
    SubOp: operator.sub,
    MulOp: operator.mul,
    DivOp: operator.truediv,
    MaxOp: max,
    MinOp: min,
    PowOp: math.pow,
}

# Integer ops that are exact in Python; integer division's rounding is not fixed by the dialect.
INT_FOLDS = (NegOp, AddOp, SubOp, MulOp, MaxOp, MinOp)

FLOAT_ATTR_TYPES: dict[DType, Float32Type | Float16Type | BFloat16Type] = {
    DType.f32: f32,
    DType.f16: f16,
    DType.bf16: bf16,
}


def _float_in(dtype: DType, v: float) -> float:
    """``v`` rounded to ``dtype`` (FloatAttr rounds to its type)."""
    return float(FloatAttr(v, FLOAT_ATTR_TYPES[dtype]).value.data)


def _fold(op: Operation, fn: Callable[..., float], args: Sequence[float | int]) -> Operation | None:
    """A splat ``ix.constant`` of ``op``'s result type holding ``fn(*args)``, or None."""
    out = type_of(op.results[0])
    value: Attribute
    if out.dtype in FLOAT_ATTR_TYPES:
        try:
            x = _float_in(out.dtype, fn(*(_float_in(out.dtype, float(a)) for a in args)))
        except (ArithmeticError, ValueError):
            return None
        if not math.isfinite(x):
            return None
        value = FloatAttr(x, FLOAT_ATTR_TYPES[out.dtype])
    elif out.dtype.is_int and isinstance(op, INT_FOLDS):
        n = int(fn(*(int(a) for a in args)))
        half = 1 << (out.dtype.bits - 1)
        if not -half <= n < half:
            return None
        value = IntegerAttr(n, i64)
    else:
        return None
    return ConstantOp.make(result_types=[out], value=value)


def fold_unary(op: UnaryOp) -> Replacement:
    a = splat(op.input)
    if a is None:
        return None
    if isinstance(op, GeluOp):
        return _fold(op, GELU_FOLDS[get_str(op.attributes, "approximate", tuple(GELU_FOLDS), "none")], [a])
    return _fold(op, UNARY_FOLDS[type(op)], [a])


def fold_binary(op: BinaryOp) -> Replacement:
    a, b = splat(op.lhs), splat(op.rhs)
    if a is None or b is None:
        return None
    return _fold(op, BINARY_FOLDS[type(op)], [a, b])


# neutral operands ------------------------------------------------------------------------------


def neutral(side: str, unit: int) -> Callable[[BinaryOp], Replacement]:
    """``x <op> unit -> x`` (``side="rhs"``) or ``unit <op> x -> x`` (``side="lhs"``)."""

    def rewrite(op: BinaryOp) -> Replacement:
        c, x = (op.rhs, op.lhs) if side == "rhs" else (op.lhs, op.rhs)
        return result_is(op, x) if splat(c) == unit else None

    return rewrite


# shape ops and involutions ---------------------------------------------------------------------


def same_type(op: CastOp | ReshapeOp | BroadcastToOp) -> Replacement:
    return result_is(op, op.input)


def neg_neg(op: NegOp) -> Replacement:
    inner = op.input.owner
    return inner.input if isinstance(inner, NegOp) else None


def reshape_reshape(op: ReshapeOp) -> Replacement:
    inner = op.input.owner
    if not isinstance(inner, ReshapeOp):
        return None
    x = inner.input
    if op.result.type == x.type:
        return x
    return ReshapeOp.make(x, result_types=[type_of(op.result)])


def identity_transpose(op: TransposeOp) -> Replacement:
    perm = get_ints(op.attributes, "perm")
    return op.input if list(perm) == list(range(len(perm))) else None


def transpose_transpose(op: TransposeOp) -> Replacement:
    inner = op.input.owner
    if not isinstance(inner, TransposeOp):
        return None
    first, second = get_ints(inner.attributes, "perm"), get_ints(op.attributes, "perm")
    perm = [first[p] for p in second]  # result dim i is x's dim first[second[i]]
    if perm == list(range(len(perm))):
        return inner.input
    return TransposeOp.make(inner.input, perm=ints_attr(perm))


def whole_slice(op: SliceOp) -> Replacement:
    attrs = op.attributes
    x = type_of(op.input)
    dim = get_int(attrs, "dim") % x.rank
    whole = get_dim(attrs, "start") == 0 and get_dim(attrs, "end") == x.shape[dim]
    if whole and get_int(attrs, "step", 1) == 1:
        return result_is(op, op.input)
    return None


def single_concat(op: ConcatOp) -> Replacement:
    return result_is(op, op.inputs[0]) if len(op.inputs) == 1 else None


# the table -------------------------------------------------------------------------------------

RULES: tuple[Rule, ...] = (
    *(Rule(op, fold_unary) for op in UNARY_FOLDS),  # f(c) -> c'  (splat constants)
    Rule(GeluOp, fold_unary),  # gelu(c) -> c'  (either approximation)
    *(Rule(op, fold_binary) for op in BINARY_FOLDS),  # c1 <op> c2 -> c3  (splat constants)
    Rule(AddOp, neutral("rhs", 0)),  # x + 0 -> x
    Rule(AddOp, neutral("lhs", 0)),  # 0 + x -> x
    Rule(SubOp, neutral("rhs", 0)),  # x - 0 -> x
    Rule(MulOp, neutral("rhs", 1)),  # x * 1 -> x
    Rule(MulOp, neutral("lhs", 1)),  # 1 * x -> x
    Rule(DivOp, neutral("rhs", 1)),  # x / 1 -> x
    Rule(PowOp, neutral("rhs", 1)),  # x ** 1 -> x
    Rule(NegOp, neg_neg),  # neg(neg(x)) -> x
    Rule(CastOp, same_type),  # cast(x) to x's type -> x  (never folds a dtype change)
    Rule(ReshapeOp, same_type),  # reshape(x) to x's type -> x
    Rule(ReshapeOp, reshape_reshape),  # reshape(reshape(x)) -> reshape(x)
    Rule(TransposeOp, identity_transpose),  # transpose(x, [0, 1, ..]) -> x
    Rule(TransposeOp, transpose_transpose),  # transpose(transpose(x, p), q) -> transpose(x, p[q])
    Rule(BroadcastToOp, same_type),  # broadcast_to(x) to x's type -> x
    Rule(SliceOp, whole_slice),  # slice(x, 0, size, step 1) -> x
    Rule(ConcatOp, single_concat),  # concat(x) -> x
)
