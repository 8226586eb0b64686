"""Reading one value of an artifact's manifest: the bounds every value is held to, and the readers
that check a JSON value's type and bounds and name its place when it fails.

A manifest is untrusted data. Each reader takes a JSON value and the place it was read from
(``_At``: the artifact and a path such as ``entries.decode.launches[3].kernel``) and returns the
value typed, or raises ArtifactError on one line naming that place and the value at fault, as in
``a.ixa: manifest.json: entries.decode.launches[3].kernel: 'k9' names no kernel``. None of them
evaluates anything: a shape or grid expression is parsed by ``inferx.runtime.expr``'s grammar.
The readers serve ``inferx.runtime.manifest_sections`` (one section at a time) and
``inferx.runtime.manifest`` (the whole manifest and its checks against the artifact); the bounds
(``MAX_*``) and the element types are what those modules and the sessions check values and sizes
against.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from inferx.runtime import expr
from inferx.runtime.artifact import ArtifactError

# the ix dialect's element types (inferx.compiler.ir.types.DType)
DTYPES = ("f32", "f16", "bf16", "f8e4m3", "i8", "i4", "i32", "i64", "bool")
KV_DTYPES = ("f32", "f16", "bf16", "f8e4m3")  # a KV cache's element types
# Bounds on what a manifest may say, checked before anything is allocated: any integer fits in
# int64; names fit in file names; sizes stay within what a session can address (token ids and
# kernel parameters are int32); a tensor within a terabyte; a grid within CUDA's.
MAX_INT = (1 << 62) - 1
MAX_NAME = 128
MAX_I32 = (1 << 31) - 1
MAX_BATCH = 1 << 16
MAX_SEQ = 1 << 24
MAX_LAYERS = 1 << 16
MAX_HEADS = 1 << 16
MAX_TENSOR_BYTES = 1 << 40
MAX_GRID = (MAX_I32, 65535, 65535)
ITEM_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f8e4m3": 1, "i8": 1, "i32": 4, "i64": 8, "bool": 1}
TENSOR_DTYPES = tuple(ITEM_BYTES)  # what a session allocates: every dtype but the packed i4 of weights


# --- reading JSON, naming the place of every value ------------------------------------------

T = TypeVar("T")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UINT = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True)
class _At:
    """A place in the manifest (``entries.decode.launches[3].kernel``), for error messages."""

    where: str
    path: str = ""

    def key(self, k: str) -> _At:
        if _IDENT.fullmatch(k):
            return _At(self.where, f"{self.path}.{k}" if self.path else k)
        return _At(self.where, f"{self.path}[{k!r}]")

    def at(self, i: int) -> _At:
        return _At(self.where, f"{self.path}[{i}]")

    def error(self, problem: str) -> ArtifactError:
        return ArtifactError(f"{self.where}: manifest.json: {self.path}: {problem}")


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _obj(v: Any, at: _At, required: Sequence[str], optional: Sequence[str] = ()) -> Mapping[str, Any]:
    """``v`` as an object with the ``required`` keys and no others than ``optional``."""
    if not isinstance(v, dict):
        raise at.error(f"{_show(v)} is not an object")
    for k in required:
        if k not in v:
            raise at.key(k).error("missing")
    unknown = sorted(set(v) - set(required) - set(optional))
    if unknown:
        raise at.key(unknown[0]).error("unknown field")
    return v


def _map(v: Any, at: _At) -> Mapping[str, Any]:
    if not isinstance(v, dict):
        raise at.error(f"{_show(v)} is not an object")
    return v


def _list(v: Any, at: _At) -> list[Any]:
    if not isinstance(v, list):
        raise at.error(f"{_show(v)} is not a list")
    return v


def _str(v: Any, at: _At, *, empty: bool = False) -> str:
    if not isinstance(v, str):
        raise at.error(f"{_show(v)} is not a string")
    if not v and not empty:
        raise at.error("is empty")
    return v


def _int(v: Any, at: _At, minimum: int | None = 0, maximum: int = MAX_INT) -> int:
    if type(v) is not int:
        raise at.error(f"{_show(v)} is not an integer")
    if minimum is not None and v < minimum:
        raise at.error(f"{_show(v)} is below {minimum}")
    if abs(v) > maximum:
        raise at.error(f"{_show(v)} is past the bound {maximum}")
    return v


def _name(v: Any, at: _At) -> str:
    """A name the runtime uses as a Python identifier and in file names (a kernel's, a parameter's)."""
    if not isinstance(v, str) or not _IDENT.fullmatch(v) or len(v) > MAX_NAME:
        raise at.error(f"{_show(v)} is not an identifier of at most {MAX_NAME} characters ([A-Za-z_][A-Za-z0-9_]*)")
    return v


def _bool(v: Any, at: _At) -> bool:
    if type(v) is not bool:
        raise at.error(f"{_show(v)} is not a boolean")
    return v


def _number(v: Any, at: _At) -> float:
    if type(v) not in (int, float):
        raise at.error(f"{_show(v)} is not a number")
    return cast(float, v)


def _choice(v: Any, at: _At, options: Sequence[str]) -> str:
    if not isinstance(v, str) or v not in options:
        raise at.error(f"{_show(v)} is not one of {', '.join(options)}")
    return v


def _each(v: Any, at: _At, read: Callable[[Any, _At], T]) -> tuple[T, ...]:
    """A list, each item read by ``read``."""
    return tuple(read(x, at.at(i)) for i, x in enumerate(_list(v, at)))


def _each_key(v: Any, at: _At, read: Callable[[Any, _At], T]) -> dict[str, T]:
    """An object of named items, each read by ``read``."""
    return {k: read(x, at.key(k)) for k, x in _map(v, at).items()}


def _dim(v: Any, at: _At) -> str:
    """An expression of ``inferx.runtime.expr``'s grammar, checked here; its bounds are checked
    once the limits are known (``check_sizes``)."""
    try:
        expr.parse(_str(v, at))
    except expr.ExprError as e:
        raise at.error(f"{_show(v)}: {e}") from None
    return cast(str, v)


def _dims(v: Any, at: _At) -> tuple[str, ...]:
    """A shape as expressions over ``S_<symbol>`` names."""
    return _each(v, at, _dim)
