"""Size and grid expressions of a launch plan: a small grammar over the symbolic dims, parsed once
and evaluated at launch. A manifest is data: its expressions are never handed to Python's ``eval``.

Grammar (what the compiler writes: ``dim_code`` in the families' common code, and each family's
grid)::

    expr  := term (("+" | "-") term)*
    term  := unary (("*" | "//" | "%") unary)*
    unary := "-" unary | atom
    atom  := INT | "S_" SYMBOL | FUNC "(" expr ("," expr)* ")" | "(" expr ")"
    FUNC  := cdiv (two arguments, ceiling division) | min | max (two or more)

``SYMBOL`` is one of ``SYMBOLS``, the dims a session binds: ``batch`` (sequences in the step),
``seq`` (tokens per sequence in the step) and ``ctx`` (the KV cache's length). An expression is at
most ``MAX_CHARS`` characters and ``MAX_DEPTH`` levels deep, a literal at most ``MAX_LITERAL``.

``Expr.bounds`` gives the range of an expression over every value of the symbols between 1 and
their bounds (interval arithmetic): a verifier checks sizes and grids with it once, before
anything is allocated or launched, and refuses a divisor that may be zero or negative and any
value past ``MAX_VALUE``; ``Expr.value`` is then the plain arithmetic at launch.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

SYMBOLS = ("batch", "seq", "ctx")
MAX_CHARS = 512
MAX_DEPTH = 32
MAX_LITERAL = 1 << 40
MAX_VALUE = 1 << 62

_TOKEN = re.compile(r"\s*(?:(\d+)|(S_[A-Za-z_][A-Za-z0-9_]*)|(cdiv|min|max)\b|(//|[-+*%(),]))")
_FUNCS: dict[str, Callable[..., int]] = {"cdiv": lambda a, b: -(-a // b), "min": min, "max": max}
_ARITY = {"cdiv": (2, 2), "min": (2, 8), "max": (2, 8)}

Bounds = tuple[int, int]


class ExprError(ValueError):
    """An expression outside the grammar, or one whose values leave the bounds; callers say which
    field of which file held it."""


class Expr:
    """A parsed expression: ``value(env)`` at symbol values, ``bounds(ranges)`` over ranges."""

    def value(self, env: Mapping[str, int]) -> int:
        raise NotImplementedError

    def bounds(self, ranges: Mapping[str, Bounds]) -> Bounds:
        raise NotImplementedError


@dataclass(frozen=True)
class Num(Expr):
    n: int

    def value(self, env: Mapping[str, int]) -> int:
        return self.n

    def bounds(self, ranges: Mapping[str, Bounds]) -> Bounds:
        return self.n, self.n


@dataclass(frozen=True)
class Sym(Expr):
    name: str

    def value(self, env: Mapping[str, int]) -> int:
        return env[self.name]

    def bounds(self, ranges: Mapping[str, Bounds]) -> Bounds:
        return ranges[self.name]


@dataclass(frozen=True)
class Neg(Expr):
    a: Expr

    def value(self, env: Mapping[str, int]) -> int:
        return -self.a.value(env)

    def bounds(self, ranges: Mapping[str, Bounds]) -> Bounds:
        lo, hi = self.a.bounds(ranges)
        return -hi, -lo


@dataclass(frozen=True)
class Bin(Expr):
    op: str
    a: Expr
    b: Expr

    def value(self, env: Mapping[str, int]) -> int:
        return _BINARY[self.op](self.a.value(env), self.b.value(env))

    def bounds(self, ranges: Mapping[str, Bounds]) -> Bounds:
        (alo, ahi), (blo, bhi) = self.a.bounds(ranges), self.b.bounds(ranges)
        if self.op == "+":
            return _capped(alo + blo, ahi + bhi)
        if self.op == "-":
            return _capped(alo - bhi, ahi - blo)
        if self.op != "*" and blo < 1:
            raise ExprError(f"the divisor of {self.op!r} may be {blo}: it must stay positive")
        if self.op == "%":
            return (0, bhi - 1) if alo >= 0 else (-(bhi - 1), bhi - 1)
        # * and // are monotone in each operand (// over positive divisors): the corners bound them
        f = _BINARY[self.op]
        corners = [f(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        return _capped(min(corners), max(corners))


@dataclass(frozen=True)
class Call(Expr):
    fn: str
    args: tuple[Expr, ...]

    def value(self, env: Mapping[str, int]) -> int:
        return _FUNCS[self.fn](*(a.value(env) for a in self.args))

    def bounds(self, ranges: Mapping[str, Bounds]) -> Bounds:
        bs = [a.bounds(ranges) for a in self.args]
        if self.fn == "cdiv":
            (alo, ahi), (blo, bhi) = bs
            if blo < 1:
                raise ExprError(f"the divisor of cdiv may be {blo}: it must stay positive")
            corners = [-(-x // y) for x in (alo, ahi) for y in (blo, bhi)]
            return _capped(min(corners), max(corners))
        pick = _FUNCS[self.fn]
        return pick(lo for lo, _ in bs), pick(hi for _, hi in bs)


_BINARY: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
}


def _capped(lo: int, hi: int) -> Bounds:
    worst = max(abs(lo), abs(hi))
    if worst > MAX_VALUE:
        raise ExprError(f"its value may reach {_magnitude(worst)}, past the bound 2**62")
    return lo, hi


def _magnitude(n: int) -> str:
    return str(n) if n < 10**15 else f"about 2**{n.bit_length() - 1}"


class _Parser:
    def __init__(self, text: str):
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                raise ExprError(f"unexpected {text[pos:].lstrip()[:12]!r} at character {pos}")
            num, sym, fn, punct = m.groups()
            if num is not None:
                self.tokens.append(("num", num))
            elif sym is not None:
                self.tokens.append(("sym", sym[2:]))
            elif fn is not None:
                self.tokens.append(("fn", fn))
            else:
                self.tokens.append(("op", punct))
            pos = m.end()
        self.i = 0
        self.depth = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, op: str) -> bool:
        if self.peek() == ("op", op):
            self.i += 1
            return True
        return False

    def expect(self, op: str) -> None:
        if not self.take(op):
            got = self.peek()
            raise ExprError(f"expected {op!r}, got {got[1] if got else 'the end'!r}")

    def nested(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExprError(f"nested deeper than {MAX_DEPTH} levels")

    def operator(self, ops: tuple[str, ...]) -> str | None:
        t = self.peek()
        if t is not None and t[0] == "op" and t[1] in ops:
            self.i += 1
            return t[1]
        return None

    def expr(self) -> Expr:
        self.nested()
        e = self.term()
        while (op := self.operator(("+", "-"))) is not None:
            e = Bin(op, e, self.term())
        self.depth -= 1
        return e

    def term(self) -> Expr:
        e = self.unary()
        while (op := self.operator(("*", "//", "%"))) is not None:
            e = Bin(op, e, self.unary())
        return e

    def unary(self) -> Expr:
        if self.take("-"):
            self.nested()
            e = Neg(self.unary())
            self.depth -= 1
            return e
        return self.atom()

    def atom(self) -> Expr:
        t = self.peek()
        if t is None:
            raise ExprError("ends where a value is expected")
        kind, text = t
        self.i += 1
        if kind == "num":
            n = int(text)
            if n > MAX_LITERAL:
                raise ExprError(f"literal {_magnitude(n)} is past the bound 2**40")
            return Num(n)
        if kind == "sym":
            if text not in SYMBOLS:
                raise ExprError(
                    f"S_{text} is no symbol a session binds (those are {', '.join('S_' + s for s in SYMBOLS)})"
                )
            return Sym(text)
        if kind == "fn":
            self.expect("(")
            args = [self.expr()]
            while self.take(","):
                args.append(self.expr())
            self.expect(")")
            least, most = _ARITY[text]
            if not least <= len(args) <= most:
                raise ExprError(
                    f"{text} takes {least}{'' if least == most else f' to {most}'} arguments, got {len(args)}"
                )
            return Call(text, tuple(args))
        if text == "(":
            e = self.expr()
            self.expect(")")
            return e
        raise ExprError(f"unexpected {text!r}")


def parse(text: str) -> Expr:
    """The expression ``text`` parsed (cached: a plan's few distinct expressions are parsed once)."""
    if not isinstance(text, str):
        raise ExprError(f"{text!r} is not a string")
    if len(text) > MAX_CHARS:
        raise ExprError(f"{len(text)} characters long, past the bound {MAX_CHARS}")
    return _parse(text)


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Expr:
    p = _Parser(text)
    if not p.tokens:
        raise ExprError("is empty")
    e = p.expr()
    rest = p.peek()
    if rest is not None:
        raise ExprError(f"unexpected {rest[1]!r} after a complete expression")
    return e


def evaluate(text: str, env: Mapping[str, int]) -> int:
    """``text`` at the symbol values ``env``."""
    return parse(text).value(env)


def symbol_ranges(max_batch: int, max_seq: int) -> dict[str, Bounds]:
    """The values a session binds the symbols to: batch up to the compiled maximum, seq and ctx up
    to the longest sequence compiled for."""
    return {"batch": (1, max_batch), "seq": (1, max_seq), "ctx": (1, max_seq)}
