"""Weight stores: name -> array, read lazily from memory-mapped files.

``SafetensorsStore`` parses only the headers on open (so importing an 8B checkpoint reads a few
KB) and checks that every tensor's bytes lie inside its file, so a truncated file is refused
before any heavy work. A tensor is memory-mapped when read; bf16 is widened to float32 storage,
the interpreter's representation (``inferx.compiler.interpreter.numerics``).
"""

from __future__ import annotations

import json
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


def read_safetensors_header(path: Path) -> dict[str, TensorEntry]:
    """The tensors of one .safetensors file, from its header alone; errors name the file and key."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise WeightError(f"{path}: truncated safetensors file ({size} bytes, no header length)")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8 or n > 100_000_000:
            raise WeightError(f"{path}: truncated or corrupt safetensors file (header of {n} bytes, file of {size})")
        try:
            header = json.loads(f.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
            raise WeightError(f"{path}: corrupt safetensors header: {e}") from None
    if not isinstance(header, dict):
        raise WeightError(f"{path}: corrupt safetensors header: not a JSON object")
    entries: dict[str, TensorEntry] = {}
    base = 8 + n
    for key, info in header.items():
        if key == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise WeightError(f"{path}: malformed header entry for '{key}'") from None
        if not (_naturals(shape) and _naturals((begin, end)) and begin <= end and isinstance(dtype, str)):
            raise WeightError(f"{path}: malformed header entry for '{key}'")
        if dtype not in _NP:
            raise WeightError(f"{path}: tensor '{key}' has unsupported dtype {dtype}")
        itemsize = 2 if dtype == "BF16" else np.dtype(_NP[dtype]).itemsize
        if end - begin != int(np.prod(shape, dtype=np.int64)) * itemsize:
            raise WeightError(f"{path}: tensor '{key}' has {end - begin} bytes for shape {list(shape)} {dtype}")
        if base + end > size:
            raise WeightError(
                f"{path}: truncated: tensor '{key}' ends at byte {base + end} but the file has {size}"
            )
        entries[key] = TensorEntry(path, dtype, shape, base + begin, end - begin)
    return entries


def _naturals(values: tuple[object, ...]) -> bool:
    return all(type(v) is int and v >= 0 for v in values)


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

    def __iter__(self) -> Iterator[str]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)
