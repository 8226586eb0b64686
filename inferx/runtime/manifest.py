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

One section is optional:

    precision       the precision map the compile used (``inferx.compiler.quant.precision``):
                    an object whose ``layers`` map weight names to precision strings, with what
                    the planner measured beside it; shown by ``inferx inspect``, not read by runtimes

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

This module holds the whole: ``Manifest``, how it is read from the stored manifest and its
cross-references checked, and the checks against the artifact a session makes before it runs
(``check_sizes``, ``read_kernels``). Each section's dataclass and its JSON live in
``inferx.runtime.manifest_sections``; the readers of single values and the bounds
(``MAX_*``, the element types) in ``inferx.runtime.manifest_fields``. Their public names are
re-exported here, so a caller imports the schema from this module alone.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferx.runtime import expr
from inferx.runtime.artifact import _RESERVED, FORMAT_VERSION, Artifact, ArtifactError, canonical_json
from inferx.runtime.kernel_source import KernelSource, source_problem
from inferx.runtime.manifest_fields import (
    DTYPES,
    ITEM_BYTES,
    MAX_BATCH,
    MAX_GRID,
    MAX_HEADS,
    MAX_I32,
    MAX_INT,
    MAX_LAYERS,
    MAX_NAME,
    MAX_SEQ,
    MAX_TENSOR_BYTES,
    TENSOR_DTYPES,
    _At,
    _each_key,
    _map,
    _show,
    _str,
)
from inferx.runtime.manifest_sections import (
    MAX_CONSTEXPR,
    ArgSpec,
    Binding,
    BindingKind,
    BufferSpec,
    CubinMeta,
    DatabaseInfo,
    EntryPlan,
    Fallback,
    KernelMeta,
    LaunchOptions,
    LaunchStep,
    Limits,
    MemoryPlan,
    PlanBucket,
    Schedules,
    Tokenizer,
    TunedSchedule,
    WeightMeta,
    _model,
    model_json,
)
from inferx.runtime.model_info import ModelInfo

__all__ = [
    "DTYPES",
    "ITEM_BYTES",
    "MAX_BATCH",
    "MAX_CONSTEXPR",
    "MAX_GRID",
    "MAX_HEADS",
    "MAX_I32",
    "MAX_INT",
    "MAX_LAYERS",
    "MAX_NAME",
    "MAX_SEQ",
    "MAX_SOURCE_BYTES",
    "MAX_TENSOR_BYTES",
    "N_INPUTS",
    "inputs_of",
    "SECTIONS",
    "TENSOR_DTYPES",
    "ArgSpec",
    "Binding",
    "BindingKind",
    "BufferSpec",
    "CubinMeta",
    "DatabaseInfo",
    "EntryPlan",
    "Fallback",
    "KernelMeta",
    "LaunchOptions",
    "LaunchStep",
    "Limits",
    "Manifest",
    "MemoryPlan",
    "PlanBucket",
    "Schedules",
    "Tokenizer",
    "TunedSchedule",
    "WeightMeta",
    "check_sizes",
    "model_json",
    "read_kernels",
]

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
OPTIONAL_SECTIONS = ("precision",)


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
    precision: Mapping[str, Any] | None = None

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
            **({"precision": dict(self.precision)} if self.precision is not None else {}),
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
        unknown = sorted(set(d) - set(SECTIONS) - set(OPTIONAL_SECTIONS) - _RESERVED)
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
            precision=_precision(d["precision"], at("precision")) if "precision" in d else None,
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


def _precision(v: Any, at: _At) -> Mapping[str, Any]:
    """The precision section: an object whose ``layers`` map names to strings (the rest is what
    the planner measured, JSON kept as stored)."""
    if not isinstance(v, dict):
        raise at.error(f"{_show(v)} is not an object")
    layers = v.get("layers")
    if not isinstance(layers, dict):
        raise at.key("layers").error(f"{_show(layers)} is not an object")
    for name, p in layers.items():
        if not isinstance(p, str):
            raise at.key("layers").key(name).error(f"{_show(p)} is not a string")
    return v


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


def inputs_of(info: ModelInfo) -> int:
    """The arguments of an entry before the caches: the token ids, positions and lengths, and a
    paged cache's block table."""
    return N_INPUTS + (info.kv_paging is not None)


def _check_args(e: EntryPlan, info: ModelInfo, at: _At) -> None:
    """A session binds an entry's arguments itself: the token ids and positions [batch, seq] (or
    [batch, 1]), the lengths [batch], all int32, a paged cache's block table [batch, blocks a
    sequence] of int32, then a K and a V cache per layer, each [batch, num_kv_heads, ctx,
    head_dim] of the cache's dtype (the model's, or kv_dtype), or a paged cache's pool [blocks,
    num_kv_heads, block_size, head_dim]."""
    paging = info.kv_paging
    n_in = inputs_of(info)
    want = n_in + 2 * info.num_layers
    if len(e.args) != want:
        raise at.error(
            f"{len(e.args)} arguments; the model's {info.num_layers} layers make {want} (the token ids, "
            f"positions and lengths{', the block table' if paging else ''}, then a K and a V cache per layer)"
        )
    batch, seq, ctx = expr.Sym("batch"), expr.Sym("seq"), expr.Sym("ctx")
    rows = ((batch, seq), (batch, expr.Num(1)))
    heads, hd = expr.Num(info.num_kv_heads), expr.Num(info.head_dim)
    if paging is None:
        cache: tuple[expr.Expr, ...] = (batch, heads, ctx, hd)
        cache_what = f"[batch, {info.num_kv_heads}, ctx, {info.head_dim}]"
    else:
        cache = (expr.Num(paging.blocks), heads, expr.Num(paging.block_size), hd)
        cache_what = f"[{paging.blocks}, {info.num_kv_heads}, {paging.block_size}, {info.head_dim}]"
    for i, a in enumerate(e.args):
        shape = tuple(expr.parse(d) for d in a.shape)
        if i < 2:
            ok, dtype, what = shape in rows, "i32", "[batch, seq] or [batch, 1] of i32"
        elif i == 2:
            ok, dtype, what = shape == (batch,), "i32", "[batch] of i32"
        elif i < n_in:
            assert paging is not None
            ok, dtype = shape == (batch, expr.Num(paging.blocks_per_seq)), "i32"
            what = f"[batch, {paging.blocks_per_seq}] of i32 (the block table of model.kv_paging)"
        else:
            ok, dtype = shape == cache, info.cache_dtype
            what = f"{cache_what} of {info.cache_dtype} (model's KV heads, head_dim, cache dtype, paging)"
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
