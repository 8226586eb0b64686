"""Unit tests of the symbolic dim algebra (inferx/compiler/ir/symbolic.py).

Canonical forms are checked as text, identities as equality of canonical forms, and every
operation against Python integer arithmetic on random bindings of the symbols to sizes (>= 1).
"""

from __future__ import annotations

import random
import re

import pytest

from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.symbolic import (
    DimSyntaxError,
    SymExpr,
    add,
    evaluate,
    floordiv,
    format_dim,
    is_provably_nonnegative,
    mul,
    neg,
    parse_dim,
    product,
    sub,
    substitute,
    sym,
)

B, S, C = sym("batch"), sym("seq"), sym("ctx")
SYMBOLS = ("batch", "seq", "ctx")


# canonical forms ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("seq", "seq"),
        ("seq+1", "seq + 1"),
        ("1 + seq", "seq + 1"),
        ("2*seq - seq", "seq"),
        ("seq - seq", "0"),
        ("seq*batch", "batch * seq"),
        ("batch * seq * 4", "4 * batch * seq"),
        ("-1 + seq", "seq - 1"),
        ("-seq", "-seq"),
        ("3 - seq", "-seq + 3"),
        ("(seq + 1) * (seq - 1)", "seq * seq - 1"),
        ("2 * (seq + ctx)", "2 * ctx + 2 * seq"),
        ("seq floordiv 2", "seq floordiv 2"),
        ("(2 * seq) floordiv 2", "seq"),
        ("(4 * seq + 6) floordiv 4", "seq + 1"),
        ("(3 * seq + 1) floordiv 2", "seq + ((seq + 1) floordiv 2)"),
        ("(seq floordiv 2) floordiv 3", "seq floordiv 6"),
        ("(2 * seq + 2) floordiv 4", "(seq + 1) floordiv 2"),
        ("2 * (seq floordiv 2)", "2 * (seq floordiv 2)"),
        ("(batch * seq) floordiv 8", "(batch * seq) floordiv 8"),
        ("seq floordiv 1", "seq"),
        ("-(seq floordiv 2)", "-(seq floordiv 2)"),
        ("0 - seq floordiv 2", "-(seq floordiv 2)"),
        ("seq - seq floordiv 2", "seq - (seq floordiv 2)"),
        ("7 floordiv 2", "3"),
        ("(0 - 7) floordiv 2", "-4"),
    ],
)
def test_canonical_text(text: str, canonical: str) -> None:
    assert format_dim(parse_dim(text)) == canonical


def test_constants_are_plain_ints() -> None:
    assert sub(S, S) == 0 and isinstance(sub(S, S), int)
    assert add(sub(add(S, 3), S), 0) == 3
    assert mul(S, 0) == 0
    assert floordiv(add(mul(S, 4), 3), 4) == S
    assert product([2, 3, 4]) == 24
    assert isinstance(parse_dim("seq - seq + 5"), int)


def test_equality_is_structural_on_canonical_forms() -> None:
    assert add(S, B) == add(B, S)
    assert mul(S, B) == mul(B, S)
    assert mul(add(S, 1), 2) == add(mul(S, 2), 2)
    assert sub(mul(S, 2), S) == S
    assert add(S, 1) != S
    assert hash(add(S, B)) == hash(add(B, S))
    assert parse_dim("batch*seq + 1") == add(mul(B, S), 1)


def test_floordiv_identities() -> None:
    # (3x + 1) floordiv 2 == x + (x + 1) floordiv 2
    assert floordiv(add(mul(S, 3), 1), 2) == add(S, floordiv(add(S, 1), 2))
    # exact division
    assert floordiv(mul(S, 6), 3) == mul(S, 2)
    assert floordiv(add(mul(B, 8), mul(S, 4)), 4) == add(mul(B, 2), S)
    # nested floordivs fold, a common factor cancels
    assert floordiv(floordiv(S, 2), 3) == floordiv(S, 6)
    assert floordiv(add(mul(S, 2), 2), 4) == floordiv(add(S, 1), 2)
    assert floordiv(mul(floordiv(S, 2), 2), 2) == floordiv(S, 2)
    assert floordiv(S, 1) == S


@pytest.mark.parametrize("bad", [0, -2, 1.5, True])
def test_floordiv_needs_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="positive integer constant"):
        floordiv(S, bad)  # type: ignore[arg-type]


def test_symbol_names() -> None:
    assert sym("kv_heads").symbols() == frozenset({"kv_heads"})
    for bad in ("floordiv", "1x", "a-b", ""):
        with pytest.raises(ValueError, match="invalid symbol name"):
            sym(bad)


def test_queries() -> None:
    d = add(mul(B, S), floordiv(C, 2))
    assert d.symbols() == frozenset(SYMBOLS)
    assert sy.symbols_of(7) == frozenset()
    assert add(S, 5).constant() == 5
    assert S.constant() == 0
    assert sy.is_static(3) and not sy.is_static(S)
    assert repr(add(S, 1)) == "SymExpr('seq + 1')"
    assert str(mul(B, S)) == "batch * seq"


# evaluation against Python integers ---------------------------------------------------------

OPS = ("add", "sub", "mul", "neg", "floordiv")


def _random_dim(rng: random.Random, depth: int) -> tuple[sy.Dim, object]:
    """A random dim and a matching Python expression tree (evaluated by ``_eval_tree``)."""
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.6:
            name = rng.choice(SYMBOLS)
            return sym(name), name
        value = rng.randint(-5, 9)
        return value, value
    op = rng.choice(OPS)
    a, ta = _random_dim(rng, depth - 1)
    if op == "neg":
        return neg(a), ("neg", ta)
    if op == "floordiv":
        c = rng.randint(1, 6)
        return floordiv(a, c), ("floordiv", ta, c)
    b, tb = _random_dim(rng, depth - 1)
    fn = {"add": add, "sub": sub, "mul": mul}[op]
    return fn(a, b), (op, ta, tb)


