"""The schema of an artifact's manifest: the sections the compiler writes and every runtime reads,
as frozen dataclasses.

The container (``inferx.runtime.artifact``) owns ``magic``, ``format_version``, ``files`` and
``manifest_sha256`` and stores every other key as an opaque section; this module says what the
sections are. The compiler builds a ``Manifest`` and writes ``Manifest.to_sections()``; a runtime
calls ``Manifest.from_sections(artifact.manifest, artifact.path)`` once, when it loads an
artifact, and reads the typed object from then on. ``from_sections`` checks the format version
(``FORMAT_VERSION``: this schema is version 3's), every field's presence and type, unknown
fields, and the cross-references below; whatever fails raises ArtifactError on one line naming
the field and the value at fault, as in
``a.ixa: manifest.json: entries.decode.launches[3].kernel: 'k9' names no kernel``.

Sections, all required:

    compiler_version, triton_version, target   non-empty strings (the container checks them too)
    model           ModelInfo: the decoder LLM
    limits          Limits: the largest batch and sequence compiled for
    launch          LaunchOptions: how kernels are launched
    entries         {entry point: EntryPlan}: the launch plans; prefill and decode at least
    kernels         {name: KernelMeta}: how each kernel launches, its source and cubin files
    weights         {name: WeightMeta}: each weight's file, shape and dtype
    memory_plan     {entry point: MemoryPlan, or {} where the entry has none}
    schedules       Schedules: where each kernel's schedule came from
    weights_format  a sentence on how weights are stored
    tokenizer       Tokenizer: its files, none where the artifact takes token ids only

Cross-references: every kernel a launch names (``kernel`` and each of ``by_rows``) is a key of
``kernels``, with as many inputs and outputs as its parameters and aliases use; a weight binding
names a weight; a buffer binding names a buffer of its entry's ``buffers``, and one a launch
reads or the entry returns was written by an earlier launch; an argument binding's index is one
of the entry's arguments; a kernel's ``name`` is its key; the kernels of ``schedules`` and the
entries of ``memory_plan`` exist; every file named (kernel sources, cubins, weights, tokenizer)
is one of the artifact's ``files``.

A manifest is data: shape and grid expressions follow the grammar of ``inferx.runtime.expr`` and
are never evaluated as Python; the names a runtime uses as identifiers or in file names (kernels,
their parameters and constants) are identifiers; every integer is bounded (``MAX_*``). Before a
session allocates or runs anything it calls ``check_sizes`` (what it would allocate and launch,
against the limits, the weights' files and the bounds) and ``read_kernels`` (every kernel source
read, hashed and checked against its kernel's description, none of it run); ``inspect`` reads
the typed manifest alone.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from inferx.runtime import expr
from inferx.runtime.artifact import _RESERVED, FORMAT_VERSION, Artifact, ArtifactError, canonical_json
from inferx.runtime.kernel_source import KernelSource, Param, Scratch, source_problem
from inferx.runtime.model_info import ModelInfo

# the ix dialect's element types (inferx.compiler.ir.types.DType)
DTYPES = ("f32", "f16", "bf16", "f8e4m3", "i8", "i4", "i32", "i64", "bool")
BindingKind = Literal["arg", "buffer", "weight"]
_BINDING_KINDS = ("arg", "buffer", "weight")
_PARAM_KINDS = ("in", "out", "sym", "scratch")
_ORIGINS = ("heuristic", "tuned", "borrowed")
_COST_KV = ("seq", "context")
_COST_FLOPS = ("none", "largest_weight", "largest_int4_weight", "two_largest_weights", "queries_by_context")
# each cubin field's least and largest value (Hopper's shared memory, a warp count CUDA launches)
_CUBIN_FIELDS = {
    "shared": (0, 1 << 20),
    "extra_params": (0, 64),
    "global_scratch": (0, 1 << 30),
    "global_scratch_align": (1, 1 << 16),
    "launch_warps": (1, 32),
}
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
SECTIONS = (
    "compiler_version",
    "triton_version",
    "target",
    "model",
    "limits",
    "launch",
    "entries",
    "kernels",
    "weights",
    "memory_plan",
    "schedules",
    "weights_format",
    "tokenizer",
)


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


# --- the sections ---------------------------------------------------------------------------


def model_json(info: ModelInfo) -> dict[str, Any]:
    """The ``model`` section: ModelInfo's fields."""
    return {
        "architecture": info.architecture,
        "vocab_size": info.vocab_size,
        "max_context": info.max_context,
        "eos_token_ids": list(info.eos_token_ids),
        "num_layers": info.num_layers,
        "num_kv_heads": info.num_kv_heads,
        "head_dim": info.head_dim,
        "dtype": info.dtype,
    }


def _model(v: Any, at: _At) -> ModelInfo:
    keys = (
        "architecture",
        "vocab_size",
        "max_context",
        "eos_token_ids",
        "num_layers",
        "num_kv_heads",
        "head_dim",
        "dtype",
    )
    o = _obj(v, at, keys)
    eos = _list(o["eos_token_ids"], at.key("eos_token_ids"))
    return ModelInfo(
        architecture=_str(o["architecture"], at.key("architecture")),
        vocab_size=_int(o["vocab_size"], at.key("vocab_size"), 1, MAX_I32),
        max_context=_int(o["max_context"], at.key("max_context"), 1, MAX_I32),
        eos_token_ids=tuple(_int(t, at.key("eos_token_ids").at(i), 0, MAX_I32) for i, t in enumerate(eos)),
        num_layers=_int(o["num_layers"], at.key("num_layers"), 1, MAX_LAYERS),
        num_kv_heads=_int(o["num_kv_heads"], at.key("num_kv_heads"), 1, MAX_HEADS),
        head_dim=_int(o["head_dim"], at.key("head_dim"), 1, MAX_HEADS),
        dtype=_choice(o["dtype"], at.key("dtype"), DTYPES),
    )


