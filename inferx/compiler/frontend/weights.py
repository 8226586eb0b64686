"""Weight stores: name -> array, read lazily from memory-mapped files.

``SafetensorsStore`` parses only the headers on open (so importing an 8B checkpoint reads a few
KB) and checks that every tensor's bytes lie inside its file, so a truncated file is refused
before any heavy work. A tensor is memory-mapped when read; bf16 is widened to float32 storage,
the interpreter's representation (``inferx.compiler.interpreter.numerics``).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class WeightError(ValueError):
    """A weight file that is missing, truncated or malformed, or a missing or misshapen key."""


@dataclass(frozen=True)
class TensorEntry:
    file: Path
    dtype: str  # safetensors dtype name: F32, F16, BF16, ...
    shape: tuple[int, ...]
    offset: int  # absolute byte offset in the file
    nbytes: int


_NP = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64,
       "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


# A header longer than this is refused before it is read (the safetensors library's own cap).
MAX_HEADER_BYTES = 100_000_000
# The largest rank and dim a tensor may claim: far above any weight, low enough that an element
# count is never an overflow in numpy.
MAX_RANK = 8
MAX_DIM = 1 << 40


def read_safetensors_header(path: Path) -> dict[str, TensorEntry]:
    """The tensors of one .safetensors file, from its header alone, checked as the format requires:
    each entry's dtype, shape and data offsets agree, its bytes lie inside the file, and no two
    tensors share a byte. Errors name the file, the tensor and the value at fault."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise WeightError(f"{path}: truncated safetensors file ({size} bytes, no header length)")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER_BYTES:
            raise WeightError(f"{path}: corrupt safetensors file: a header of {n} bytes is over the "
                              f"{MAX_HEADER_BYTES}-byte cap")
        if n > size - 8:
            raise WeightError(f"{path}: truncated or corrupt safetensors file (header of {n} bytes, file of {size})")
        try:
            header = json.loads(f.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
            raise WeightError(f"{path}: corrupt safetensors header: {e}") from None
    if not isinstance(header, dict):
        raise WeightError(f"{path}: corrupt safetensors header: not a JSON object")
    if not isinstance(header.get("__metadata__", {}), dict):
        raise WeightError(f"{path}: corrupt safetensors header: '__metadata__' is not an object")
    base = 8 + n
    entries = {key: _entry(path, key, info, base, size) for key, info in header.items() if key != "__metadata__"}
    _refuse_overlaps(path, entries)
    return entries


def _entry(path: Path, key: str, info: object, base: int, size: int) -> TensorEntry:
    """One header entry, checked field by field."""
    where = f"{path}: tensor '{key}'"
    if not isinstance(info, dict):
        raise WeightError(f"{where}: its header entry is not an object (dtype, shape, data_offsets)")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in _NP:
        raise WeightError(f"{where}: dtype {dtype!r} is not supported ({', '.join(_NP)})")
    if not (isinstance(shape, list) and len(shape) <= MAX_RANK and _naturals(shape, MAX_DIM)):
        raise WeightError(f"{where}: shape {shape!r} is not a list of at most {MAX_RANK} dims in 0..{MAX_DIM}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and _naturals(offsets, 1 << 63)
            and offsets[0] <= offsets[1]):
        raise WeightError(f"{where}: data_offsets {offsets!r} are not [begin, end] with 0 <= begin <= end")
    begin, end = offsets
    itemsize = 2 if dtype == "BF16" else np.dtype(_NP[dtype]).itemsize
    need = math.prod(shape) * itemsize
    if end - begin != need:
        raise WeightError(f"{where}: data_offsets {offsets} hold {end - begin} bytes but shape {shape} of "
                          f"dtype {dtype} needs {need}")
    if base + end > size:
        raise WeightError(f"{path}: truncated: tensor '{key}' ends at byte {base + end} but the file has {size}")
    return TensorEntry(path, dtype, tuple(shape), base + begin, end - begin)


def _refuse_overlaps(path: Path, entries: Mapping[str, TensorEntry]) -> None:
    """No byte belongs to two tensors (aliased weights would change together under a writer that
    trusts them to be apart, and the format forbids them)."""
    spans = sorted((e.offset, e.offset + e.nbytes, key) for key, e in entries.items() if e.nbytes)
    for (_, end, first), (begin, _, second) in zip(spans, spans[1:], strict=False):
        if begin < end:
            raise WeightError(f"{path}: tensors '{first}' and '{second}' overlap (both hold bytes "
                              f"{begin}..{end} of the file)")


def _naturals(values: list[object] | tuple[object, ...], high: int) -> bool:
    return all(type(v) is int and 0 <= v <= high for v in values)


class SafetensorsStore(Mapping[str, np.ndarray]):
    """All tensors of a checkpoint (one file or shards), read on access."""

    def __init__(self, entries: Mapping[str, TensorEntry]):
        self.entries = dict(entries)

    @classmethod
    def open(cls, files: list[Path]) -> SafetensorsStore:
        entries: dict[str, TensorEntry] = {}
        for path in files:
            for key, entry in read_safetensors_header(path).items():
                if key in entries:
                    raise WeightError(f"{path}: tensor '{key}' also appears in {entries[key].file}")
                entries[key] = entry
        return cls(entries)

    def __getitem__(self, key: str) -> np.ndarray:
        e = self.entries[key]
        if e.nbytes == 0:
            return np.zeros(e.shape, dtype=np.float32 if e.dtype == "BF16" else _NP[e.dtype])
        raw = np.memmap(e.file, dtype=_NP[e.dtype], mode="r", offset=e.offset, shape=e.shape)
        if e.dtype == "BF16":
            wide = np.empty(e.shape, dtype=np.uint32)
            np.left_shift(raw, 16, out=wide, dtype=np.uint32)  # one pass, no uint32 temporary
            return wide.view(np.float32)
        return raw

    def __contains__(self, key: object) -> bool:  # Mapping's default would read the tensor
        return key in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def shape(self, key: str) -> tuple[int, ...]:
        return self.entries[key].shape


class CastStore(Mapping[str, np.ndarray]):
    """Presents another store's float tensors in one storage dtype (converting on read)."""

    def __init__(self, inner: Mapping[str, np.ndarray], dtype: type[np.floating]):
        self.inner, self.dtype = inner, dtype

    def __getitem__(self, key: str) -> np.ndarray:
        a = self.inner[key]
        return a if a.dtype == self.dtype or a.dtype.kind not in "f" else a.astype(self.dtype)

    def __contains__(self, key: object) -> bool:  # Mapping's default would read (and convert) the tensor
        return key in self.inner

    def __iter__(self) -> Iterator[str]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)
