"""GGUF's 4-bit tensors (llama.cpp's Q4_0, Q4_1 and Q4_K) read as int4 codes and group scales,
without dequantizing: the ``QuantizedWeight`` a GGUF weight already is.

Each type maps onto groups of 32 consecutive K elements of one row (GGUF dims are listed
innermost first, so ``ne[0]`` is K)::

    Q4_0   block of 32:  f16 d, 16 bytes of codes          w = d * (q - 8)        int4-g32-sym
    Q4_1   block of 32:  f16 d, f16 m, 16 bytes            w = d * q + m          int4-g32
    Q4_K   block of 256: f16 d, f16 dmin, 12 bytes of
           6-bit (sc, mn) per 32, 128 bytes of codes        w = d*sc * q - dmin*mn int4-g32

so Q4_K's group scale is ``d * sc`` and its minimum ``-(dmin * mn)``, both computed in fp32 as
``gguf.quants`` computes them. f16 to f32 is exact, hence ``QuantizedWeight.dequantize()``
computes what ``gguf.quants.dequantize`` does, operation for operation.

Code order: in a Q4_0 or Q4_1 block, byte j holds element j in its low nibble and element
j + 16 in its high nibble; in Q4_K each 64 elements take 32 bytes, elements 0..31 in the low
nibbles and 32..63 in the high ones. Codes come out unpacked in element order, as the contract
of ``inferx.compiler.ir.quant`` wants; ``pack_int4`` packs them its own way.

Other types (Q8_0, the other K-quants, F16, ...) are refused with ``GGUFQuantError``: they are
read dequantized by ``GGUFStore`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType

from inferx.compiler.frontend.gguf import GGUFHeader, GGUFTensor, read_gguf
from inferx.compiler.ir.quant import QuantizedWeight, Scheme

T = GGMLQuantizationType
GROUP = 32


class GGUFQuantError(ValueError):
    """A GGUF tensor that cannot be read as int4 codes; the message names the tensor and why."""


@dataclass(frozen=True)
class Layout:
    """One GGUF 4-bit type: its block as a numpy record, and the scheme its codes follow."""

    block: np.dtype
    scheme: Scheme

    @property
    def weights(self) -> int:  # elements per block
        return int(self.block["qs"].shape[0]) * 2


LAYOUTS: dict[GGMLQuantizationType, Layout] = {
    T.Q4_0: Layout(np.dtype([("d", "<f2"), ("qs", "u1", 16)]), Scheme(4, GROUP, symmetric=True)),
    T.Q4_1: Layout(np.dtype([("d", "<f2"), ("m", "<f2"), ("qs", "u1", 16)]), Scheme(4, GROUP)),
    T.Q4_K: Layout(
        np.dtype([("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12), ("qs", "u1", 128)]), Scheme(4, GROUP)
    ),
}


def _type_name(qtype: int) -> str:
    try:
        return T(qtype).name
    except ValueError:
        return f"GGML type {qtype}"


def layout_of(qtype: int, name: str) -> Layout:
    """The layout of ``qtype``; GGUFQuantError, naming the tensor and the types that map, if none."""
    try:
        return LAYOUTS[T(qtype)]
    except (ValueError, KeyError):
        pass
    why = " (Q8_0 is 8-bit)" if qtype == T.Q8_0 else ""
    maps = ", ".join(f"{t.name} ({layout.scheme.name})" for t, layout in LAYOUTS.items())
    raise GGUFQuantError(f"{name}: GGUF type {_type_name(qtype)} has no int4 form{why}; the types that map are {maps}")


def int4_from_gguf(raw: np.ndarray, qtype: int, shape: tuple[int, ...], name: str) -> QuantizedWeight:
    """The QuantizedWeight of a GGUF tensor of type ``qtype`` (Q4_0, Q4_1, Q4_K) whose bytes are
    ``raw`` (uint8, any shape, as stored) and whose numpy shape is ``shape`` = (N, K). Codes are
    uint8 [N, K] in element order; scales and minimums float32 [N, K / 32]. GGUFQuantError names
    the tensor for another type, a K the block does not divide, or a byte count that is not the
    shape's."""
    layout = layout_of(qtype, name)
    qname = T(qtype).name
    if len(shape) != 2 or min(shape) < 1:
        raise GGUFQuantError(f"{name}: {qname} is read as a matrix [N, K], not a tensor of shape {list(shape)}")
    n, k = (int(d) for d in shape)
    per_block = layout.weights
    if k % per_block:
        raise GGUFQuantError(f"{name}: K = {k} is not a multiple of the {qname} block of {per_block} weights")
    if raw.dtype != np.uint8:
        raise GGUFQuantError(f"{name}: the bytes of a {qname} tensor must be a uint8 array, got {raw.dtype}")
    blocks = k // per_block
    want = n * blocks * layout.block.itemsize
    if raw.size != want:
        raise GGUFQuantError(
            f"{name}: {qname} [N, K] = [{n}, {k}] takes {want} bytes ({blocks} blocks of "
            f"{layout.block.itemsize} bytes per row), got {raw.size}"
        )
    b = np.ascontiguousarray(raw).reshape(-1).view(layout.block).reshape(n, blocks)
    if qtype == T.Q4_K:
        return _q4_k(b, n, k, layout.scheme)
    qs = b["qs"]  # [N, blocks, 16]: element j low nibble, j + 16 high
    codes = np.concatenate([qs & 0xF, qs >> 4], axis=-1).reshape(n, k)
    scales = b["d"].astype(np.float32)
    mins = None if layout.scheme.symmetric else b["m"].astype(np.float32)
    return QuantizedWeight(layout.scheme, codes, scales, mins)


