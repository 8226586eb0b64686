"""Seeded mutations of JSON values, bytes and IR text. Every choice is drawn from the
``random.Random`` given, so a (kind, seed) pair always makes the same input."""

from __future__ import annotations

import copy
import math
import random
import re
from collections.abc import Iterator
from typing import Any

Path_ = tuple[Any, ...]  # keys and indices from the root of a JSON value

ODD_INTS = (
    0,
    -1,
    1,
    2,
    3,
    7,
    255,
    65536,
    2**31 - 1,
    2**31,
    2**32,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63),
    10**30,
)
ODD_FLOATS = (math.nan, math.inf, -math.inf, 1e308, -0.0, 1e-320, 0.5, -2.5, 1e9)
ODD_STRINGS = (
    "",
    " ",
    "../../escape",
    "../manifest.json",
    "/etc/passwd",
    "a/../../b",
    "kernels/../../x",
    "x" * 5000,
    "\x00",
    "é",
    "名前",
    "\ud800",
    "$(touch pwned)",
    "__import__('os').system('touch pwned')",
    "1e9",
    "NaN",
    "-1",
    "S_batch*S_batch*S_batch*S_batch*99999999",
    "cdiv(S_batch, 0)",
    "S_nope",
    "(((((((((((((((((((((((((((((((1)))))))))))))))))))))))))))))))",
    "C:\\x",
    "f32",
    "bf16",
    "i64",
    "decode",
)


DEEP = "\x01deep\x01"  # a string that ``expand_deep`` turns into lists nested thousands deep
DEEP_DEPTH = 5000


def deep(depth: int, leaf: Any = 0) -> Any:
    """A list nested ``depth`` deep (built without recursion); past 50, the ``DEEP`` placeholder."""
    if depth > 50:
        return DEEP
    v: Any = leaf
    for _ in range(depth):
        v = [v]
    return v


def expand_deep(raw: bytes) -> bytes:
    """JSON text with each ``DEEP`` placeholder replaced by lists nested ``DEEP_DEPTH`` deep (values
    that deep cannot be built, copied or dumped by Python's recursive json and copy)."""
    nested = b"[" * DEEP_DEPTH + b"]" * DEEP_DEPTH
    return raw.replace(b'"\\u0001deep\\u0001"', nested).replace(b'"\x01deep\x01"', nested)


def odd_value(rng: random.Random) -> Any:
    """A value of any JSON type that a field rarely expects."""
    pick = rng.random()
    if pick < 0.3:
        return rng.choice(ODD_INTS)
    if pick < 0.42:
        return rng.choice(ODD_FLOATS)
    if pick < 0.7:
        return rng.choice(ODD_STRINGS)
    return rng.choice(
        (None, True, False, [], {}, [0], {"": 0}, [None] * 3, deep(rng.choice((40, 3000))), ["x"] * 64, [2**64] * 2)
    )