@dataclass(frozen=True)
class Limits:
    """What the artifact was compiled for: at most ``max_batch`` sequences of ``max_seq_len`` tokens."""

    max_batch: int
    max_seq_len: int

    def to_json(self) -> dict[str, Any]:
        return {"max_batch": self.max_batch, "max_seq_len": self.max_seq_len}

    @staticmethod
    def from_json(v: Any, at: _At) -> Limits:
        o = _obj(v, at, ("max_batch", "max_seq_len"))
        return Limits(
            _int(o["max_batch"], at.key("max_batch"), 1, MAX_BATCH),
            _int(o["max_seq_len"], at.key("max_seq_len"), 1, MAX_SEQ),
        )


@dataclass(frozen=True)
class LaunchOptions:
    """``pdl``: CUDA sessions launch with programmatic dependent launch (the kernels built to wait
    for their predecessor, ``grid_dependency``); ``overlap``: decode GEMVs were generated to load
    their first weight tiles before their grid wait."""

    pdl: bool
    overlap: bool

    def to_json(self) -> dict[str, Any]:
        return {"pdl": self.pdl, "overlap": self.overlap}

    @staticmethod
    def from_json(v: Any, at: _At) -> LaunchOptions:
        o = _obj(v, at, ("pdl", "overlap"))
        return LaunchOptions(_bool(o["pdl"], at.key("pdl")), _bool(o["overlap"], at.key("overlap")))


@dataclass(frozen=True)
class Binding:
    """What a launch's input or output, or an entry's return, is bound to: the entry's argument
    ``index``, or the buffer or weight ``name``."""

    kind: BindingKind
    index: int = -1
    name: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"kind": "arg", "index": self.index} if self.kind == "arg" else {"kind": self.kind, "name": self.name}

    @staticmethod
    def from_json(v: Any, at: _At) -> Binding:
        kind = _choice(_obj(v, at, ("kind",), ("index", "name"))["kind"], at.key("kind"), _BINDING_KINDS)
        if kind == "arg":
            return Binding("arg", index=_int(_obj(v, at, ("kind", "index"))["index"], at.key("index")))
        return Binding(cast(BindingKind, kind), name=_str(_obj(v, at, ("kind", "name"))["name"], at.key("name")))


@dataclass(frozen=True)
class BufferSpec:
    """A tensor of an entry: its shape as expressions over ``S_<symbol>``, its dtype."""

    shape: tuple[str, ...]
    dtype: str

    def to_json(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype}

    @staticmethod
    def from_json(v: Any, at: _At) -> BufferSpec:
        o = _obj(v, at, ("shape", "dtype"))
        return BufferSpec(_dims(o["shape"], at.key("shape")), _choice(o["dtype"], at.key("dtype"), TENSOR_DTYPES))


@dataclass(frozen=True)
class ArgSpec:
    """An argument of an entry point: the token ids, positions and context lengths, then the KV
    caches (``k0``, ``v0``, ``k1``, ...)."""

    name: str
    shape: tuple[str, ...]
    dtype: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}

    @staticmethod
    def from_json(v: Any, at: _At) -> ArgSpec:
        o = _obj(v, at, ("name", "shape", "dtype"))
        return ArgSpec(
            _str(o["name"], at.key("name")),
            _dims(o["shape"], at.key("shape")),
            _choice(o["dtype"], at.key("dtype"), TENSOR_DTYPES),
        )