def _q4_k(b: np.ndarray, n: int, k: int, scheme: Scheme) -> QuantizedWeight:
    """Q4_K super-blocks [N, K / 256] -> 8 groups of 32 each, unpacked as ``gguf.quants.Q4_K``."""
    qs = b["qs"].reshape(n, -1, 4, 1, 32)  # 4 chunks of 64: elements 0..31 low nibble, 32..63 high
    codes = np.concatenate([qs & 0xF, qs >> 4], axis=-2).reshape(n, k)
    # 12 scale bytes, 6-bit (sc, mn) for each of the 8 groups:
    #   bytes 0..3  sc[0..3] low 6 bits, sc[4..7] bits 4..5 in the top 2
    #   bytes 4..7  mn[0..3] low 6 bits, mn[4..7] bits 4..5 in the top 2
    #   bytes 8..11 sc[4..7] bits 0..3 low nibble, mn[4..7] bits 0..3 high nibble
    raw = b["scales"]
    lo, mid, hi = raw[..., 0:4], raw[..., 4:8], raw[..., 8:12]
    sc = np.concatenate([lo & 0x3F, (hi & 0x0F) | ((lo >> 2) & 0x30)], axis=-1)
    mn = np.concatenate([mid & 0x3F, (hi >> 4) | ((mid >> 2) & 0x30)], axis=-1)
    d = b["d"].astype(np.float32)[..., None]
    dmin = b["dmin"].astype(np.float32)[..., None]
    scales = (d * sc.astype(np.float32)).reshape(n, k // GROUP)
    mins = -(dmin * mn.astype(np.float32)).reshape(n, k // GROUP)
    return QuantizedWeight(scheme, codes, scales, mins)


def int4_tensors(source: GGUFHeader | str | Path) -> dict[str, GGUFTensor]:
    """The tensors of a GGUF file (or its read header) that ``read_int4`` reads: matrices of a
    type in ``LAYOUTS``, by name in file order."""
    header = source if isinstance(source, GGUFHeader) else read_gguf(Path(source))
    return {
        name: t
        for name, t in header.tensors.items()
        if len(t.shape) == 2 and t.qtype in LAYOUTS and t.shape[1] % LAYOUTS[T(t.qtype)].weights == 0
    }


def read_int4(header: GGUFHeader, name: str) -> QuantizedWeight:
    """Tensor ``name`` of the file ``header`` was read from, as int4 codes and group scales (the
    file memory-mapped; the result holds no reference to it)."""
    t = header.tensors[name]
    layout_of(t.qtype, name)  # refuses another type before mapping its bytes
    raw = np.memmap(header.path, dtype=np.uint8, mode="r", offset=t.offset, shape=(t.nbytes,))
    return int4_from_gguf(raw, t.qtype, t.shape, name)
