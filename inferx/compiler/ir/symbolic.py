"""Symbolic dimension algebra shared by the verifier, shape inference, fusion and memory planning.

A dim is either a Python ``int`` or a ``SymExpr``: a polynomial with integer coefficients over
atoms, where an atom is a named symbol (``batch``, ``seq``, ``ctx``) or ``e floordiv c`` for a
symbolic ``e`` and a positive constant ``c``. Every ``SymExpr`` is kept in one canonical form
(``floordiv`` pulls out whole multiples, cancels common factors and folds nested divisions), and
dims are compared by that form, so a constant expression is always a plain ``int``. The form
is not complete for floor division: ``seq - 2 * (seq floordiv 2)`` never folds to ``seq mod 2``,
so such dims compare unequal, which the verifier treats as "not provably equal". Symbols stand
for sizes: integers >= 1. This is a small algebra of our own rather than sympy: it prints the same
text on every run (the IR must round-trip byte for byte), it is cheap to build thousands of times
per pass, and floor division with the identities a compiler needs is exact here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import reduce

Monomial = tuple["Atom", ...]  # sorted atoms; () is the constant term


@dataclass(frozen=True)
class FloorDiv:
    """The atom ``numerator floordiv divisor``; built only through ``floordiv`` below."""

    numerator: SymExpr
    divisor: int


Atom = str | FloorDiv


def _atom_key(atom: Atom) -> tuple[int, str]:
    return (0, atom) if isinstance(atom, str) else (1, str(atom.numerator) + f"//{atom.divisor}")


def _mono_key(mono: Monomial) -> tuple[int, tuple[tuple[int, str], ...]]:
    return (-len(mono), tuple(_atom_key(a) for a in mono))


@dataclass(frozen=True)
class SymExpr:
    """A canonical polynomial: ``terms`` maps sorted monomials to non-zero coefficients."""

    terms: tuple[tuple[Monomial, int], ...]

    # construction -------------------------------------------------------------------------
    @staticmethod
    def symbol(name: str) -> SymExpr:
        if not name.isidentifier() or name == "floordiv":
            raise ValueError(f"invalid symbol name {name!r}")
        return SymExpr((((name,), 1),))

    @staticmethod
    def _make(acc: Mapping[Monomial, int]) -> Dim:
        items = sorted(((m, c) for m, c in acc.items() if c != 0), key=lambda mc: _mono_key(mc[0]))
        if not items:
            return 0
        if len(items) == 1 and items[0][0] == ():
            return items[0][1]
        return SymExpr(tuple(items))

    # queries -------------------------------------------------------------------------------
    def constant(self) -> int:
        return dict(self.terms).get((), 0)

    def symbols(self) -> frozenset[str]:
        out: set[str] = set()
        for mono, _ in self.terms:
            for atom in mono:
                if isinstance(atom, str):
                    out.add(atom)
                else:
                    out |= symbols_of(atom.numerator)
        return frozenset(out)

    def evaluate(self, env: Mapping[str, int]) -> int:
        total = 0
        for mono, coeff in self.terms:
            value = coeff
            for atom in mono:
                if isinstance(atom, str):
                    if atom not in env:
                        raise KeyError(atom)
                    value *= env[atom]
                else:
                    value *= evaluate(atom.numerator, env) // atom.divisor
            total += value
        return total

    def __str__(self) -> str:
        return format_dim(self)

    def __repr__(self) -> str:
        return f"SymExpr({format_dim(self)!r})"


Dim = int | SymExpr


def _terms(d: Dim) -> dict[Monomial, int]:
    if isinstance(d, int):
        return {(): d} if d else {}
    return dict(d.terms)


def sym(name: str) -> SymExpr:
    return SymExpr.symbol(name)


def add(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    acc = _terms(a)
    for m, c in _terms(b).items():
        acc[m] = acc.get(m, 0) + c
    return SymExpr._make(acc)


def neg(a: Dim) -> Dim:
    return mul(a, -1)


def sub(a: Dim, b: Dim) -> Dim:
    return add(a, neg(b))


def mul(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    acc: dict[Monomial, int] = {}
    for ma, ca in _terms(a).items():
        for mb, cb in _terms(b).items():
            m = tuple(sorted(ma + mb, key=_atom_key))
            acc[m] = acc.get(m, 0) + ca * cb
    return SymExpr._make(acc)


def product(dims: Iterable[Dim]) -> Dim:
    one: Dim = 1
    return reduce(mul, dims, one)


def floordiv(a: Dim, c: int) -> Dim:
    """``a floordiv c`` for a constant ``c > 0``; pulls out every term that ``c`` divides."""
    if not isinstance(c, int) or isinstance(c, bool) or c <= 0:
        raise ValueError(f"floordiv needs a positive integer constant divisor, got {c!r}")
    if isinstance(a, int):
        return a // c
    if c == 1:
        return a
    # floor((c*q + r) / c) == q + floor(r / c) for integer q: keep only remainders in [0, c).
    quotient: dict[Monomial, int] = {}
    rest: dict[Monomial, int] = {}
    for m, coeff in a.terms:
        q, r = divmod(coeff, c)
        if q:
            quotient[m] = q
        if r:
            rest[m] = r
    rest_expr = SymExpr._make(rest)
    if isinstance(rest_expr, int):
        return add(SymExpr._make(quotient), rest_expr // c)
    # floor(g*r / (g*c)) == floor(r / c): divide out what the remainders and c share.
    g = math.gcd(c, *(coeff for _, coeff in rest_expr.terms))
    if g > 1:
        rest_expr = SymExpr._make({m: coeff // g for m, coeff in rest_expr.terms})
        c //= g
        assert isinstance(rest_expr, SymExpr)
        if c == 1:
            return add(SymExpr._make(quotient), rest_expr)
    (first_mono, first_coeff) = rest_expr.terms[0]
    if len(rest_expr.terms) == 1 and first_coeff == 1 and len(first_mono) == 1 \
            and isinstance(first_mono[0], FloorDiv):
        # floor(floor(n / d) / c) == floor(n / (d * c)) for every integer n.
        inner = first_mono[0]
        return add(SymExpr._make(quotient), floordiv(inner.numerator, inner.divisor * c))
    return add(SymExpr._make(quotient), SymExpr((((FloorDiv(rest_expr, c),), 1),)))


def evaluate(d: Dim, env: Mapping[str, int]) -> int:
    return d if isinstance(d, int) else d.evaluate(env)


def symbols_of(d: Dim) -> frozenset[str]:
    return frozenset() if isinstance(d, int) else d.symbols()


def is_static(d: Dim) -> bool:
    return isinstance(d, int)


def is_provably_nonnegative(d: Dim) -> bool:
    """True when ``d >= 0`` for every binding of its symbols to sizes (integers >= 1)."""
    if isinstance(d, int):
        return d >= 0
    shifted = substitute(d, {s: add(sym(s), 1) for s in d.symbols()})
    if _nonneg_over_naturals(shifted):
        return True
    bound = _bound_negated_floordivs(d)
    return bound is not None and is_provably_nonnegative(bound)


def _bound_negated_floordivs(d: SymExpr) -> Dim | None:
    """A lower bound of ``m * d`` (``m > 0``) with no term ``-k * (n floordiv c)``, or None if none.

    Since ``n floordiv c <= n / c``, such a term is at least ``-k * n / c``; ``m`` is the lcm of
    the divisors, so the bound stays integral. ``d >= 0`` follows when the bound is ``>= 0``.
    """

    def negated(mono: Monomial, coeff: int) -> bool:
        return coeff < 0 and len(mono) == 1 and isinstance(mono[0], FloorDiv)

    divisors = [mono[0].divisor for mono, coeff in d.terms if negated(mono, coeff)]  # type: ignore[union-attr]
    if not divisors:
        return None
    m = math.lcm(*divisors)
    total: Dim = 0
    for mono, coeff in d.terms:
        if negated(mono, coeff):
            atom = mono[0]
            assert isinstance(atom, FloorDiv)
            total = add(total, mul(coeff * (m // atom.divisor), atom.numerator))
        else:
            total = add(total, mul(coeff * m, SymExpr._make({mono: 1})))
    return total


def _nonneg_over_naturals(d: Dim) -> bool:
    if isinstance(d, int):
        return d >= 0
    return all(
        c >= 0 and all(isinstance(a, str) or _nonneg_over_naturals(a.numerator) for a in mono)
        for mono, c in d.terms
    )


def substitute(d: Dim, env: Mapping[str, Dim]) -> Dim:
    """Replaces the symbols named in ``env`` by dims; others stay symbolic."""
    if isinstance(d, int):
        return d
    total: Dim = 0
    for mono, coeff in d.terms:
        value: Dim = coeff
        for atom in mono:
            if isinstance(atom, str):
                value = mul(value, env.get(atom, sym(atom)))
            else:
                value = mul(value, floordiv(substitute(atom.numerator, env), atom.divisor))
        total = add(total, value)
    return total


# text ---------------------------------------------------------------------------------------


def _format_atom(atom: Atom, alone: bool) -> str:
    if isinstance(atom, str):
        return atom
    inner = f"{format_dim(atom.numerator)} floordiv {atom.divisor}"
    (first_mono, first_coeff), *others = atom.numerator.terms
    if others or first_coeff != 1 or len(first_mono) > 1:
        inner = f"({format_dim(atom.numerator)}) floordiv {atom.divisor}"
    return inner if alone else f"({inner})"


def format_dim(d: Dim) -> str:
    """Canonical text of a dim, e.g. ``4 * seq + 1``, ``batch * seq``, ``seq floordiv 2``."""
    if isinstance(d, int):
        return str(d)
    parts: list[str] = []
    for i, (mono, coeff) in enumerate(d.terms):
        alone = len(mono) == 1 and coeff == 1 and len(d.terms) == 1  # "-(x floordiv 2)" keeps its parens
        factors = [_format_atom(a, alone) for a in mono]
        mag = abs(coeff)
        body = " * ".join(([str(mag)] if mag != 1 or not mono else []) + factors)
        if i == 0:
            parts.append(f"-{body}" if coeff < 0 else body)
        else:
            parts.append(f"{'-' if coeff < 0 else '+'} {body}")
    return " ".join(parts)


class DimSyntaxError(ValueError):
    """A dim expression that does not parse; ``offset`` points into the text."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