@dataclass(frozen=True)
class LaunchStep:
    """One launch of an entry's plan: ``kernel`` over ``inputs``, writing ``outputs`` (buffers).

    A launch whose kernel has per-bucket variants lists them in ``by_rows``, (rows, kernel)
    ascending, ``kernel`` being the first's; its rows count batch x seq (a prompt's tokens), or
    the batch alone where ``rows`` is "batch" (a decode kernel, also in a prefill entry's tail)."""

    kernel: str
    inputs: tuple[Binding, ...]
    outputs: tuple[Binding, ...]
    by_rows: tuple[tuple[int, str], ...] = ()
    rows: Literal["batch"] | None = None

    def kernel_for(self, batch: int, seq: int) -> str:
        """The kernel the launch runs at ``batch`` x ``seq``: the variant of the smallest row
        bucket that holds its rows, past the last bucket the last variant, without variants
        its one kernel."""
        rows = batch if self.rows == "batch" else batch * seq
        for bound, name in self.by_rows:
            if rows <= bound:
                return name
        return self.by_rows[-1][1] if self.by_rows else self.kernel

    def variants(self) -> tuple[str, ...]:
        """Every kernel the launch may run."""
        return tuple(n for _, n in self.by_rows) or (self.kernel,)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kernel": self.kernel,
            "inputs": [b.to_json() for b in self.inputs],
            "outputs": [b.to_json() for b in self.outputs],
        }
        if self.by_rows:
            d["by_rows"] = [[b, n] for b, n in self.by_rows]
        if self.rows is not None:
            d["rows"] = self.rows
        return d

    @staticmethod
    def from_json(v: Any, at: _At) -> LaunchStep:
        o = _obj(v, at, ("kernel", "inputs", "outputs"), ("by_rows", "rows"))
        kernel = _str(o["kernel"], at.key("kernel"))
        ins = _each(o["inputs"], at.key("inputs"), Binding.from_json)
        outs = _each(o["outputs"], at.key("outputs"), Binding.from_json)
        for i, b in enumerate(outs):
            if b.kind != "buffer":
                raise at.key("outputs").at(i).key("kind").error(f"{b.kind!r}: a launch writes buffers alone")
        by_rows: list[tuple[int, str]] = []
        if "by_rows" in o:
            bat = at.key("by_rows")
            for i, pair in enumerate(_list(o["by_rows"], bat)):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise bat.at(i).error(f"{_show(pair)} is not a [rows, kernel] pair")
                bound = _int(pair[0], bat.at(i).at(0), 1)
                if by_rows and bound <= by_rows[-1][0]:
                    raise bat.at(i).at(0).error(f"{bound} does not ascend from {by_rows[-1][0]}")
                by_rows.append((bound, _str(pair[1], bat.at(i).at(1))))
            if not by_rows:
                raise bat.error("[] lists no variant")
            if by_rows[0][1] != kernel:
                raise at.key("kernel").error(f"{kernel!r} is not the first variant's, {by_rows[0][1]!r}")
        rows = cast(Literal["batch"], _choice(o["rows"], at.key("rows"), ("batch",))) if "rows" in o else None
        return LaunchStep(kernel, ins, outs, tuple(by_rows), rows)


@dataclass(frozen=True)
class EntryPlan:
    """An entry point's launch plan: its arguments, its launches in order, the buffers they write
    and what it returns (the logits first)."""

    args: tuple[ArgSpec, ...]
    launches: tuple[LaunchStep, ...]
    buffers: Mapping[str, BufferSpec]
    returns: tuple[Binding, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "args": [a.to_json() for a in self.args],
            "launches": [s.to_json() for s in self.launches],
            "buffers": {n: b.to_json() for n, b in self.buffers.items()},
            "returns": [b.to_json() for b in self.returns],
        }

    @staticmethod
    def from_json(v: Any, at: _At) -> EntryPlan:
        o = _obj(v, at, ("args", "launches", "buffers", "returns"))
        return EntryPlan(
            _each(o["args"], at.key("args"), ArgSpec.from_json),
            _each(o["launches"], at.key("launches"), LaunchStep.from_json),
            _each_key(o["buffers"], at.key("buffers"), BufferSpec.from_json),
            _each(o["returns"], at.key("returns"), Binding.from_json),
        )


@dataclass(frozen=True)
class CubinMeta:
    """A kernel's cubin (``file``) and what launching it needs: dynamic shared memory, the pointer
    parameters the compiler appends, its global scratch per program and that scratch's alignment,
    and the warps it was compiled to."""

    file: str
    shared: int
    extra_params: int
    global_scratch: int
    global_scratch_align: int
    launch_warps: int


@dataclass(frozen=True)
class KernelMeta:
    """A kernel of the artifact: how it launches (``kernel``, a KernelSource whose ``source`` is
    left empty: the text is the file ``file``) and its cubin where it was built for a GPU."""

    kernel: KernelSource
    file: str
    cubin: CubinMeta | None = None

    def with_source(self, text: str) -> KernelSource:
        return replace(self.kernel, source=text)

    def to_json(self) -> dict[str, Any]:
        d = self.kernel.to_json()
        del d["source"]
        d["file"] = self.file
        if self.cubin is not None:
            d["cubin"] = self.cubin.file
            for key in _CUBIN_FIELDS:
                d[key] = getattr(self.cubin, key)
        return d

    @staticmethod
    def from_json(v: Any, at: _At) -> KernelMeta:
        keys = (
            "name",
            "template",
            "params",
            "grid",
            "constexprs",
            "aliases",
            "num_warps",
            "num_stages",
            "schedule_origin",
            "scratch",
            "grid_dependency",
            "cost",
            "file",
        )
        o = _obj(v, at, keys, ("cubin", *_CUBIN_FIELDS))
        scratch = _each(o["scratch"], at.key("scratch"), _scratch)
        params = _each(o["params"], at.key("params"), lambda p, pat: _param(p, pat, len(scratch)))
        ks = KernelSource(
            name=_name(o["name"], at.key("name")),
            template=_str(o["template"], at.key("template")),
            source="",
            params=params,
            grid=_grid(o["grid"], at.key("grid")),
            constexprs=_constexprs(o["constexprs"], at.key("constexprs")),
            aliases=_aliases(o["aliases"], at.key("aliases")),
            num_warps=_int(o["num_warps"], at.key("num_warps"), 1, 32),
            num_stages=_int(o["num_stages"], at.key("num_stages"), 1, 32),
            schedule_origin=_choice(o["schedule_origin"], at.key("schedule_origin"), _ORIGINS),
            scratch=scratch,
            grid_dependency=_bool(o["grid_dependency"], at.key("grid_dependency")),
            cost=_cost(o["cost"], at.key("cost")),
        )
        cubin = None
        if "cubin" in o or any(k in o for k in _CUBIN_FIELDS):
            o = _obj(v, at, (*keys, "cubin", *_CUBIN_FIELDS))
            cubin = CubinMeta(
                _str(o["cubin"], at.key("cubin")),
                *(_int(o[k], at.key(k), *bounds) for k, bounds in _CUBIN_FIELDS.items()),
            )
        return KernelMeta(ks, _str(o["file"], at.key("file")), cubin)


