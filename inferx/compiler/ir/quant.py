"""Quantized weights: the schemes, the values a quantized linear's weight is made of, and their
numerics, which the reference interpreter and the kernels share.

A weight ``W[N, K]`` (HF's [out, in]) is quantized in groups of ``group`` consecutive K elements of
one row. Each element keeps a 4-bit code ``q`` in 0..15; each group has a scale ``s`` and, for an
asymmetric scheme, an offset ``m``::

    w = q * s + m        asymmetric (GGUF Q4_1, AWQ and GPTQ with zero points: m = -z * s)
    w = (q - 8) * s      symmetric  (GGUF Q4_0)

computed in fp32 from the stored scale and offset (``dequantize``). An optional per-column
multiplier ``col_scale[K]`` (activation-aware scaling, or a norm's scale folded in) multiplies
column k of the dequantized weight; a kernel applies it to the activations instead.

Storage (``pack_int4``): codes two to a byte along K, element ``2j`` in the low nibble of byte
``j`` and ``2j + 1`` in the high nibble, so a row of K codes is K / 2 bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

GROUPS = (32, 64, 128)
_SCHEME = re.compile(r"int4-g(\d+)(-sym)?")


class SchemeError(ValueError):
    """A scheme that cannot be parsed or does not fit a tensor; the message names both."""


@dataclass(frozen=True)
class Scheme:
    """How a weight is quantized: ``bits`` (4), ``group`` (K elements per scale) and whether codes
    are offset by a stored minimum (asymmetric, the default) or centred on 8 (symmetric)."""

    bits: int = 4
    group: int = 128
    symmetric: bool = False

    @property
    def name(self) -> str:
        return f"int{self.bits}-g{self.group}" + ("-sym" if self.symmetric else "")

    def check(self, shape: tuple[int, ...], what: str) -> None:
        """SchemeError unless ``shape`` is a matrix [N, K] whose K the group divides."""
        if len(shape) != 2:
            raise SchemeError(f"{what}: {self.name} quantizes matrices [N, K], not a tensor of shape {list(shape)}")
        if shape[1] % self.group:
            raise SchemeError(
                f"{what}: K = {shape[1]} is not a multiple of the group size {self.group} ({self.name}); "
                f"try a group of {', '.join(str(g) for g in GROUPS if shape[1] % g == 0) or 'none of ' + str(GROUPS)}"
            )


PARTS = ("codes", "scales", "mins", "col_scale")


def quantized_names(weight: str, scheme: Scheme, col_scale: bool = False) -> dict[str, str]:
    """The weight-store names of ``weight``'s quantized parts under ``scheme``: {part: name}, the
    parts ``codes``, ``scales``, (asymmetric) ``mins`` and (with ``col_scale``, for a method that
    scales input channels) ``col_scale``. A store that quantizes serves them."""
    parts = [p for p in PARTS if (p != "mins" or not scheme.symmetric) and (p != "col_scale" or col_scale)]
    return {part: f"{weight}.{scheme.name}.{part}" for part in parts}


def parse_quantized_name(name: str) -> tuple[str, Scheme, str] | None:
    """(weight, scheme, part) of a name ``quantized_names`` made, else None."""
    head, _, part = name.rpartition(".")
    weight, _, scheme = head.rpartition(".")
    if part not in PARTS or not weight or _SCHEME.fullmatch(scheme) is None:
        return None
    try:
        parsed = parse_scheme(scheme)
    except SchemeError:
        return None
    return (weight, parsed, part) if part in quantized_names(weight, parsed, col_scale=True) else None


def parse_scheme(text: str) -> Scheme:
    """``int4-g128``, ``int4-g64``, ``int4-g32``, each optionally ``-sym``."""
    m = _SCHEME.fullmatch(text.strip())
    if m is None or int(m.group(1)) not in GROUPS:
        raise SchemeError(
            f"unknown quantization scheme {text!r}: expected int4-g128, int4-g64 or int4-g32, optionally with -sym"
        )
    return Scheme(4, int(m.group(1)), m.group(2) is not None)


@dataclass
class QuantizedWeight:
    """A quantized ``W[N, K]``: ``codes`` uint8 [N, K] in 0..15 (unpacked), ``scales`` float32
    [N, K / group], ``mins`` float32 [N, K / group] (None for a symmetric scheme), and
    ``col_scale`` float32 [K] or None."""

    scheme: Scheme
    codes: np.ndarray
    scales: np.ndarray
    mins: np.ndarray | None = None
    col_scale: np.ndarray | None = None

    def __post_init__(self) -> None:
        n, k = self.codes.shape
        groups = (n, k // self.scheme.group)
        if self.codes.dtype != np.uint8 or k % self.scheme.group:
            raise SchemeError(f"codes must be uint8 [N, K] with K a multiple of {self.scheme.group}")
        if self.scales.shape != groups or (self.mins is None) != self.scheme.symmetric:
            raise SchemeError(f"scales (and mins, for an asymmetric scheme) must be {list(groups)}")
        if self.mins is not None and self.mins.shape != groups:
            raise SchemeError(f"mins must be {list(groups)}, got {list(self.mins.shape)}")
        if self.col_scale is not None and self.col_scale.shape != (k,):
            raise SchemeError(f"col_scale must be [{k}], got {list(self.col_scale.shape)}")

    @property
    def shape(self) -> tuple[int, int]:
        return self.codes.shape  # type: ignore[return-value]

    def dequantize(self) -> np.ndarray:
        """The float32 weight [N, K] the codes stand for (``col_scale`` applied)."""
        return dequantize(self.codes, self.scales, self.mins, self.scheme.group, self.col_scale)


def dequantize(
    codes: np.ndarray,
    scales: np.ndarray,
    mins: np.ndarray | None,
    group: int,
    col_scale: np.ndarray | None = None,
) -> np.ndarray:
    """``q * s + m`` (or ``(q - 8) * s``) in fp32 per group, then times ``col_scale`` per column."""
    n, k = codes.shape
    q = codes.astype(np.float32).reshape(n, k // group, group)
    s = scales.astype(np.float32)[:, :, None]
    w = q * s + mins.astype(np.float32)[:, :, None] if mins is not None else (q - np.float32(8)) * s
    w = w.reshape(n, k)
    return w * col_scale.astype(np.float32)[None, :] if col_scale is not None else w


def pack_int4(codes: np.ndarray) -> np.ndarray:
    """uint8 [N, K] codes in 0..15 -> uint8 [N, K / 2], element 2j low nibble, 2j + 1 high."""
    if codes.shape[-1] % 2:
        raise SchemeError(f"int4 codes pack two to a byte: K = {codes.shape[-1]} is odd")
    c = codes.astype(np.uint8)
    return (c[..., 0::2] & 0xF) | ((c[..., 1::2] & 0xF) << 4)


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """The inverse of ``pack_int4``."""
    out = np.empty((*packed.shape[:-1], packed.shape[-1] * 2), dtype=np.uint8)
    out[..., 0::2] = packed & 0xF
    out[..., 1::2] = packed >> 4
    return out
