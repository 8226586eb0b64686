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


# Bounds of a dim in IR text: a real dim has a few terms and parentheses, and a static dim is far
# below this size. A longer expression is refused at once (the algebra's canonical form costs
# time quadratic in the terms), so is a deeper one (the parser recurses on parentheses).
MAX_DIM_FACTORS = 64
MAX_DIM_DEPTH = 8
MAX_STATIC_DIM = 1 << 48


def _parse_dim(parser: AttrParser) -> Dim:
    """dim := term (('+' | '-') term)*; term := factor (('*' factor) | ('floordiv' int))*;
    at most MAX_DIM_FACTORS factors and MAX_DIM_DEPTH nested parentheses."""
    factors, depth = 0, 0

    def factor() -> Dim:
        nonlocal factors, depth
        start = parser.pos
        factors += 1
        if factors > MAX_DIM_FACTORS:
            parser.raise_error(f"a dim expression may have at most {MAX_DIM_FACTORS} factors", start)
        negate = False
        while parser.parse_optional_punctuation("-") is not None:
            negate = not negate
        value = atom()
        return sy.neg(value) if negate else value

    def atom() -> Dim:
        nonlocal depth
        start = parser.pos
        if parser.parse_optional_punctuation("(") is not None:
            depth += 1
            if depth > MAX_DIM_DEPTH:
                parser.raise_error(f"a dim expression may nest at most {MAX_DIM_DEPTH} parentheses", start)
            value = expr()
            parser.parse_punctuation(")", " to close a dim expression")
            depth -= 1
            return value
        number = parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
        if number is not None:
            if number > MAX_STATIC_DIM:
                parser.raise_error(f"dim {number} is over the largest dim, {MAX_STATIC_DIM}", start, parser.pos)
            return number
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
                if divisor is None or divisor <= 0 or divisor > MAX_STATIC_DIM:
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
        from xdsl.utils.exceptions import VerifyException

        if self.dtype_attr.data not in DType.__members__:
            raise VerifyException(f"unknown element type {self.dtype_attr.data!r}")
        for i, d in enumerate(self.shape_attr.data):
            if isinstance(d, int) and not 0 <= d <= MAX_STATIC_DIM:
                raise VerifyException(f"tensor dim #{i} is {d}: dims are sizes in 0..{MAX_STATIC_DIM}")
            if isinstance(d, sy.SymExpr) and _always_negative(d):
                raise VerifyException(f"tensor dim #{i} is {sy.format_dim(d)}, negative for every size of "
                                      "its symbols")

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


def _always_negative(d: sy.SymExpr) -> bool:
    """``d <= -1`` for every binding of its symbols to sizes (only tried when a term is negative)."""
    return any(c < 0 for _, c in d.terms) and sy.is_provably_nonnegative(sy.sub(sy.neg(d), 1))


def format_shape(shape: Sequence[Dim]) -> str:
    return "[" + ", ".join(sy.format_dim(d) for d in shape) + "]"


__all__ = ["DType", "DimAttr", "ShapeAttr", "TensorType", "FLOAT_DTYPES", "INDEX_DTYPES",
           "format_shape"]