def _param(v: Any, at: _At, n_scratch: int) -> Param:
    o = _obj(v, at, ("name", "kind", "index", "symbol", "dtype"))
    kind = _choice(o["kind"], at.key("kind"), _PARAM_KINDS)
    p = Param(
        name=_name(o["name"], at.key("name")),
        kind=cast(Any, kind),
        index=_int(o["index"], at.key("index"), -1),
        symbol=_str(o["symbol"], at.key("symbol"), empty=True),
        dtype=_str(o["dtype"], at.key("dtype"), empty=True),
    )
    if kind == "sym":
        _choice(p.symbol, at.key("symbol"), expr.SYMBOLS)
    else:
        _int(p.index, at.key("index"))
        _choice(p.dtype, at.key("dtype"), DTYPES)
    if kind == "scratch" and p.index >= n_scratch:
        raise at.key("index").error(f"{p.index} names no scratch buffer (the kernel has {n_scratch})")
    return p


MAX_CONSTEXPR = 1 << 16


def _constexprs(v: Any, at: _At) -> dict[str, int]:
    """A kernel's compile-time constants: every family's are tile sizes and counts (BM, BK,
    SPLITS, ...), each a power of two from 1 to ``MAX_CONSTEXPR``."""
    out: dict[str, int] = {}
    for k, c in _map(v, at).items():
        n = _int(c, at.key(k), 1, MAX_CONSTEXPR)
        if n & (n - 1):
            raise at.key(k).error(f"{n}: a kernel's constexprs are tile sizes and counts, powers of two")
        out[_name(k, at.key(k))] = n
    return out


def _grid(v: Any, at: _At) -> tuple[str, ...]:
    grid = _dims(v, at)
    if not 1 <= len(grid) <= len(MAX_GRID):
        raise at.error(f"{len(grid)} dimensions: a grid has 1 to {len(MAX_GRID)}")
    return grid


def _scratch(v: Any, at: _At) -> Scratch:
    o = _obj(v, at, ("shape", "dtype"))
    return Scratch(_dims(o["shape"], at.key("shape")), _choice(o["dtype"], at.key("dtype"), TENSOR_DTYPES))


def _aliases(v: Any, at: _At) -> dict[int, int]:
    out: dict[int, int] = {}
    for k, i in _map(v, at).items():
        if not _UINT.fullmatch(k):
            raise at.key(k).error("an alias's key is the index of an output")
        out[int(k)] = _int(i, at.key(k))
    return out


def _cost(v: Any, at: _At) -> dict[str, Any]:
    o = _obj(v, at, ("kv", "per_row", "flops"))
    return {
        "kv": _choice(o["kv"], at.key("kv"), _COST_KV),
        "per_row": _bool(o["per_row"], at.key("per_row")),
        "flops": _choice(o["flops"], at.key("flops"), _COST_FLOPS),
    }


@dataclass(frozen=True)
class WeightMeta:
    """A weight: the file holding it, in the layout kernels read, its shape and dtype."""

    file: str
    shape: tuple[int, ...]
    dtype: str

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "shape": list(self.shape), "dtype": self.dtype}

    @staticmethod
    def from_json(v: Any, at: _At) -> WeightMeta:
        o = _obj(v, at, ("file", "shape", "dtype"))
        return WeightMeta(
            _str(o["file"], at.key("file")),
            _each(o["shape"], at.key("shape"), _int),
            _choice(o["dtype"], at.key("dtype"), DTYPES),
        )


@dataclass(frozen=True)
class PlanBucket:
    """The memory plan at one shape bucket: the activation arena's peak, its size without reuse,
    and the KV cache's bytes."""

    dims: Mapping[str, int]
    peak_bytes: int
    no_reuse_bytes: int
    kv_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "dims": dict(self.dims),
            "peak_bytes": self.peak_bytes,
            "no_reuse_bytes": self.no_reuse_bytes,
            "kv_bytes": self.kv_bytes,
        }

    @staticmethod
    def from_json(v: Any, at: _At) -> PlanBucket:
        o = _obj(v, at, ("dims", "peak_bytes", "no_reuse_bytes", "kv_bytes"))
        dims = _each_key(o["dims"], at.key("dims"), lambda d, dat: _int(d, dat, 1))
        return PlanBucket(dims, *(_int(o[k], at.key(k)) for k in ("peak_bytes", "no_reuse_bytes", "kv_bytes")))


@dataclass(frozen=True)
class MemoryPlan:
    """An entry's memory plan: its text (the ix attribute) and its figures per bucket."""

    text: str
    buckets: tuple[PlanBucket, ...]

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "buckets": [b.to_json() for b in self.buckets]}

    @staticmethod
    def from_json(v: Any, at: _At) -> MemoryPlan | None:
        if _map(v, at) == {}:
            return None
        o = _obj(v, at, ("text", "buckets"))
        return MemoryPlan(
            _str(o["text"], at.key("text"), empty=True), _each(o["buckets"], at.key("buckets"), PlanBucket.from_json)
        )


