"""Round-to-nearest quantization, and the group numerics the calibrated methods share.

Each group of ``scheme.group`` consecutive K elements of a row gets its parameters from its own
values alone:

    asymmetric   m = min, s = (max - m) / 15, q = clip(rint((w - m) / s), 0, 15)
    symmetric    s = max|w| / 7.5, q = clip(rint(w / s) + 8, 0, 15)

The symmetric rule is GPTQ's (``sym=True``: s = 2 max|w| / 15, zero point 8): the scale is
positive and every element lies within s / 2 of its value, the end at +max|w| included (7.5 s).
GGUF Q4_0 instead takes d = w_absmax / -8 with the sign of the element of largest magnitude (one
level finer, up to a whole step of error on the other side); its blocks are imported as they
are, not made here.

A group whose scale is 0 (all elements equal; symmetric: all zero) keeps scale 0 and code 0
(symmetric: 8), so it dequantizes exactly to its value.

``scale_dtype`` ("f16", "bf16") rounds the scales and minimums to the type they are stored in
before the codes are computed, so the codes are the nearest ones for the stored values: the
minimum rounds down and the scale up, so the stored grid still spans the group and every element
stays within half a stored step of its value.
"""

from __future__ import annotations

import numpy as np

from inferx.compiler.interpreter.numerics import round_to
from inferx.compiler.ir.quant import QuantizedWeight, Scheme
from inferx.compiler.ir.types import DType

CHUNK = 1 << 22  # elements of the weight quantized at once (a few float32 temporaries of 16 MiB)
SCALE_DTYPES = ("f32", "f16", "bf16")


def quantize_rtn(
    w: np.ndarray, scheme: Scheme, name: str = "weight", scale_dtype: str | None = None
) -> QuantizedWeight:
    """``w[N, K]`` quantized by round-to-nearest under ``scheme`` (see the module docstring).
    SchemeError (naming ``name``) unless the group divides K; ValueError for non-finite weights
    or scales past the range of ``scale_dtype``. Works in float32, a chunk of rows at a time."""
    scheme.check(w.shape, name)
    check_scale_dtype(scale_dtype)
    n, k = w.shape
    groups = k // scheme.group
    codes = np.empty((n, k), dtype=np.uint8)
    scales = np.empty((n, groups), dtype=np.float32)
    mins = None if scheme.symmetric else np.empty((n, groups), dtype=np.float32)
    rows = max(1, CHUNK // k)
    for r0 in range(0, n, rows):
        g = np.asarray(w[r0 : r0 + rows], dtype=np.float32).reshape(-1, groups, scheme.group)
        s, m = group_params(g, scheme.symmetric, scale_dtype, name)
        codes[r0 : r0 + rows] = encode(g, s[:, :, None], None if m is None else m[:, :, None]).reshape(-1, k)
        scales[r0 : r0 + rows] = s
        if mins is not None and m is not None:
            mins[r0 : r0 + rows] = m
    return QuantizedWeight(scheme, codes, scales, mins)


def check_scale_dtype(scale_dtype: str | None) -> None:
    if scale_dtype is not None and scale_dtype not in SCALE_DTYPES:
        raise ValueError(f"scale_dtype {scale_dtype!r}: expected None or one of {', '.join(SCALE_DTYPES)}")


def group_params(
    g: np.ndarray, symmetric: bool, scale_dtype: str | None = None, name: str = "weight"
) -> tuple[np.ndarray, np.ndarray | None]:
    """The scale and (asymmetric) minimum of each group of float32 ``g[..., group]``, each
    ``[...]`` float32 and representable in ``scale_dtype``; the minimum is None when symmetric."""
    if symmetric:
        s = _round(np.abs(g).max(axis=-1) / np.float32(7.5), scale_dtype, up=True)
        m = None
    else:
        m = _round(g.min(axis=-1), scale_dtype, up=False)
        s = _round((g.max(axis=-1) - m) / np.float32(15), scale_dtype, up=True)
    if not (np.isfinite(s).all() and (m is None or np.isfinite(m).all())):
        raise ValueError(f"{name}: non-finite values, or scales beyond the range of {scale_dtype or 'f32'}")
    return s, m


def encode(w: np.ndarray, s: np.ndarray, m: np.ndarray | None) -> np.ndarray:
    """The nearest codes (uint8, 0..15) of ``w`` for scales ``s`` and minimums ``m`` (None:
    symmetric), both broadcast against ``w``; a zero scale gives code 0 (symmetric: 8)."""
    live = s > 0
    safe = np.where(live, s, np.float32(1))
    q = np.rint(w / safe) + np.float32(8) if m is None else np.rint((w - m) / safe)
    q = np.where(live, np.clip(q, 0, 15), np.float32(8 if m is None else 0))
    return q.astype(np.uint8)


def decode(q: np.ndarray, s: np.ndarray, m: np.ndarray | None) -> np.ndarray:
    """The float32 values of codes ``q``, as ``ir.quant.dequantize`` computes them."""
    qf = q.astype(np.float32)
    return qf * s + m if m is not None else (qf - np.float32(8)) * s


def _round(x: np.ndarray, scale_dtype: str | None, up: bool) -> np.ndarray:
    """``x`` (float32) rounded to the nearest value of ``scale_dtype`` on the side ``up`` says."""
    if scale_dtype is None or scale_dtype == "f32":
        return x
    dtype = DType(scale_dtype)
    r = np.asarray(round_to(x, dtype), dtype=np.float32)
    wrong = r < x if up else r > x
    if wrong.any():
        r[wrong] = _step(r[wrong], dtype, up)
    return r


def _step(r: np.ndarray, dtype: DType, up: bool) -> np.ndarray:
    """The neighbour of each (finite, representable) ``r`` in ``dtype``, above it or below it."""
    if dtype is DType.f16:
        toward = np.float16(np.inf if up else -np.inf)
        return np.nextafter(r.astype(np.float16), toward).astype(np.float32)
    # bf16 values are float32 with the low 16 bits clear: step the upper half of the bit pattern.
    bits = r.view(np.uint32).astype(np.int64)
    grows = (r > 0) == up  # away from zero
    bits = np.where(grows, bits + 0x10000, bits - 0x10000)
    out = bits.astype(np.uint32).view(np.float32)
    tiny = np.float32(2.0**-133)  # the smallest bf16 subnormal
    return np.where(r == 0, tiny if up else -tiny, out)