# A dim's text is short: longer or deeper input is refused at once rather than costing time
# quadratic in its terms (canonical forms) or the parser's recursion.
MAX_DIM_TOKENS = 256
MAX_DIM_DEPTH = 8


def parse_dim(text: str) -> Dim:
    """Parses the text ``format_dim`` prints (and any equivalent spacing or parenthesisation), of at
    most MAX_DIM_TOKENS tokens and MAX_DIM_DEPTH nested parentheses."""
    tokens = _tokenize(text)
    if len(tokens) > MAX_DIM_TOKENS + 1:  # the end marker
        raise DimSyntaxError(f"dim expression of more than {MAX_DIM_TOKENS} tokens", tokens[MAX_DIM_TOKENS][1])
    pos = 0
    depth = 0

    def peek() -> tuple[str, int]:
        return tokens[pos]

    def take() -> tuple[str, int]:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        return tok

    def expr() -> Dim:
        value = term()
        while peek()[0] in ("+", "-"):
            op, _ = take()
            rhs = term()
            value = add(value, rhs) if op == "+" else sub(value, rhs)
        return value

    def term() -> Dim:
        value = factor()
        while peek()[0] in ("*", "floordiv"):
            op, off = take()
            if op == "*":
                value = mul(value, factor())
            else:
                tok, toff = take()
                if not tok.isdigit() or len(tok) > 18 or int(tok) <= 0:
                    raise DimSyntaxError("floordiv takes a positive integer constant", toff)
                value = floordiv(value, int(tok))
        return value

    def factor() -> Dim:
        tok, off = take()
        negate = False
        while tok == "-":
            negate = not negate
            tok, off = take()
        value = atom(tok, off)
        return neg(value) if negate else value

    def atom(tok: str, off: int) -> Dim:
        nonlocal depth
        if tok == "(":
            depth += 1
            if depth > MAX_DIM_DEPTH:
                raise DimSyntaxError(f"dim expression nested deeper than {MAX_DIM_DEPTH} parentheses", off)
            value = expr()
            if take()[0] != ")":
                raise DimSyntaxError("expected ')'", off)
            depth -= 1
            return value
        if tok.isdigit():
            if len(tok) > 18:
                raise DimSyntaxError(f"integer {tok[:20]}... is too large for a dim", off)
            return int(tok)
        if tok.isidentifier() and tok != "floordiv":
            return sym(tok)
        raise DimSyntaxError(f"expected a dim (integer, symbol or '('), got {tok or 'end'!r}", off)

    value = expr()
    tok, off = peek()
    if tok:
        raise DimSyntaxError(f"unexpected {tok!r} in dim expression", off)
    return value


def _tokenize(text: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "+-*()":
            out.append((ch, i))
            i += 1
        elif ch.isdigit():
            j = i
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append((text[i:j], i))
            i = j
        elif ch.isalpha() or ch == "_":
            j = i
            while j < len(text) and (text[j].isalnum() or text[j] == "_"):
                j += 1
            out.append((text[i:j], i))
            i = j
        else:
            raise DimSyntaxError(f"unexpected character {ch!r} in dim expression", i)
    out.append(("", len(text)))
    return out