@dataclass(frozen=True)
class TunedSchedule:
    """A kernel on a tuning record: its task (key and summary), the record's schedule, time, date
    and source; ``from_rows`` where the record is another row bucket's, ``regime`` where it was
    timed at other than burst clocks, ``by_rows`` each row bucket's record time (None where it
    borrowed) where the kernel serves several."""

    task: str
    summary: str
    schedule: Mapping[str, Any]
    median_ms: float
    date: str
    source: str
    from_rows: int | None = None
    regime: str = ""
    by_rows: Mapping[int, float | None] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "task": self.task,
            "summary": self.summary,
            "schedule": dict(self.schedule),
            "median_ms": self.median_ms,
            "date": self.date,
            "source": self.source,
        }
        if self.from_rows is not None:
            d["from_rows"] = self.from_rows
        if self.regime:
            d["regime"] = self.regime
        if self.by_rows:
            d["by_rows"] = {str(b): ms for b, ms in sorted(self.by_rows.items())}
        return d

    @staticmethod
    def from_json(v: Any, at: _At) -> TunedSchedule:
        keys = ("task", "summary", "schedule", "median_ms", "date", "source")
        o = _obj(v, at, keys, ("from_rows", "regime", "by_rows"))
        schedule = _map(o["schedule"], at.key("schedule"))
        for k, s in schedule.items():
            if type(s) not in (int, float, bool, str):
                raise at.key("schedule").key(k).error(f"{_show(s)} is not a number, boolean or string")
        by_rows: dict[int, float | None] = {}
        for k, ms in _map(o.get("by_rows", {}), at.key("by_rows")).items():
            if not _UINT.fullmatch(k):
                raise at.key("by_rows").key(k).error("a row bucket is a whole number")
            by_rows[int(k)] = None if ms is None else _number(ms, at.key("by_rows").key(k))
        return TunedSchedule(
            task=_str(o["task"], at.key("task")),
            summary=_str(o["summary"], at.key("summary"), empty=True),
            schedule=dict(schedule),
            median_ms=_number(o["median_ms"], at.key("median_ms")),
            date=_str(o["date"], at.key("date"), empty=True),
            source=_str(o["source"], at.key("source"), empty=True),
            from_rows=_int(o["from_rows"], at.key("from_rows"), 1) if "from_rows" in o else None,
            regime=_str(o["regime"], at.key("regime")) if "regime" in o else "",
            by_rows=by_rows,
        )


@dataclass(frozen=True)
class Fallback:
    """A kernel on its family's heuristic schedule: its task (None where the family has none) and why."""

    task: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "reason": self.reason}

    @staticmethod
    def from_json(v: Any, at: _At) -> Fallback:
        o = _obj(v, at, ("task", "reason"))
        task = None if o["task"] is None else _str(o["task"], at.key("task"))
        return Fallback(task, _str(o["reason"], at.key("reason"), empty=True))


@dataclass(frozen=True)
class DatabaseInfo:
    """The tuning database schedules were drawn from: its target and how many records it held."""

    target: str
    records: int


@dataclass(frozen=True)
class Schedules:
    """Where each kernel's schedule came from: a tuning record (``tuned``) or its family's
    heuristic (``fallbacks``); ``database`` None (and ``note`` saying why) where there was none."""

    database: DatabaseInfo | None
    tuned: Mapping[str, TunedSchedule]
    fallbacks: Mapping[str, Fallback]
    note: str

    def to_json(self) -> dict[str, Any]:
        db = None if self.database is None else {"target": self.database.target, "records": self.database.records}
        return {
            "database": db,
            "tuned": {n: t.to_json() for n, t in self.tuned.items()},
            "fallbacks": {n: f.to_json() for n, f in self.fallbacks.items()},
            "note": self.note,
        }

    @staticmethod
    def from_json(v: Any, at: _At) -> Schedules:
        o = _obj(v, at, ("database", "tuned", "fallbacks", "note"))
        db = None
        if o["database"] is not None:
            d = _obj(o["database"], at.key("database"), ("target", "records"))
            db = DatabaseInfo(
                _str(d["target"], at.key("database").key("target")),
                _int(d["records"], at.key("database").key("records")),
            )
        return Schedules(
            db,
            _each_key(o["tuned"], at.key("tuned"), TunedSchedule.from_json),
            _each_key(o["fallbacks"], at.key("fallbacks"), Fallback.from_json),
            _str(o["note"], at.key("note"), empty=True),
        )


@dataclass(frozen=True)
class Tokenizer:
    """The tokenizer's files as ``save_pretrained`` wrote them, under ``tokenizer/``; none where
    the artifact takes token ids only."""

    files: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"files": list(self.files)}

    @staticmethod
    def from_json(v: Any, at: _At) -> Tokenizer:
        o = _obj(v, at, ("files",))
        return Tokenizer(_each(o["files"], at.key("files"), _str))


