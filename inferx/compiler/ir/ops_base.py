"""The base of every `ix` op: result types come from one shape rule per op.

Each op class defines ``infer(ins, attrs, outs)``: given operand types, attributes and (for ops
whose result type is stated rather than derived) the stated result types, it returns the result
types or raises ``ShapeError`` naming the rule. The verifier, the builders and every pass use this
one rule, so a shape is never computed in two places.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from xdsl.dialects.builtin import (
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    i32,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import AttrSizedOperandSegments, IRDLOperation
from xdsl.utils.exceptions import VerifyException

from inferx.compiler.ir.shapes import ShapeError
from inferx.compiler.ir.symbolic import Dim
from inferx.compiler.ir.types import DimAttr, DType, TensorType

Attrs = Mapping[str, Attribute]


SEGMENTS = AttrSizedOperandSegments.attribute_name


def present_operands(attrs: Attrs, n_fixed: int, names: Sequence[str]) -> list[str]:
    """The names of the optional operands present, in order, from ``operandSegmentSizes``.

    ``names`` are the optional operands, which follow ``n_fixed`` single operands.
    """
    seg = attrs.get(SEGMENTS)
    if not isinstance(seg, DenseArrayBase):
        raise ShapeError(f"missing property '{SEGMENTS}' saying which of {', '.join(names)} are present")
    sizes = [int(x) for x in seg.get_values()]
    return [name for name, size in zip(names, sizes[n_fixed:], strict=False) if size]


class IxOp(IRDLOperation):
    """Common verifier and builder for ix ops."""

    @classmethod
    def infer(
        cls, ins: Sequence[TensorType], attrs: Attrs, outs: Sequence[TensorType] | None
    ) -> list[TensorType]:
        raise NotImplementedError(cls.__name__)

    def verify_(self) -> None:
        ins: list[TensorType] = []
        for i, operand in enumerate(self.operands):
            if not isinstance(operand.type, TensorType):
                raise VerifyException(f"{self.name}: operand #{i} must be an !ix.tensor, got {operand.type}")
            ins.append(operand.type)
        outs = [r.type for r in self.results]
        for i, t in enumerate(outs):
            if not isinstance(t, TensorType):
                raise VerifyException(f"{self.name}: result #{i} must be an !ix.tensor, got {t}")
        # Properties (operandSegmentSizes) tell infer which optional operands are present.
        attrs = {**self.properties, **self.attributes}
        try:
            expected = self.infer(ins, attrs, outs)  # type: ignore[arg-type]
        except ShapeError as e:
            raise VerifyException(f"{self.name}: {e}") from None
        if list(expected) != outs:
            got = ", ".join(str(t) for t in outs)
            want = ", ".join(str(t) for t in expected)
            raise VerifyException(f"{self.name}: result type is {got} but the operands give {want}")

    @classmethod
    def make(
        cls,
        *operands: SSAValue | Sequence[SSAValue] | None,
        result_types: Sequence[TensorType] | None = None,
        **attrs: Attribute | None,
    ) -> IxOp:
        """Builds the op with result types inferred from the operands (or checked, if stated)."""
        attributes = {k: v for k, v in attrs.items() if v is not None}
        # trailing optional operands left out are absent
        operands = (*operands, *[None] * (len(cls.get_irdl_definition().operands) - len(operands)))
        ins: list[TensorType] = []
        sizes: list[int] = []
        for group in operands:
            values = [] if group is None else [group] if isinstance(group, SSAValue) else list(group)
            sizes.append(len(values))
            for v in values:
                assert isinstance(v.type, TensorType), v.type
                ins.append(v.type)
        infer_attrs: dict[str, Attribute] = dict(attributes)
        if any(isinstance(o, AttrSizedOperandSegments) for o in cls.get_irdl_definition().options):
            infer_attrs[SEGMENTS] = DenseArrayBase.from_list(i32, sizes)
        try:
            outs = cls.infer(ins, infer_attrs, result_types)
        except ShapeError as e:
            raise ShapeError(f"{cls.name}: {e}") from None
        groups: list[object] = list(operands)
        n_result_defs = len(cls.get_irdl_definition().results)
        result_groups: list[object] = [outs] if n_result_defs == 1 and cls._variadic_results() else list(outs)
        return cls.build(operands=groups, result_types=result_groups, attributes=attributes)  # type: ignore[arg-type]

    @classmethod
    def _variadic_results(cls) -> bool:
        from xdsl.irdl import VarResultDef

        return any(isinstance(d, VarResultDef) for _, d in cls.get_irdl_definition().results)


# attribute readers: each names the op's missing or malformed attribute -----------------------


def get_int(attrs: Attrs, key: str, default: int | None = None) -> int:
    a = attrs.get(key)
    if a is None:
        if default is None:
            raise ShapeError(f"missing integer attribute '{key}'")
        return default
    if not isinstance(a, IntegerAttr):
        raise ShapeError(f"attribute '{key}' must be an integer, got {a}")
    return a.value.data


def get_float(attrs: Attrs, key: str, default: float | None = None) -> float:
    """A float attribute; NaN is never a meaningful setting and is refused."""
    a = attrs.get(key)
    if a is None:
        if default is None:
            raise ShapeError(f"missing float attribute '{key}'")
        return default
    if isinstance(a, FloatAttr):
        value = float(a.value.data)
    elif isinstance(a, IntegerAttr):
        value = float(a.value.data)
    else:
        raise ShapeError(f"attribute '{key}' must be a float, got {a}")
    if math.isnan(value):
        raise ShapeError(f"attribute '{key}' must be a number, got nan")
    return value


def positive(value: float | None, what: str) -> None:
    """``value`` (an attribute read by get_float) is absent or a finite positive number."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ShapeError(f"{what} must be positive and finite, got {value}")