def _eval_tree(tree: object, env: dict[str, int]) -> int:
    if isinstance(tree, int):
        return tree
    if isinstance(tree, str):
        return env[tree]
    assert isinstance(tree, tuple)
    op, *args = tree
    if op == "neg":
        return -_eval_tree(args[0], env)
    if op == "floordiv":
        return _eval_tree(args[0], env) // args[1]
    a, b = (_eval_tree(t, env) for t in args)
    return {"add": a + b, "sub": a - b, "mul": a * b}[op]


def _random_env(rng: random.Random) -> dict[str, int]:
    return {s: rng.randint(1, 50) for s in SYMBOLS}


def test_evaluate_matches_python_arithmetic() -> None:
    rng = random.Random(1234)
    for _ in range(600):
        dim, tree = _random_dim(rng, depth=4)
        for _ in range(5):
            env = _random_env(rng)
            assert evaluate(dim, env) == _eval_tree(tree, env), (format_dim(dim), tree, env)


def test_format_parse_round_trip_on_random_dims() -> None:
    rng = random.Random(99)
    for _ in range(600):
        dim, _ = _random_dim(rng, depth=4)
        text = format_dim(dim)
        again = parse_dim(text)
        assert again == dim, (text, format_dim(again))
        assert format_dim(again) == text


def test_is_provably_nonnegative_is_sound() -> None:
    """Whatever is claimed >= 0 is >= 0 on every sampled binding."""
    rng = random.Random(7)
    claimed = 0
    for _ in range(800):
        dim, tree = _random_dim(rng, depth=3)
        if is_provably_nonnegative(dim):
            claimed += 1
            for _ in range(8):
                env = _random_env(rng)
                assert _eval_tree(tree, env) >= 0, (format_dim(dim), env)
    assert claimed > 50


def test_substitute_matches_evaluation() -> None:
    rng = random.Random(42)
    for _ in range(300):
        dim, _ = _random_dim(rng, depth=3)
        repl, _ = _random_dim(rng, depth=2)
        env = _random_env(rng)
        # keep the replacement a size (>= 1) so that it is a valid binding of "seq"
        inner = evaluate(repl, env)
        if inner < 1:
            continue
        out = substitute(dim, {"seq": repl})
        assert evaluate(out, env) == evaluate(dim, {**env, "seq": inner})


def test_floordiv_of_linear_forms() -> None:
    rng = random.Random(5)
    for _ in range(500):
        a, b, k, c = rng.randint(-20, 20), rng.randint(-20, 20), rng.randint(-9, 9), rng.randint(1, 9)
        d = floordiv(add(add(mul(S, a), mul(B, b)), k), c)
        seq, batch = rng.randint(1, 200), rng.randint(1, 200)
        assert evaluate(d, {"seq": seq, "batch": batch}) == (a * seq + b * batch + k) // c


# provable non-negativity ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", True),
        ("-1", False),
        ("seq", True),
        ("seq - 1", True),  # symbols are sizes, >= 1
        ("seq - 2", False),
        ("batch * seq - 1", True),
        ("ctx + seq - seq", True),
        ("ctx - seq", False),
        ("seq floordiv 2", True),
        ("seq - seq floordiv 2", True),  # floor(seq / 2) <= seq / 2
        ("seq floordiv 2 - seq", False),
        ("(seq + 8) - (seq + 16) floordiv 2", True),
        ("seq * seq - seq", True),
        ("-seq", False),
    ],
)
def test_is_provably_nonnegative(text: str, expected: bool) -> None:
    assert is_provably_nonnegative(parse_dim(text)) is expected


# substitution ------------------------------------------------------------------------------------


def test_substitute() -> None:
    d = parse_dim("batch * seq + seq floordiv 2")
    assert substitute(d, {"seq": 4}) == add(mul(B, 4), 2)
    assert substitute(d, {"seq": add(C, 1)}) == parse_dim("batch * ctx + batch + (ctx + 1) floordiv 2")
    assert substitute(d, {}) == d
    assert substitute(d, {"batch": 2, "seq": 10}) == 25
    assert substitute(5, {"seq": 3}) == 5
    assert substitute(S, {"seq": S}) == S


def test_evaluate_needs_every_symbol() -> None:
    with pytest.raises(KeyError):
        evaluate(add(S, B), {"seq": 3})


# parse errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "offset", "message"),
    [
        ("seq +", 5, "expected a dim"),
        ("seq + + 1", 6, "expected a dim"),
        ("seq / 2", 4, "unexpected character '/'"),
        ("seq floordiv 0", 13, "positive integer constant"),
        ("seq floordiv batch", 13, "positive integer constant"),
        ("(seq + 1", 0, "expected ')'"),
        ("seq 2", 4, "unexpected '2'"),
        ("floordiv", 0, "expected a dim"),
        ("", 0, "expected a dim"),
        ("seq)", 3, "unexpected ')'"),
    ],
)
def test_dim_syntax_error_offsets(text: str, offset: int, message: str) -> None:
    with pytest.raises(DimSyntaxError, match=re.escape(message)) as info:
        parse_dim(text)
    assert info.value.offset == offset


def test_parse_accepts_any_spacing_and_parentheses() -> None:
    assert parse_dim("  ( ( seq ) ) ") == S
    assert parse_dim("batch*seq*2") == parse_dim("2 * batch * seq")
    assert parse_dim("-(seq - 3)") == sub(3, S)
    assert isinstance(parse_dim("seq"), SymExpr)