# --- the manifest ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Manifest:
    """Every section of an artifact's manifest (the module docstring says what each holds)."""

    compiler_version: str
    triton_version: str
    target: str
    model: ModelInfo
    limits: Limits
    launch: LaunchOptions
    entries: Mapping[str, EntryPlan]
    kernels: Mapping[str, KernelMeta]
    weights: Mapping[str, WeightMeta]
    memory_plan: Mapping[str, MemoryPlan | None]
    schedules: Schedules
    weights_format: str
    tokenizer: Tokenizer

    def to_sections(self) -> dict[str, Any]:
        """The sections as JSON, what ``write_artifact`` is given."""
        return {
            "compiler_version": self.compiler_version,
            "triton_version": self.triton_version,
            "target": self.target,
            "model": model_json(self.model),
            "limits": self.limits.to_json(),
            "launch": self.launch.to_json(),
            "entries": {n: e.to_json() for n, e in self.entries.items()},
            "kernels": {n: k.to_json() for n, k in self.kernels.items()},
            "weights": {n: w.to_json() for n, w in self.weights.items()},
            "memory_plan": {n: {} if p is None else p.to_json() for n, p in self.memory_plan.items()},
            "schedules": self.schedules.to_json(),
            "weights_format": self.weights_format,
            "tokenizer": self.tokenizer.to_json(),
        }

    @staticmethod
    def from_sections(d: Mapping[str, Any], where: Path | str) -> Manifest:
        """The manifest ``d`` as stored (the container's keys with the sections; ``Artifact.manifest``),
        checked; ArtifactError names the field at fault. ``where`` names the artifact."""
        top = _At(str(where))
        if not isinstance(d, Mapping):
            raise ArtifactError(f"{where}: manifest.json: {_show(d)} is not an object")
        version = d.get("format_version")
        if "format_version" not in d:
            raise top.key("format_version").error("missing")
        if type(version) is not int:
            raise top.key("format_version").error(f"{_show(version)} is not an integer")
        if version != FORMAT_VERSION:
            fix = "upgrade inferx" if version > FORMAT_VERSION else "compile the model again"
            raise top.key("format_version").error(f"{version}: this runtime reads version {FORMAT_VERSION}: {fix}")
        if "files" not in d:
            raise top.key("files").error("missing")
        files = set(_map(d["files"], top.key("files")))
        for key in SECTIONS:
            if key not in d:
                raise top.key(key).error("missing section")
        unknown = sorted(set(d) - set(SECTIONS) - _RESERVED)
        if unknown:
            raise top.key(unknown[0]).error("unknown section")
        at = top.key
        m = Manifest(
            compiler_version=_str(d["compiler_version"], at("compiler_version")),
            triton_version=_str(d["triton_version"], at("triton_version")),
            target=_str(d["target"], at("target")),
            model=_model(d["model"], at("model")),
            limits=Limits.from_json(d["limits"], at("limits")),
            launch=LaunchOptions.from_json(d["launch"], at("launch")),
            entries=_each_key(d["entries"], at("entries"), EntryPlan.from_json),
            kernels=_each_key(d["kernels"], at("kernels"), KernelMeta.from_json),
            weights=_each_key(d["weights"], at("weights"), WeightMeta.from_json),
            memory_plan=_each_key(d["memory_plan"], at("memory_plan"), MemoryPlan.from_json),
            schedules=Schedules.from_json(d["schedules"], at("schedules")),
            weights_format=_str(d["weights_format"], at("weights_format"), empty=True),
            tokenizer=Tokenizer.from_json(d["tokenizer"], at("tokenizer")),
        )
        _check_references(m, files, top)
        return m

    def check(self, files: Iterable[str], where: Path | str) -> None:
        """What a writer calls before writing: that the manifest, stored beside ``files``, reads
        back (``from_sections``) to the same sections."""
        written = canonical_json(self.to_sections())
        stored = {**json.loads(written), "format_version": FORMAT_VERSION, "files": dict.fromkeys(files, {})}
        if canonical_json(Manifest.from_sections(stored, where).to_sections()) != written:
            raise ArtifactError(f"{where}: manifest.json: the sections do not read back as written")


def _check_references(m: Manifest, files: set[str], top: _At) -> None:
    for needed in ("prefill", "decode"):
        if needed not in m.entries:
            raise top.key("entries").key(needed).error("missing entry point")
    for name, k in m.kernels.items():
        at = top.key("kernels").key(name)
        if k.kernel.name != name:
            raise at.key("name").error(f"{k.kernel.name!r} is not the kernel's key")
        _listed(k.file, files, at.key("file"))
        if k.cubin is not None:
            _listed(k.cubin.file, files, at.key("cubin"))
    for name, w in m.weights.items():
        _listed(w.file, files, top.key("weights").key(name).key("file"))
    for i, f in enumerate(m.tokenizer.files):
        _listed(f, files, top.key("tokenizer").key("files").at(i))
    for ename, entry in m.entries.items():
        _check_entry(entry, m, top.key("entries").key(ename))
    for section, names in (("tuned", m.schedules.tuned), ("fallbacks", m.schedules.fallbacks)):
        for name in names:
            if name not in m.kernels:
                raise top.key("schedules").key(section).key(name).error("names no kernel")
    for name in m.memory_plan:
        if name not in m.entries:
            raise top.key("memory_plan").key(name).error("names no entry point")


def _listed(name: str, files: set[str], at: _At) -> None:
    if name not in files:
        raise at.error(f"{name!r} is not a file of the artifact")