def walk(value: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every (path, node) of a JSON value, the root first (iteratively, for any depth)."""
    stack = [(path, value)]
    while stack:
        p, v = stack.pop()
        yield p, v
        if isinstance(v, dict):
            stack.extend(((*p, k), c) for k, c in reversed(list(v.items())))
        elif isinstance(v, list):
            stack.extend(((*p, i), c) for i, c in reversed(list(enumerate(v))))


def get(value: Any, path: Path_) -> Any:
    for k in path:
        value = value[k]
    return value


def _tweak(rng: random.Random, v: Any, donors: list[Any]) -> Any:
    """A value near ``v`` in kind: a number moved, a string bent, a list or object reshaped."""
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return rng.choice((v + 1, v - 1, -v, v * 2, v * 1000003, v // 2, 0, -1, 2**31 + v, 2**63 - 1, v + 2**32))
    if isinstance(v, float):
        return rng.choice((v * 2, -v, v + 1, math.nan, math.inf, 0.0, float(int(v)) if math.isfinite(v) else 0.0))
    if isinstance(v, str):
        return rng.choice(
            (
                v + "/../x",
                "../" + v,
                v[: len(v) // 2],
                v.upper(),
                v + "\x00",
                v * 3,
                v.replace("_", "-"),
                v + " ",
                "/" + v,
                v + rng.choice(("é", "\ud800", "'", '"', "\n", "{", "}")),
            )
        )
    if isinstance(v, list):
        if not v:
            return [rng.choice(donors) if donors else 0]
        i = rng.randrange(len(v))
        return rng.choice((v[:i] + v[i + 1 :], v + [v[i]], list(reversed(v)), [], v[:1], v * 3, v + [odd_value(rng)]))
    if isinstance(v, dict):
        d = dict(v)
        if d and rng.random() < 0.5:
            del d[rng.choice(list(d))]
        else:
            d[rng.choice(("extra", "__proto__", "", "name", "size", "../x"))] = odd_value(rng)
        return d
    return odd_value(rng)


def mutate_json(
    rng: random.Random, value: Any, *, under: Path_ = (), count: int | None = None
) -> tuple[Any, list[str]]:
    """A mutated deep copy of a JSON ``value`` and a note per mutation. Each mutation picks a node
    (within ``under`` when given) and deletes it, replaces it by an odd value, tweaks it, or puts
    another node's value there."""
    value = copy.deepcopy(value)
    notes: list[str] = []
    n = count if count is not None else (1 if rng.random() < 0.7 else rng.randint(2, 4))
    for _ in range(n):
        nodes = [(p, v) for p, v in walk(value) if p[: len(under)] == under]
        if not nodes:
            break
        path, node = rng.choice(nodes)
        donors = [v for _, v in rng.sample(nodes, min(len(nodes), 8))]
        op = rng.random()
        if not path:
            value = odd_value(rng) if op < 0.5 else copy.deepcopy(_tweak(rng, node, donors))
            notes.append(f"root -> {_short(value)}")
            continue
        parent = get(value, path[:-1])
        key = path[-1]
        if op < 0.2:
            del parent[key]
            notes.append(f"{_show(path)}: deleted")
            continue
        if op < 0.5:
            new = odd_value(rng)
        elif op < 0.85:
            new = copy.deepcopy(_tweak(rng, node, donors))  # a donor may be an ancestor: no cycles
        else:
            new = copy.deepcopy(rng.choice(donors))
        parent[key] = new
        notes.append(f"{_show(path)} -> {_short(new)}")
    return value, notes


def _show(path: Path_) -> str:
    return "/".join(str(k) for k in path)


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def mutate_bytes(rng: random.Random, data: bytes, *, region: tuple[int, int] | None = None) -> tuple[bytes, str]:
    """``data`` with one mutation (within ``region`` [start, end) when given): bits flipped, a
    byte set, truncated, extended, a chunk deleted, duplicated or overwritten."""
    lo, hi = region or (0, len(data))
    hi = max(lo, min(hi, len(data)))
    b = bytearray(data)
    op = rng.randrange(8)
    if op == 7 or hi == lo:
        extra = rng.choice((b"\0" * rng.randint(1, 100), bytes(rng.randrange(256) for _ in range(rng.randint(1, 100)))))
        at = rng.randint(lo, hi)
        return bytes(b[:at] + extra + b[at:]), f"inserted {len(extra)} bytes at {at}"
    at = rng.randrange(lo, hi)
    if op == 0:
        bits = rng.randint(1, 8)
        for _ in range(bits):
            i = rng.randrange(lo, hi)
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b), f"flipped {bits} bits in [{lo}, {hi})"
    if op == 1:
        b[at] = rng.choice((0, 0xFF, 0x80, ord("}"), ord('"'), ord("\\"), rng.randrange(256)))
        return bytes(b), f"set byte {at} to {b[at]}"
    if op == 2:
        return bytes(b[:at]), f"truncated to {at} bytes"
    if op == 3:
        n = rng.randint(1, min(64, hi - at))
        del b[at : at + n]
        return bytes(b), f"deleted {n} bytes at {at}"
    if op == 4:
        n = rng.randint(1, min(64, hi - at))
        return bytes(b[: at + n] + b[at : at + n] + b[at + n :]), f"duplicated {n} bytes at {at}"
    if op == 5:
        n = rng.randint(1, min(16, hi - at))
        b[at : at + n] = bytes([0xFF]) * n
        return bytes(b), f"overwrote {n} bytes at {at} with 0xff"
    b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 4096)))
    return bytes(b), f"extended to {len(b)} bytes"


