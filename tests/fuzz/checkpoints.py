"""Checkpoint kinds: config.json, safetensors headers, the shard index, GGUF metadata; read by
``inferx.import_model`` and every weight read."""

from __future__ import annotations

import json
import random
import shutil
from functools import cache
from pathlib import Path
from typing import Any

from tests.fuzz import formats
from tests.fuzz.formats import GGUF, KV, GGUFString, TensorInfo
from tests.fuzz.mutators import ODD_FLOATS, ODD_INTS, expand_deep, mutate_bytes, mutate_json
from tests.fuzz.outcome import Case, Outcome, call, compile_errors
from tests.fuzz.seeds import Bases

# --- checkpoints: config.json, safetensors headers, the shard index, GGUF -------------------


def _copy_model(src: Path, d: Path) -> Path:
    target = d / "model"
    shutil.copytree(src, target)
    return target


def make_config(rng: random.Random, bases: Bases, d: Path) -> Case:
    """A checkpoint whose config.json has fields removed, retyped, made huge, zero or negative,
    or is not a JSON object, not UTF-8, deeply nested."""
    target = _copy_model(bases.hf, d)
    case = Case("config", 0, d, target)
    path = target / "config.json"
    cfg = json.loads(path.read_bytes())
    pick = rng.random()
    if pick < 0.08:
        raw, note = mutate_bytes(rng, path.read_bytes())
        case.notes.append(f"config.json: {note}")
    elif pick < 0.14:
        raw = rng.choice((b"[]", b"null", b"", b"\xff\xfe{}", b"[" * 100000, b'{"a": 1}', b"{" * 5000))
        case.notes.append(f"config.json: {raw[:20]!r}")
    else:
        key = rng.choice(sorted(cfg))
        if rng.random() < 0.6:
            cfg[key] = rng.choice((*ODD_INTS, *ODD_FLOATS, None, "1", [], {}, True))
            case.notes.append(f"config {key} -> {cfg[key]!r}")
            raw = expand_deep(json.dumps(cfg, allow_nan=True).encode())
        else:
            mutated, notes = mutate_json(rng, cfg)
            case.notes += [f"config {n}" for n in notes]
            raw = expand_deep(json.dumps(mutated, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    path.write_bytes(raw)
    return case


_DTYPE_SIZE = {
    "F64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "I64": 8,
}


def make_safetensors(rng: random.Random, bases: Bases, d: Path) -> Case:
    """A checkpoint whose model.safetensors header has offsets, dtypes, shapes, entries or its
    length changed, or its data cut or extended."""
    target = _copy_model(bases.hf, d)
    case = Case("safetensors", 0, d, target)
    path = target / "model.safetensors"
    header, data = formats.read_safetensors(path)
    names = sorted(k for k in header if k != "__metadata__")
    name = rng.choice(names)
    entry = header[name]
    header_len = None
    op = rng.choice(
        ("dtype", "shape", "offsets", "offsets", "delete", "add", "length", "metadata", "json", "bytes", "data")
    )
    if op == "dtype":
        old = entry["dtype"]
        entry["dtype"] = rng.choice((*_DTYPE_SIZE, "Q4", "", 5, None, "f32", "F32 "))
        case.notes.append(f"{name} dtype {old} -> {entry['dtype']!r}")
        if _DTYPE_SIZE.get(entry["dtype"]) != _DTYPE_SIZE[old]:  # type: ignore[arg-type]
            case.must_refuse = "a dtype whose size disagrees with the tensor's bytes"
    elif op == "shape":
        old = list(entry["shape"])
        if rng.random() < 0.5:
            entry["shape"] = rng.choice(
                ([-1, 16], [0], [], [2**62, 2**62], [32, 16, 1], [1, *old], ["16"], [16.0, 32], [2**64], None, "16")
            )
        else:
            entry["shape"], note = mutate_json(rng, old, count=1)
        case.notes.append(f"{name} shape {old} -> {entry['shape']!r}")
        try:
            same = int(__import__("math").prod(entry["shape"])) == int(__import__("math").prod(old))
        except Exception:  # noqa: BLE001 - any shape that is not a list of numbers
            same = False
        if not same:
            case.must_refuse = "a shape whose size disagrees with the tensor's bytes"
    elif op == "offsets":
        b, e = entry["data_offsets"]
        other = header[rng.choice([n for n in names if n != name])]["data_offsets"]
        new = rng.choice(
            (
                [-4, e],
                [b, e + 4],
                [e, b],
                [b + 4, e + 4],
                list(other),
                [b, len(data) + 8],
                [b, 2**64],
                [b - 4, e - 4],
                [0, e - b],
            )
        )
        entry["data_offsets"] = new
        case.notes.append(f"{name} data_offsets {[b, e]} -> {new}")
        overlaps = any(
            n != name and max(new[0], header[n]["data_offsets"][0]) < min(new[1], header[n]["data_offsets"][1])
            for n in names
        )
        if new[0] < 0 or new[1] < new[0] or new[1] > len(data) or overlaps or new[1] - new[0] != e - b:
            case.must_refuse = "data offsets negative, reversed, past the data, overlapping or of another size"
    elif op == "delete":
        del header[name]
        case.notes.append(f"{name} deleted")
        case.must_refuse = "a checkpoint missing a weight"
    elif op == "add":
        header[rng.choice(("extra.weight", name + "x", "", "../x", "__metadata__x"))] = json.loads(json.dumps(entry))
        case.notes.append(f"a second entry over {name}'s bytes")
        case.must_refuse = "two tensors over the same bytes"
    elif op == "length":
        n = len(json.dumps(header).encode())
        header_len = rng.choice((n + 1, n - 1, n + 8, 0, 1, 2**31, 2**63, 2**64 - 1, n + len(data) + 1))
        case.notes.append(f"header length {n} -> {header_len}")
        case.must_refuse = "a header length that is not the header's"
    elif op == "metadata":
        header["__metadata__"] = rng.choice(({"format": 5}, {"format": "tf"}, [], None, {"x": [1]}, "pt", {"": ""}))
        case.notes.append(f"__metadata__ -> {header['__metadata__']!r}")
    elif op == "json":
        header, notes = mutate_json(rng, header)
        case.notes += [f"header {n}" for n in notes]
    if op == "bytes":
        raw = path.read_bytes()
        (n,) = __import__("struct").unpack("<Q", raw[:8])
        raw, note = mutate_bytes(rng, raw, region=(0, 8 + n))
        case.notes.append(f"header bytes: {note}")
        path.write_bytes(raw)
        return case
    if op == "data":
        data, note = mutate_bytes(rng, data)
        case.notes.append(f"data: {note}")
    formats.write_safetensors(path, header, data, header_len=header_len)
    return case


def make_index(rng: random.Random, bases: Bases, d: Path) -> Case:
    """A sharded checkpoint whose model.safetensors.index.json names shards outside the model
    directory, missing, of the wrong tensor, or is itself mutated."""
    target = _copy_model(bases.sharded, d)
    shutil.copyfile(bases.outside, d / "outside.safetensors")
    case = Case("index", 0, d, target)
    path = target / "model.safetensors.index.json"
    index = json.loads(path.read_bytes())
    wmap = index["weight_map"]
    name = rng.choice(sorted(wmap))
    op = rng.random()
    if op < 0.35:
        shard = rng.choice(
            (
                "../outside.safetensors",
                str(d / "outside.safetensors"),
                str(bases.outside),
                "sub/../../outside.safetensors",
                "./../outside.safetensors",
                "/dev/zero",
                "/etc/passwd",
            )
        )
        wmap[name] = shard
        case.notes.append(f"weight_map {name} -> {shard!r}")
        case.must_refuse = "a shard outside the model directory"
    elif op < 0.5:
        shard = rng.choice(
            (
                "missing.safetensors",
                "",
                ".",
                "config.json",
                "model.safetensors.index.json",
                sorted(set(wmap.values()) - {wmap[name]})[0],
                "sub/",
                "\x00",
            )
        )
        shards = set(wmap.values())
        wmap[name] = shard
        case.notes.append(f"weight_map {name} -> {shard!r}")
        if shard not in shards:  # another shard of the model may hold it as well as the one named: no rule
            case.must_refuse = "a shard name that is not a safetensors file of the model"
    elif op < 0.6:
        shard = rng.choice(sorted(set(wmap.values())))
        (target / shard).unlink()
        case.notes.append(f"{shard} removed")
        case.must_refuse = "a shard missing"
    elif op < 0.9:
        index, notes = mutate_json(rng, index)
        case.notes += [f"index {n}" for n in notes]
    else:
        raw, note = mutate_bytes(rng, path.read_bytes())
        path.write_bytes(raw)
        case.notes.append(f"index bytes: {note}")
        return case
    path.write_bytes(
        expand_deep(json.dumps(index, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    )
    return case


@cache
def _gguf(bases: Bases) -> GGUF:
    return formats.read_gguf(bases.gguf)


def _retyped(value: Any, vtype: int) -> Any:
    """``value`` carried over to a value of type ``vtype``, the way a confused writer would."""
    if vtype == formats.STRING:
        return value if isinstance(value, GGUFString) else GGUFString(repr(value).encode()[:64])
    if vtype == formats.ARRAY:
        return value if isinstance(value, tuple) else (formats.U32, [value if isinstance(value, int) else 0], None)
    if isinstance(value, tuple):
        return len(value[1])
    if isinstance(value, GGUFString):
        return len(value.data)
    return value


def make_gguf(rng: random.Random, bases: Bases, d: Path) -> Case:
    """A GGUF file with its counts, version, metadata types and values, strings, arrays, tensor
    infos (dims, types, offsets, names), alignment or bytes changed."""
    import copy

    g = copy.deepcopy(_gguf(bases))
    target = d / "model.gguf"
    case = Case("gguf", 0, d, target)
    for _ in range(1 if rng.random() < 0.75 else 2):
        case.notes.append(_mutate_gguf(rng, g))
    data = g.render()
    if rng.random() < 0.08:
        end = len(data) - len(g.data)
        data, note = mutate_bytes(rng, data, region=(0, end) if rng.random() < 0.7 else None)
        case.notes.append(f"bytes: {note}")
    target.write_bytes(data)
    return case


def _mutate_gguf(rng: random.Random, g: GGUF) -> str:
    op = rng.choice(
        (
            "count",
            "version",
            "magic",
            "retype",
            "value",
            "value",
            "key",
            "string",
            "array",
            "alignment",
            "dims",
            "ndims",
            "ggml_type",
            "offset",
            "tname",
            "tensor",
            "truncate",
        )
    )
    if op == "count":
        which = rng.choice(("tensor_count", "kv_count"))
        real = len(g.tensors) if which == "tensor_count" else len(g.kvs)
        setattr(g, which, rng.choice((real + 1, real - 1, 0, 2**31, 2**63, 2**64 - 1, 10**9)))
        return f"{which} -> {getattr(g, which)}"
    if op == "version":
        g.version = rng.choice((0, 1, 2, 4, 2**31, 2**32 - 1))
        return f"version -> {g.version}"
    if op == "magic":
        g.magic = rng.choice((b"GGUG", b"FUGG", b"\0\0\0\0"))
        return f"magic -> {g.magic!r}"
    if op == "truncate":
        g.data = g.data[: rng.randrange(len(g.data))]
        return f"data cut to {len(g.data)} bytes"
    if op in ("retype", "value", "key", "string", "array"):
        kvs = g.kvs
        if op == "string":
            kvs = [kv for kv in g.kvs if kv.vtype == formats.STRING] or kvs
        if op == "array":
            kvs = [kv for kv in g.kvs if kv.vtype == formats.ARRAY] or kvs
        kv = rng.choice(kvs)
        key = kv.key.data.decode(errors="replace")
        if op == "retype":
            new = rng.choice((*range(13), 13, 99, 2**32 - 1))
            kv.value = _retyped(kv.value, new)
            old, kv.vtype = kv.vtype, new
            return f"{key}: type {old} -> {new}"
        if op == "value":
            if kv.vtype in (formats.STRING, formats.ARRAY):
                kv.vtype = rng.choice((formats.U32, formats.I32, formats.U64, formats.F32))
            kv.value = rng.choice((*ODD_INTS, *ODD_FLOATS, 10**9, 2**32 - 1))
            return f"{key} -> {kv.value!r} (type {kv.vtype})"
        if op == "key":
            other = rng.choice(g.kvs).key.data
            kv.key = GGUFString(rng.choice((b"", b"\xff\xfe", other, kv.key.data + b"\0", b"general.alignment")))
            return f"key {key!r} -> {kv.key.data!r}"
        if op == "string":
            s = kv.value if isinstance(kv.value, GGUFString) else kv.key
            s.length = rng.choice((len(s.data) + 1, len(s.data) - 1, 2**40, 2**64 - 1, 0))
            return f"{key}: a string's length -> {s.length}"
        etype, items, _ = kv.value if isinstance(kv.value, tuple) else (formats.U32, [], None)
        pick = rng.randrange(4)
        if pick == 0:
            kv.value = (etype, items, rng.choice((len(items) + 1, 2**40, 2**64 - 1)))
        elif pick == 1:
            new = rng.choice((formats.U8, formats.STRING, formats.ARRAY, formats.F64, 99))
            kv.value = (new, [_retyped(v, new) for v in items] if new != formats.ARRAY else [], None)
        elif pick == 2:
            kv.value = (etype, items[: len(items) // 2], None)
        else:
            kv.value = (etype, items + items, None)
        return f"{key}: array -> type {kv.value[0]}, {len(kv.value[1])} items, count {kv.value[2]}"
    if op == "alignment":
        value = rng.choice((0, 1, 3, 31, 64, 2**20, 2**40, 2**64 - 1))
        vtype = rng.choice((formats.U32, formats.U64, formats.STRING, formats.F32, formats.I32))
        g.kvs.append(KV(GGUFString(b"general.alignment"), vtype, _retyped(value, vtype)))
        if vtype == formats.U32 and 0 < value < 2**20:
            g.alignment = value
        return f"general.alignment = {value} (type {vtype})"
    t = rng.choice(g.tensors)
    name = t.name.data.decode(errors="replace")
    if op == "dims":
        i = rng.randrange(len(t.dims))
        t.dims[i] = rng.choice((0, 1, t.dims[i] + 1, 2**31, 2**40, 2**63, 2**64 - 1))
        return f"{name} dims -> {t.dims}"
    if op == "ndims":
        t.n_dims = rng.choice((0, len(t.dims) + 1, 5, 2**31, 2**32 - 1))
        return f"{name} n_dims -> {t.n_dims}"
    if op == "ggml_type":
        t.ggml_type = rng.choice((1, 2, 3, 8, 12, 30, 39, 99, 2**32 - 1))
        return f"{name} type -> {t.ggml_type}"
    if op == "offset":
        other = rng.choice(g.tensors)
        t.offset = rng.choice((t.offset + 1, t.offset + 32, other.offset, len(g.data), 2**40, 2**64 - 1))
        return f"{name} offset -> {t.offset}"
    if op == "tname":
        t.name = GGUFString(
            rng.choice((b"", b"\xff", rng.choice(g.tensors).name.data, b"../x", b"blk.99.attn_q.weight"))
        )
        return f"{name} renamed {t.name.data!r}"
    if rng.random() < 0.5:
        g.tensors.remove(t)
        return f"{name} removed"
    g.tensors.append(TensorInfo(GGUFString(t.name.data), list(t.dims), t.ggml_type, t.offset))
    return f"{name} listed twice"


def run_checkpoint(case: Case) -> Outcome:
    """``inferx.import_model`` (the compiler's first phase) and every weight read, as compiling
    reads them."""
    import numpy as np

    import inferx

    def imported() -> None:
        program = inferx.import_model(case.target)
        for name in program.weights:
            np.asarray(program.weights[name]).sum()

    outcome, _ = call(imported, compile_errors())
    if outcome.status == "ok" and case.must_refuse:
        return Outcome("bad", f"accepted {case.must_refuse}")
    return outcome