def _check_entry(entry: EntryPlan, m: Manifest, at: _At) -> None:
    written: set[str] = set()

    def bound(b: Binding, bat: _At, read: bool) -> None:
        if b.kind == "arg" and b.index >= len(entry.args):
            raise bat.key("index").error(f"{b.index} is past the entry's {len(entry.args)} arguments")
        if b.kind == "weight" and b.name not in m.weights:
            raise bat.key("name").error(f"{b.name!r} names no weight")
        if b.kind == "buffer" and b.name not in entry.buffers:
            raise bat.key("name").error(f"{b.name!r} names no buffer of the entry")
        if b.kind == "buffer" and read and b.name not in written:
            raise bat.key("name").error(f"buffer {b.name!r} is read before a launch writes it")

    for i, step in enumerate(entry.launches):
        sat = at.key("launches").at(i)
        for j, name in enumerate(step.variants()):
            if name not in m.kernels:
                where = sat.key("by_rows").at(j).at(1) if step.by_rows else sat.key("kernel")
                raise where.error(f"{name!r} names no kernel")
            _check_arity(m.kernels[name].kernel, step, sat)
        for j, b in enumerate(step.inputs):
            bound(b, sat.key("inputs").at(j), True)
        for j, b in enumerate(step.outputs):
            bound(b, sat.key("outputs").at(j), False)
        written.update(b.name for b in step.outputs)
    for j, b in enumerate(entry.returns):
        bound(b, at.key("returns").at(j), True)


def _check_arity(ks: KernelSource, step: LaunchStep, at: _At) -> None:
    """That the launch binds every input and output the kernel's parameters and aliases use."""
    n = {"in": len(step.inputs), "out": len(step.outputs)}
    used = [(p.kind, p.index) for p in ks.params if p.kind in n]
    used += [("out", o) for o in ks.aliases] + [("in", i) for i in ks.aliases.values()]
    for kind, index in used:
        if index >= n[kind]:
            what = "inputs" if kind == "in" else "outputs"
            raise at.key(what).error(f"kernel {ks.name!r} uses {what[:-1]} {index}, the launch binds {n[kind]}")


# --- sizes ----------------------------------------------------------------------------------

N_INPUTS = 3  # input_ids, positions, kv_lens; the K and V caches of each layer follow (decoder.py)


def check_sizes(m: Manifest, artifact: Artifact) -> None:
    """That what a session would allocate and launch for ``m`` (read from ``artifact``) agrees with
    itself and stays in bounds, checked before a session allocates or launches anything: the
    limits within the model's context, the model's dtype one sessions compute in; each weight's
    shape and dtype the size of its file; every shape and grid expression in bounds at every batch
    and length the limits allow (``expr.bounds``); each entry's arguments the token ids,
    positions, lengths and the caches the model's layers, heads and head size make; its logits as
    wide as the vocabulary; and the table the token ids index holding a row per token.
    ArtifactError names the field, as ``from_sections`` does."""
    top = _At(str(artifact.path))
    info, limits = m.model, m.limits
    if limits.max_seq_len > info.max_context:
        raise (
            top.key("limits")
            .key("max_seq_len")
            .error(f"{limits.max_seq_len} exceeds the model's context, model.max_context {info.max_context}")
        )
    if info.dtype not in ("f32", "f16", "bf16"):
        raise top.key("model").key("dtype").error(f"{info.dtype!r}: sessions compute in f32, f16 or bf16")
    ranges = expr.symbol_ranges(limits.max_batch, limits.max_seq_len)
    for name, w in m.weights.items():
        wat = top.key("weights").key(name)
        nbytes = _tensor_bytes([(d, d) for d in w.shape], w.dtype, wat.key("shape"))
        held = artifact.files[w.file].size
        if held != nbytes:
            raise wat.key("shape").error(
                f"{list(w.shape)} of {w.dtype} is {nbytes} bytes; its file {w.file!r} holds {held}"
            )
    for name, k in m.kernels.items():
        kat = top.key("kernels").key(name)
        for i, g in enumerate(k.kernel.grid):
            _, hi = _bounds(g, ranges, kat.key("grid").at(i))
            if hi > MAX_GRID[i]:
                raise kat.key("grid").at(i).error(f"{_show(g)} reaches {hi} programs, past the bound {MAX_GRID[i]}")
        for j, sc in enumerate(k.kernel.scratch):
            _shape_bytes(sc.shape, sc.dtype, ranges, kat.key("scratch").at(j).key("shape"))
    for ename, e in m.entries.items():
        eat = top.key("entries").key(ename)
        for i, a in enumerate(e.args):
            _shape_bytes(a.shape, a.dtype, ranges, eat.key("args").at(i).key("shape"))
        for bname, b in e.buffers.items():
            _shape_bytes(b.shape, b.dtype, ranges, eat.key("buffers").key(bname).key("shape"))
        _check_args(e, info, eat.key("args"))
        _check_vocab(e, m, eat)


def _bounds(text: str, ranges: Mapping[str, expr.Bounds], at: _At) -> expr.Bounds:
    try:
        return expr.parse(text).bounds(ranges)
    except expr.ExprError as e:
        raise at.error(f"{_show(text)}: {e}") from None


def _shape_bytes(shape: Sequence[str], dtype: str, ranges: Mapping[str, expr.Bounds], at: _At) -> int:
    """The most bytes a tensor of ``shape`` takes at the symbols' ``ranges``."""
    return _tensor_bytes([_bounds(d, ranges, at.at(i)) for i, d in enumerate(shape)], dtype, at)


