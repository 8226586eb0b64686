"""Readers and writers of the fuzzed file formats, written from their specifications rather than
with InferX's own code, so that a mutated structure can be written back whatever it holds:
safetensors (header length, JSON header, data), GGUF (header, metadata, tensor table, data),
the artifact's canonical manifest with its hashes fixed up, and the packed ``.ixa`` form.

Writers take any values a mutation leaves (negative counts, NaN, unknown types) and write them
as the format's bytes would hold them (integers wrap to their field's width)."""

from __future__ import annotations

import hashlib
import json
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fuzz.mutators import expand_deep

# --- safetensors ----------------------------------------------------------------------------


def read_safetensors(path: Path) -> tuple[dict[str, Any], bytes]:
    """(header, data) of a safetensors file."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def write_safetensors(path: Path, header: Any, data: bytes, *, header_len: int | None = None) -> None:
    """A safetensors file of ``header`` (any JSON value) and ``data``; ``header_len`` overrides the
    stored length of the header."""
    text = expand_deep(json.dumps(header, allow_nan=True).encode())
    n = len(text) if header_len is None else header_len
    path.write_bytes(struct.pack("<Q", n % 2**64) + text + data)


# --- canonical JSON, the manifest's hashes and the packed form ------------------------------


def canonical(obj: Any) -> bytes:
    """The manifest's canonical rendering (``inferx.runtime.artifact``'s module docstring), NaN
    and infinity written as JSON's extensions where a mutation put them."""
    text = json.dumps(obj, sort_keys=True, indent=2, separators=(",", ": "), ensure_ascii=False, allow_nan=True)
    return expand_deep(text.encode("utf-8", "surrogatepass")) + b"\n"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def self_hashed(manifest: Any) -> Any:
    """``manifest`` with ``manifest_sha256`` recomputed (when it is an object)."""
    if not isinstance(manifest, dict):
        return manifest
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    try:
        digest = sha256(canonical(body))
    except (TypeError, ValueError):
        return manifest
    return {**body, "manifest_sha256": digest}


def fix_file_entries(manifest: Any, files: dict[str, bytes]) -> None:
    """Sets the size and sha256 of each entry of ``manifest["files"]`` that names one of ``files``
    to what that file holds (entries a mutation made into something else are left alone)."""
    entries = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(entries, dict):
        return
    for name, entry in entries.items():
        if isinstance(entry, dict) and name in files:
            entry["size"] = len(files[name])
            entry["sha256"] = sha256(files[name])


