"""The sections of an artifact's manifest, one frozen dataclass each, with their JSON.

A section's ``to_json`` gives the JSON the compiler writes, and its ``from_json(v, at)`` reads
it, checking the section alone: each field's presence, type, bounds and choices, unknown fields,
and what one field of the section says of another (a launch writes buffers alone, its
``by_rows`` ascend and begin with its ``kernel``; a kernel's scratch parameters name its scratch
buffers; constexprs are powers of two). A failure raises ArtifactError naming the field
(``inferx.runtime.manifest_fields``). What needs more than one section (a launch's kernel
exists, a buffer is written before it is read, a file is one of the artifact's) is checked by
``Manifest.from_sections``, and the sizes the sections imply by ``check_sizes``, both in
``inferx.runtime.manifest``, which composes these sections into the Manifest.

The entry points' launch plans (``EntryPlan``: its ``ArgSpec`` arguments, ``LaunchStep``
launches over ``Binding``s, ``BufferSpec`` buffers) are what ``inferx.runtime.plan`` binds to
tensors; ``KernelMeta`` is how each kernel launches; the rest describe weights, memory plans,
schedules and the tokenizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from inferx.runtime import expr
from inferx.runtime.kernel_source import KernelSource, Param, Scratch
from inferx.runtime.kv_blocks import Paging
from inferx.runtime.manifest_fields import (
    _UINT,
    DTYPES,
    KV_DTYPES,
    MAX_BATCH,
    MAX_GRID,
    MAX_HEADS,
    MAX_I32,
    MAX_LAYERS,
    MAX_SEQ,
    TENSOR_DTYPES,
    _At,
    _bool,
    _choice,
    _dims,
    _each,
    _each_key,
    _int,
    _list,
    _map,
    _name,
    _number,
    _obj,
    _show,
    _str,
)
from inferx.runtime.model_info import ModelInfo

BindingKind = Literal["arg", "buffer", "weight"]
_BINDING_KINDS = ("arg", "buffer", "weight")
_PARAM_KINDS = ("in", "out", "sym", "scratch")
_ORIGINS = ("heuristic", "tuned", "borrowed")
_COST_KV = ("seq", "context")
_COST_FLOPS = ("none", "largest_weight", "largest_int4_weight", "largest_fp8_weight", "two_largest_weights",
               "queries_by_context")
# each cubin field's least and largest value (Hopper's shared memory, a warp count CUDA launches)
_CUBIN_FIELDS = {
    "shared": (0, 1 << 20),
    "extra_params": (0, 64),
    "global_scratch": (0, 1 << 30),
    "global_scratch_align": (1, 1 << 16),
    "launch_warps": (1, 32),
}


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
        **({"kv_dtype": info.kv_dtype} if info.kv_dtype is not None else {}),
        **({"kv_paging": {"block_size": info.kv_paging.block_size, "blocks": info.kv_paging.blocks,
                          "blocks_per_seq": info.kv_paging.blocks_per_seq}} if info.kv_paging is not None else {}),
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
    o = _obj(v, at, keys, ("kv_dtype", "kv_paging"))
    eos = _list(o["eos_token_ids"], at.key("eos_token_ids"))
    paging = None
    if "kv_paging" in o:
        pat = at.key("kv_paging")
        po = _obj(o["kv_paging"], pat, ("block_size", "blocks", "blocks_per_seq"))
        paging = Paging(_int(po["block_size"], pat.key("block_size"), 1, MAX_SEQ),
                        _int(po["blocks"], pat.key("blocks"), 1, MAX_I32),
                        _int(po["blocks_per_seq"], pat.key("blocks_per_seq"), 1, MAX_SEQ))
    return ModelInfo(
        architecture=_str(o["architecture"], at.key("architecture")),
        vocab_size=_int(o["vocab_size"], at.key("vocab_size"), 1, MAX_I32),
        max_context=_int(o["max_context"], at.key("max_context"), 1, MAX_I32),
        eos_token_ids=tuple(_int(t, at.key("eos_token_ids").at(i), 0, MAX_I32) for i, t in enumerate(eos)),
        num_layers=_int(o["num_layers"], at.key("num_layers"), 1, MAX_LAYERS),
        num_kv_heads=_int(o["num_kv_heads"], at.key("num_kv_heads"), 1, MAX_HEADS),
        head_dim=_int(o["head_dim"], at.key("head_dim"), 1, MAX_HEADS),
        dtype=_choice(o["dtype"], at.key("dtype"), DTYPES),
        kv_dtype=_choice(o["kv_dtype"], at.key("kv_dtype"), KV_DTYPES) if "kv_dtype" in o else None,
        kv_paging=paging,
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