# --- IR text --------------------------------------------------------------------------------

TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[%@^#!]?[A-Za-z_][\w.$-]*|-?\d+(?:\.\d+)?(?:e[-+]?\d+)?|\s+|.', re.S)
ODD_NUMBERS = ("-1", "0", "-0", "1e400", "nan", "inf", "99999999999999999999999", "2147483648", "0x10", "1.5", "-7")
ODD_TOKENS = ("[", "]", "(", ")", "{", "}", "<", ">", ",", ":", "=", "?", "%x", "@", "!ix.tensor<", '"', "->", "f64")


def mutate_text(rng: random.Random, text: str) -> tuple[str, list[str]]:
    """IR text with 1 to 3 token-level mutations, or one of the shapes that overwhelm a parser:
    deep nesting, an op repeated thousands of times, a huge number."""
    if rng.random() < 0.06:
        return _overwhelm(rng, text)
    tokens = TOKEN.findall(text)
    solid = [i for i, t in enumerate(tokens) if not t.isspace()]
    notes = []
    for _ in range(rng.randint(1, 3)):
        if not solid:
            break
        i = rng.choice(solid)
        t = tokens[i]
        op = rng.choice((0, 1, 2, 3, 3, 4, 4, 4, 5))
        if op == 0:
            tokens[i] = ""
            notes.append(f"deleted {t!r}")
        elif op == 1:
            tokens[i] = t + " " + t
            notes.append(f"doubled {t!r}")
        elif op == 2:
            j = rng.choice(solid)
            tokens[i], tokens[j] = tokens[j], tokens[i]
            notes.append(f"swapped {t!r} and {tokens[i]!r}")
        elif op == 3 and re.fullmatch(r"-?\d.*", t):
            tokens[i] = rng.choice(ODD_NUMBERS)
            notes.append(f"number {t!r} -> {tokens[i]!r}")
        elif op == 4:
            tokens[i] = rng.choice([tokens[j] for j in solid if _same_class(tokens[j], t)] or [t])
            notes.append(f"{t!r} -> {tokens[i]!r}")
        else:
            tokens[i] = t + rng.choice(ODD_TOKENS + ODD_NUMBERS)
            notes.append(f"after {t!r} inserted {tokens[i][len(t) :]!r}")
    return "".join(tokens), notes


def _same_class(a: str, b: str) -> bool:
    """Both numbers, both names of one sigil (%, @, !, ^, #), both words, or both punctuation."""
    if re.fullmatch(r"-?\d.*", a) or re.fullmatch(r"-?\d.*", b):
        return bool(re.fullmatch(r"-?\d.*", a) and re.fullmatch(r"-?\d.*", b))
    if a[:1] in "%@!^#" or b[:1] in "%@!^#":
        return a[:1] == b[:1]
    return a[:1].isalpha() == b[:1].isalpha()


def _overwhelm(rng: random.Random, text: str) -> tuple[str, list[str]]:
    lines = text.split("\n")
    op = rng.randrange(4)
    if op == 0:
        n = rng.choice((200, 2000, 20000))
        at = rng.randrange(len(text) + 1)
        opener = rng.choice(("[", "(", "{", "<", "!ix.tensor<["))
        return text[:at] + opener * n + text[at:], [f"{n} x {opener!r} at {at}"]
    if op == 1:
        ops = [i for i, line in enumerate(lines) if " = " in line]
        if ops:
            i = rng.choice(ops)
            n = rng.choice((100, 1000, 5000))
            return "\n".join(lines[:i] + [lines[i]] * n + lines[i + 1 :]), [f"line {i + 1} repeated {n} times"]
    if op == 2:
        digits = rng.choice((40, 400, 5000))
        return re.sub(r"\b\d+\b", "9" * digits, text, count=1), [f"first number -> {digits} nines"]
    return text + "\n" + "x" * rng.choice((10**5, 10**6)), ["a long junk line appended"]