def read_artifact_dir(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(manifest, {relative path: bytes}) of a directory artifact."""
    manifest = json.loads((path / "manifest.json").read_bytes())
    files = {name: (path / name).read_bytes() for name in manifest["files"]}
    return manifest, files


def write_artifact_dir(path: Path, manifest_bytes: bytes, files: dict[str, bytes]) -> None:
    path.mkdir(parents=True)
    (path / "manifest.json").write_bytes(manifest_bytes)
    for name, data in files.items():
        dest = path / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)


PACKED_MAGIC = b"\x89IXA\r\n\x1a\n"
ALIGN = 64


def align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass
class Packed:
    """The fields of a packed artifact, each one a mutation may change before ``render``."""

    manifest: Any
    files: dict[str, bytes]
    magic: bytes = PACKED_MAGIC
    version: int | None = None  # default: the manifest's format_version
    header_len: int = 64
    manifest_len: int | None = None
    payload_offset: int | None = None
    total_len: int | None = None
    reserved: bytes = bytes(24)
    fix_offsets: bool = True  # set each file entry's "offset" to where the file is written
    fix_hashes: bool = True
    manifest_bytes: bytes | None = None  # written as is instead of the rendered manifest
    padding: int = 0  # byte written into the padding

    def render(self) -> bytes:
        names = sorted(self.files)
        offsets: dict[str, int] = {}
        end = 0
        for n in names:
            offsets[n] = align(end)
            end = offsets[n] + len(self.files[n])
        m = self.manifest
        entries = m.get("files") if isinstance(m, dict) else None
        if self.fix_offsets and isinstance(entries, dict):
            for n, e in entries.items():
                if isinstance(e, dict) and n in offsets:
                    e["offset"] = offsets[n]
        if self.fix_hashes:
            m = self_hashed(m)
        raw = self.manifest_bytes if self.manifest_bytes is not None else canonical(m)
        payload_at = align(64 + len(raw))
        payload = bytearray(bytes([self.padding]) * end)
        for n in names:
            payload[offsets[n] : offsets[n] + len(self.files[n])] = self.files[n]
        pad = bytes([self.padding]) * (payload_at - 64 - len(raw))
        total = payload_at + len(payload)
        version = self.version
        if version is None:
            v = m.get("format_version") if isinstance(m, dict) else 0
            version = v if isinstance(v, int) else 0
        header = (
            self.magic[:8].ljust(8, b"\0")
            + struct.pack("<I", version % 2**32)
            + struct.pack("<I", self.header_len % 2**32)
            + struct.pack("<Q", (len(raw) if self.manifest_len is None else self.manifest_len) % 2**64)
            + struct.pack("<Q", (payload_at if self.payload_offset is None else self.payload_offset) % 2**64)
            + struct.pack("<Q", (total if self.total_len is None else self.total_len) % 2**64)
            + self.reserved[:24].ljust(24, b"\0")
        )
        return header + raw + pad + bytes(payload)


def packed_of(manifest: dict[str, Any], files: dict[str, bytes]) -> Packed:
    """The packed form of a directory artifact's manifest and files (offsets added on render)."""
    m = json.loads(json.dumps(manifest))
    for e in m["files"].values():
        e["offset"] = 0
    return Packed(m, dict(files))


# --- GGUF -----------------------------------------------------------------------------------

# value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "B", U64: "Q", I64: "q", F64: "d"}


@dataclass
class GGUFString:
    """A GGUF string: its bytes and, where a mutation set it, a length other than theirs."""

    data: bytes
    length: int | None = None


@dataclass
class KV:
    key: GGUFString
    vtype: int
    value: Any  # a number, a GGUFString, or for ARRAY (element type, [values], count or None)


@dataclass
class TensorInfo:
    name: GGUFString
    dims: list[int]
    ggml_type: int
    offset: int
    n_dims: int | None = None  # stored instead of len(dims) where set


@dataclass
class GGUF:
    """A GGUF file's structure; ``render`` writes it with the padding its alignment asks."""

    version: int
    kvs: list[KV]
    tensors: list[TensorInfo]
    data: bytes
    alignment: int = 32
    tensor_count: int | None = None
    kv_count: int | None = None
    magic: bytes = b"GGUF"
    extra: list[bytes] = field(default_factory=list)

    def render(self) -> bytes:
        out = bytearray(self.magic)
        out += struct.pack("<I", self.version % 2**32)
        out += struct.pack("<Q", (len(self.tensors) if self.tensor_count is None else self.tensor_count) % 2**64)
        out += struct.pack("<Q", (len(self.kvs) if self.kv_count is None else self.kv_count) % 2**64)
        for kv in self.kvs:
            out += _string(kv.key)
            out += struct.pack("<I", kv.vtype % 2**32)
            out += _value(kv.vtype, kv.value)
        for t in self.tensors:
            out += _string(t.name)
            out += struct.pack("<I", (len(t.dims) if t.n_dims is None else t.n_dims) % 2**32)
            for d in t.dims:
                out += struct.pack("<Q", d % 2**64)
            out += struct.pack("<I", t.ggml_type % 2**32)
            out += struct.pack("<Q", t.offset % 2**64)
        a = self.alignment if 0 < self.alignment < 1 << 20 else 32
        out += bytes(-len(out) % a)
        return bytes(out) + self.data


def _string(s: GGUFString) -> bytes:
    n = len(s.data) if s.length is None else s.length
    return struct.pack("<Q", n % 2**64) + s.data


def _value(vtype: int, value: Any) -> bytes:
    if vtype == STRING:
        return _string(value if isinstance(value, GGUFString) else GGUFString(str(value).encode()))
    if vtype == ARRAY:
        etype, items, count = value
        head = struct.pack("<I", etype % 2**32) + struct.pack("<Q", (len(items) if count is None else count) % 2**64)
        return head + b"".join(_value(etype, v) for v in items)
    fmt = _SCALAR.get(vtype)
    if fmt is None:  # an unknown type: the value's bytes as a u32
        return struct.pack("<I", int(_num(value)) % 2**32)
    return _pack(fmt, value)


def _num(value: Any) -> float | int:
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, GGUFString):
        return len(value.data)
    return 0


def _pack(fmt: str, value: Any) -> bytes:
    v = _num(value)
    if fmt in "fd":
        try:
            return struct.pack("<" + fmt, float(v))
        except OverflowError:
            return struct.pack("<" + fmt, math.inf)
    bits = struct.calcsize(fmt) * 8
    v = int(v) if math.isfinite(v) else 0
    if fmt.islower():
        v = (v + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)
    else:
        v %= 2**bits
    return struct.pack("<" + fmt, v)


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> Any:
        (v,) = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return v

    def string(self) -> GGUFString:
        n = self.take("Q")
        s = self.data[self.at : self.at + n]
        self.at += n
        return GGUFString(s)

    def value(self, vtype: int) -> Any:
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            etype = self.take("I")
            n = self.take("Q")
            return (etype, [self.value(etype) for _ in range(n)], None)
        return self.take(_SCALAR[vtype])


def read_gguf(path: Path) -> GGUF:
    """The structure of a well-formed GGUF file (the fuzzer's own base files)."""
    r = _Reader(path.read_bytes())
    assert r.data[:4] == b"GGUF"
    r.at = 4
    version = r.take("I")
    n_tensors = r.take("Q")
    n_kv = r.take("Q")
    kvs = []
    for _ in range(n_kv):
        key = r.string()
        vtype = r.take("I")
        kvs.append(KV(key, vtype, r.value(vtype)))
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        n = r.take("I")
        dims = [r.take("Q") for _ in range(n)]
        tensors.append(TensorInfo(name, dims, r.take("I"), r.take("Q")))
    alignment = next((kv.value for kv in kvs if kv.key.data == b"general.alignment"), 32)
    start = r.at + (-r.at % alignment)
    return GGUF(version, kvs, tensors, r.data[start:], alignment)
