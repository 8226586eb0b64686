"""The `ix` tensor type and dim attribute: shapes whose dims are ints or symbolic expressions.

Text form: ``!ix.tensor<[batch, seq + 1, 4096], bf16>`` and, for dims carried as op attributes,
``#ix.dim<seq - 1>``. Dims print in the canonical form of ``symbolic.format_dim`` so a module
prints, re-parses and re-prints to the same text.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from enum import Enum

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Data, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer

from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.symbolic import Dim


class DType(Enum):
    """Element types of ix tensors; ``i4`` is packed two to a byte in storage."""

    f32 = "f32"
    f16 = "f16"
    bf16 = "bf16"
    f8e4m3 = "f8e4m3"
    i8 = "i8"
    i4 = "i4"
    i32 = "i32"
    i64 = "i64"
    bool = "bool"

    @property
    def is_float(self) -> builtins.bool:  # the member ``bool`` shadows the builtin in this class
        return self in (DType.f32, DType.f16, DType.bf16, DType.f8e4m3)

    @property
    def is_int(self) -> builtins.bool:
        return self in (DType.i8, DType.i4, DType.i32, DType.i64)

    @property
    def bits(self) -> int:
        return {"f32": 32, "f16": 16, "bf16": 16, "f8e4m3": 8, "i8": 8, "i4": 4, "i32": 32,
                "i64": 64, "bool": 8}[self.value]


FLOAT_DTYPES = tuple(d for d in DType if d.is_float)
INDEX_DTYPES = (DType.i32, DType.i64)


def _parse_dim(parser: AttrParser) -> Dim:
    """dim := term (('+' | '-') term)*; term := factor (('*' factor) | ('floordiv' int))*."""

    def factor() -> Dim:
        if parser.parse_optional_punctuation("-") is not None:
            return sy.neg(factor())
        if parser.parse_optional_punctuation("(") is not None:
            value = expr()
            parser.parse_punctuation(")", " to close a dim expression")
            return value
        number = parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
        if number is not None:
            return number
        start = parser.pos
        name = parser.parse_optional_identifier()
        if name == "floordiv":
            parser.raise_error("'floordiv' is an operator, not a symbol name", start, parser.pos)
        if name is None or not name.isidentifier():
            parser.raise_error("expected a dim: an integer, a symbol name or '('", start,
                               parser.pos if name is not None else None)  # type: ignore[arg-type]  # None: one char
        return sy.sym(name)

    def term() -> Dim:
        value = factor()
        while True:
            if parser.parse_optional_punctuation("*") is not None:
                value = sy.mul(value, factor())
            elif parser.parse_optional_keyword("floordiv") is not None:
                start = parser.pos
                divisor = parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
                if divisor is None or divisor <= 0:
                    parser.raise_error("floordiv takes a positive integer constant", start,
                                       parser.pos if divisor is not None else None)  # type: ignore[arg-type]
                value = sy.floordiv(value, divisor)
            else:
                return value

    def expr() -> Dim:
        value = term()
        while True:
            if parser.parse_optional_punctuation("+") is not None:
                value = sy.add(value, term())
            elif parser.parse_optional_punctuation("-") is not None:
                value = sy.sub(value, term())
            else:
                return value

    return expr()


@irdl_attr_definition
class DimAttr(Data[sy.SymExpr | int]):
    """One dim as an attribute, for ops whose parameters are sizes (``slice``'s bounds)."""

    name = "ix.dim"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> Dim:
        with parser.in_angle_brackets():
            return _parse_dim(parser)

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{sy.format_dim(self.data)}>")

    @property
    def dim(self) -> Dim:
        return self.data


@irdl_attr_definition
class ShapeAttr(Data[tuple[sy.SymExpr | int, ...]]):
    """The dims of a tensor type, printed as ``[d0, d1, ...]``."""

    name = "ix.shape"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> tuple[Dim, ...]:
        parser.parse_punctuation("[", " to open a shape")
        dims: list[Dim] = []
        if parser.parse_optional_punctuation("]") is None:
            while True:
                dims.append(_parse_dim(parser))
                if parser.parse_optional_punctuation("]") is not None:
                    break
                if parser.parse_optional_punctuation(",") is None:
                    parser.raise_error(
                        "expected ',' or ']' after a dim (dim operators are +, -, * and floordiv)"
                    )
        return tuple(dims)

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string("[" + ", ".join(sy.format_dim(d) for d in self.data) + "]")


@irdl_attr_definition
class TensorType(ParametrizedAttribute, TypeAttribute):
    """A tensor with symbolic dims and an element type: ``!ix.tensor<[batch, seq, 64], f32>``."""

    name = "ix.tensor"

    shape_attr: ShapeAttr
    dtype_attr: StringAttr

    def __init__(self, shape: Iterable[Dim], dtype: DType | str):
        dt = DType(dtype) if isinstance(dtype, str) else dtype
        super().__init__(ShapeAttr(tuple(shape)), StringAttr(dt.value))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[ShapeAttr | StringAttr]:
        with parser.in_angle_brackets():
            shape = ShapeAttr.parse_parameter(parser)
            parser.parse_punctuation(",", " between the shape and the element type")
            pos = parser.pos
            name = parser.parse_identifier(context_msg=" (an element type)")
            if name not in DType.__members__:
                parser.raise_error(
                    f"unknown element type {name!r}; expected one of {', '.join(DType.__members__)}",
                    pos, parser.pos,
                )
        return (ShapeAttr(shape), StringAttr(name))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        self.shape_attr.print_parameter(printer)
        printer.print_string(f", {self.dtype_attr.data}>")

    def verify(self) -> None:
        if self.dtype_attr.data not in DType.__members__:
            from xdsl.utils.exceptions import VerifyException

            raise VerifyException(f"unknown element type {self.dtype_attr.data!r}")

    @property
    def shape(self) -> tuple[Dim, ...]:
        return self.shape_attr.data

    @property
    def dtype(self) -> DType:
        return DType(self.dtype_attr.data)

    @property
    def rank(self) -> int:
        return len(self.shape_attr.data)

    def with_shape(self, shape: Iterable[Dim]) -> TensorType:
        return TensorType(shape, self.dtype)

    def with_dtype(self, dtype: DType) -> TensorType:
        return TensorType(self.shape, dtype)

    def numel(self) -> Dim:
        return sy.product(self.shape)

    def symbols(self) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        for d in self.shape:
            out |= sy.symbols_of(d)
        return out

    def __str__(self) -> str:
        return f"[{', '.join(sy.format_dim(d) for d in self.shape)}] {self.dtype.value}"


def format_shape(shape: Sequence[Dim]) -> str:
    return "[" + ", ".join(sy.format_dim(d) for d in shape) + "]"


__all__ = ["DType", "DimAttr", "ShapeAttr", "TensorType", "FLOAT_DTYPES", "INDEX_DTYPES",
           "format_shape"]