def get_opt_float(attrs: Attrs, key: str) -> float | None:
    return None if attrs.get(key) is None else get_float(attrs, key)


def get_str(attrs: Attrs, key: str, choices: Sequence[str], default: str | None = None) -> str:
    a = attrs.get(key)
    if a is None:
        if default is None:
            raise ShapeError(f"missing string attribute '{key}' (one of {', '.join(choices)})")
        return default
    if not isinstance(a, StringAttr) or a.data not in choices:
        raise ShapeError(f"attribute '{key}' must be one of {', '.join(repr(c) for c in choices)}, got {a}")
    return a.data


def get_flag(attrs: Attrs, key: str) -> bool:
    a = attrs.get(key)
    if a is not None and not isinstance(a, UnitAttr):
        raise ShapeError(f"attribute '{key}' is a flag (unit attribute), got {a}")
    return a is not None


def get_ints(attrs: Attrs, key: str, default: Sequence[int] | None = None) -> tuple[int, ...]:
    a = attrs.get(key)
    if a is None:
        if default is None:
            raise ShapeError(f"missing attribute '{key}' (array<i64: ...>)")
        return tuple(default)
    if not isinstance(a, DenseArrayBase) or a.elt_type != i64:
        raise ShapeError(f"attribute '{key}' must be array<i64: ...>, got {a}")
    return tuple(int(x) for x in a.get_values())


def get_dim(attrs: Attrs, key: str):  # -> Dim
    a = attrs.get(key)
    if a is None:
        raise ShapeError(f"missing dim attribute '{key}' (#ix.dim<...>)")
    if isinstance(a, IntegerAttr):
        return a.value.data
    if not isinstance(a, DimAttr):
        raise ShapeError(f"attribute '{key}' must be a #ix.dim<...>, got {a}")
    return a.dim


def need_float(t: TensorType, what: str) -> None:
    if not t.dtype.is_float:
        raise ShapeError(f"{what} must be a float tensor, got {t.dtype.value}")


def need_index(t: TensorType, what: str) -> None:
    if t.dtype not in (DType.i32, DType.i64):
        raise ShapeError(f"{what} must be an i32 or i64 tensor, got {t.dtype.value}")


def need_rank(t: TensorType, rank: int, what: str, layout: str = "") -> None:
    if t.rank != rank:
        hint = f" {layout}" if layout else ""
        raise ShapeError(f"{what} must have rank {rank}{hint}, got {t}")


def nonempty(d: Dim, what: str) -> None:
    """A dim that an op reduces over or indexes into is not a literal 0 (a mean or softmax of
    nothing, a table with no rows)."""
    if d == 0:
        raise ShapeError(f"{what} must not be 0")


def same_dtype(a: TensorType, b: TensorType, what: str) -> None:
    if a.dtype != b.dtype:
        raise ShapeError(f"{what} must have the same element type: {a.dtype.value} vs {b.dtype.value}")


def ints_attr(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def int_attr(v: int) -> IntegerAttr:
    return IntegerAttr(v, i64)


def float_attr(v: float) -> FloatAttr:
    from xdsl.dialects.builtin import f64

    return FloatAttr(v, f64)