def _tensor_bytes(dims: Sequence[expr.Bounds], dtype: str, at: _At) -> int:
    """The bytes of a tensor whose dims lie in ``dims``, at most ``MAX_TENSOR_BYTES``."""
    n = 1
    for i, (lo, hi) in enumerate(dims):
        if lo < 0:
            raise at.at(i).error(f"may be {lo}: a dim is never negative")
        n *= hi
        if n * ITEM_BYTES.get(dtype, 1) > MAX_TENSOR_BYTES:
            raise at.error(f"takes more than {MAX_TENSOR_BYTES} bytes")
    return (n + 1) // 2 if dtype == "i4" else n * ITEM_BYTES[dtype]


def _check_args(e: EntryPlan, info: ModelInfo, at: _At) -> None:
    """A session binds an entry's arguments itself: the token ids and positions [batch, seq] (or
    [batch, 1]), the lengths [batch], all int32, then a K and a V cache per layer, each [batch,
    num_kv_heads, ctx, head_dim] of the model's dtype."""
    want = N_INPUTS + 2 * info.num_layers
    if len(e.args) != want:
        raise at.error(
            f"{len(e.args)} arguments; the model's {info.num_layers} layers make {want} (the token ids, "
            "positions and lengths, then a K and a V cache per layer)"
        )
    batch, seq, ctx = expr.Sym("batch"), expr.Sym("seq"), expr.Sym("ctx")
    rows = ((batch, seq), (batch, expr.Num(1)))
    cache = (batch, expr.Num(info.num_kv_heads), ctx, expr.Num(info.head_dim))
    for i, a in enumerate(e.args):
        shape = tuple(expr.parse(d) for d in a.shape)
        if i < 2:
            ok, dtype, what = shape in rows, "i32", "[batch, seq] or [batch, 1] of i32"
        elif i == 2:
            ok, dtype, what = shape == (batch,), "i32", "[batch] of i32"
        else:
            ok, dtype = shape == cache, info.dtype
            what = f"[batch, {info.num_kv_heads}, ctx, {info.head_dim}] of {info.dtype} (model's KV heads, head_dim)"
        if not ok or a.dtype != dtype:
            raise at.at(i).error(f"{a.name!r} is {list(a.shape)} of {a.dtype}, not {what}")


def _check_vocab(e: EntryPlan, m: Manifest, at: _At) -> None:
    vocab = m.model.vocab_size
    if not e.returns:
        raise at.key("returns").error("[]: an entry returns the logits first")
    first = e.returns[0]
    if first.kind != "buffer" or not e.buffers[first.name].shape:
        raise (
            at.key("returns")
            .at(0)
            .error(f"{first.kind} {first.name or first.index!r}: the logits are a buffer [..., vocab]")
        )
    logits = e.buffers[first.name]
    lead = tuple(expr.parse(d) for d in logits.shape[:-1])
    if lead not in ((expr.Sym("batch"), expr.Sym("seq")), (expr.Sym("batch"), expr.Num(1))):
        raise (
            at.key("buffers")
            .key(first.name)
            .key("shape")
            .error(f"{list(logits.shape)}: the logits are [batch, seq, vocab] or [batch, 1, vocab]")
        )
    if expr.parse(logits.shape[-1]) != expr.Num(vocab):
        raise (
            at.key("buffers")
            .key(first.name)
            .key("shape")
            .error(f"the logits are {logits.shape[-1]!r} wide, model.vocab_size is {vocab}")
        )
    if logits.dtype not in ("f32", "f16", "bf16"):
        raise at.key("buffers").key(first.name).key("dtype").error(f"{logits.dtype!r}: logits are f32, f16 or bf16")
    for i, step in enumerate(e.launches):
        if not any(b.kind == "arg" and b.index == 0 for b in step.inputs):
            continue
        tables = [(b.name, m.weights[b.name]) for b in step.inputs if b.kind == "weight"]
        if not tables:
            continue
        name, table = max(tables, key=lambda t: math.prod(t[1].shape))
        if not table.shape or table.shape[0] < vocab:
            raise (
                _At(at.where)
                .key("weights")
                .key(name)
                .key("shape")
                .error(
                    f"{list(table.shape)}: launch {i} of entry {at.path.rsplit('.', 1)[-1]} reads it by token id, "
                    f"and model.vocab_size is {vocab}"
                )
            )


# --- kernel sources -------------------------------------------------------------------------

MAX_SOURCE_BYTES = 4 << 20


def read_kernels(artifact: Artifact, m: Manifest) -> dict[str, KernelSource]:
    """Every kernel of ``m`` with its source, read from ``artifact`` and checked before any of it
    runs: its file's sha256 (``Artifact.file_bytes``), UTF-8, and that it defines the kernel the
    manifest describes (``kernel_source.source_problem``, which parses the text and runs none of
    it). Sessions call this for all kernels first, so that one bad file means nothing was run."""
    out: dict[str, KernelSource] = {}
    for name, meta in sorted(m.kernels.items()):
        where = f"{artifact.path}: file {meta.file!r} (kernel {name})"
        entry = artifact.files.get(meta.file)
        if entry is not None and entry.size > MAX_SOURCE_BYTES:
            raise ArtifactError(f"{where}: {entry.size} bytes, past the bound {MAX_SOURCE_BYTES} for a kernel's source")
        try:
            text = artifact.file_bytes(meta.file).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ArtifactError(f"{where}: not UTF-8 text: {e}") from None
        ks = meta.with_source(text)
        problem = source_problem(ks)
        if problem is not None:
            raise ArtifactError(f"{where}: {problem}")
        out[name] = ks
    return out
