"""FP8 W8A8 linears: the E4M3 numerics that the reference interpreter and the kernels share.

A weight ``W[N, K]`` (HF's [out, in]) is stored as E4M3 values ``codes[N, K]`` with one fp32 scale
per output channel (row), and the activations are quantized per token (row of x) as the kernel
reads them::

    s_w[n] = max|W[n, :]| / 448      codes = e4m3(W / s_w)       (an all-zero row: s_w = 1)
    s_x[m] = max|x[m, :]| / 448      xq    = e4m3(x / s_x)       (an all-zero row: s_x = 1)
    y[m, n] = (sum_k xq[m, k] * codes[n, k]) * s_x[m] * s_w[n]

E4M3 is the "fn" variant (4 exponent bits, 3 fraction bits, no infinity, largest value 448),
rounded to nearest even and saturating (``numerics.round_f8e4m3``, as PyTorch's cast to
``float8_e4m3fn`` after a clamp). A static activation scale (``x_scale``, from calibration)
replaces the per-token ones: ``xq = e4m3(clamp(x / x_scale, +-448))``, and values past the
calibrated range saturate. Scales and quotients are computed in fp32; each product of two
E4M3 values is exact in fp32 and the products are summed in fp32. Scaling each row by its own
maximum puts that maximum at 448 exactly, so no value saturates.

KV cache. An FP8 cache holds keys (after RoPE) and values as E4M3 values with one static fp32
scale per KV head and layer, from calibration (``kv_scales``)::

    cache[b, h, t, :] = e4m3(clamp(new[b, h, s, :] / scale[h], +-448))      (``kv_quantize``)
    keys = cache_k * k_scale[h]      values = cache_v * v_scale[h]

so attention's logits are ``(q . cache_k) * k_scale[h] * softmax scale`` and its output
``(p . cache_v) * v_scale[h]``: the kernels apply both scales outside their dot products.
"""

from __future__ import annotations

import numpy as np

from inferx.compiler.interpreter.numerics import round_f8e4m3

FP8_MAX = 448.0


def row_scales(a: np.ndarray) -> np.ndarray:
    """max|a| / 448 over the last axis, in fp32; 1 for a row of zeros (it quantizes to zeros)."""
    amax = np.abs(np.asarray(a, dtype=np.float32)).max(axis=-1)
    return np.where(amax > 0, amax / np.float32(FP8_MAX), np.float32(1)).astype(np.float32)


def quantize_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(E4M3 values of ``a / s`` as float32, ``s``): each row of ``a`` [..., K] by its own scale
    ``s`` [...] (``row_scales``)."""
    a32 = np.asarray(a, dtype=np.float32)
    s = row_scales(a32)
    return round_f8e4m3(a32 / s[..., None]), s


def quantize_weight(w: np.ndarray, name: str = "weight") -> tuple[np.ndarray, np.ndarray]:
    """(codes [N, K] as float32 E4M3 values, scales [N] fp32) of ``w[N, K]``; ValueError naming
    ``name`` for a tensor that is not a finite matrix."""
    w32 = np.asarray(w, dtype=np.float32)
    if w32.ndim != 2:
        raise ValueError(f"{name}: fp8 quantizes matrices [N, K], not a tensor of shape {list(w32.shape)}")
    if not np.isfinite(w32).all():
        raise ValueError(f"{name}: non-finite values cannot be quantized to fp8")
    return quantize_rows(w32)


def quantize_static(a: np.ndarray, scale: float) -> np.ndarray:
    """E4M3 values of ``a / scale`` (fp32), clamped to +-448 first: a static scale from
    calibration, which values past its range saturate at."""
    q = np.asarray(a, dtype=np.float32) / np.float32(scale)
    return round_f8e4m3(np.clip(q, -FP8_MAX, FP8_MAX))


def fp8_matmul(x: np.ndarray, codes: np.ndarray, scales: np.ndarray, x_scale: float | None = None) -> np.ndarray:
    """``y = x @ W^T`` with W in E4M3 ``codes`` [N, K] and per-row ``scales`` [N], x quantized per
    token (the module docstring's numerics) or, with ``x_scale``, every token by that static
    scale (``quantize_static``), in fp32."""
    if x_scale is None:
        xq, sx = quantize_rows(x)
    else:
        xq = quantize_static(x, x_scale)
        sx = np.full(np.shape(x)[:-1], x_scale, dtype=np.float32)
    acc = np.matmul(xq, np.asarray(codes, dtype=np.float32).T)
    return (acc * sx[..., None] * np.asarray(scales, dtype=np.float32)).astype(np.float32)


def dequantize(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The float32 weight the codes stand for."""
    return np.asarray(codes, dtype=np.float32) * np.asarray(scales, dtype=np.float32)[:, None]


def encode_e4m3(values: np.ndarray) -> np.ndarray:
    """The E4M3 bytes (sign, 4 exponent bits biased by 7, 3 fraction bits) of float32 ``values``
    that are E4M3 values (``round_f8e4m3``'s results): the layout PyTorch's ``float8_e4m3fn``
    stores and FP8 wgmma reads. Exact; ValueError for a value that is not one."""
    v = np.asarray(values, dtype=np.float32)
    a = np.abs(v)
    bits = a.view(np.uint32)
    sub = a < np.float32(2.0**-6)
    exp = np.where(sub, 0, (bits >> 23).astype(np.int64) - 120)
    frac = np.where(sub, np.rint(a * 512.0).astype(np.int64), (bits >> 20).astype(np.int64) & 7)
    out = ((v < 0) | (np.signbit(v) & (a == 0))).astype(np.uint8) << 7 | (exp << 3 | frac).astype(np.uint8)
    if not (np.isfinite(v).all() and (exp <= 15).all() and (exp >= 0).all()
            and np.array_equal(decode_e4m3(out), v, equal_nan=False)):
        raise ValueError("values that are not E4M3 values cannot be stored as E4M3 bytes")
    return out.astype(np.uint8)


def decode_e4m3(codes: np.ndarray) -> np.ndarray:
    """The float32 values of E4M3 bytes (``encode_e4m3``'s inverse; 0x7F and 0xFF, NaN, read as
    NaN)."""
    b = np.asarray(codes, dtype=np.uint8).astype(np.int64)
    exp, frac = (b >> 3) & 15, b & 7
    mag = np.where(exp == 0, frac / 512.0, (1.0 + frac / 8.0) * np.exp2(exp - 7.0))
    mag = np.where((exp == 15) & (frac == 7), np.nan, mag)
    return np.where(b & 128, -mag, mag).astype(np.float32)


def kv_quantize(new: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """E4M3 values (float32) of ``new[b, h, s, d] / scale[h]``, clamped to +-448 first."""
    q = np.asarray(new, dtype=np.float32) / np.asarray(scale, dtype=np.float32)[None, :, None, None]
    return round_f8e4m3(np.clip(q, -FP8_MAX, FP8_MAX))


def kv_dequantize(cache: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The float32 keys or values an FP8 cache [b, h, t, d] stands for."""
    return np.asarray(cache, dtype=np.float32) * np.asarray(scale, dtype=np.float32)[None, :, None, None]


def kv_scales(amax: np.ndarray, margin: float = 1.0) -> np.ndarray:
    """Per-head scales [h] (fp32) that put ``amax * margin`` (the calibration text's largest
    magnitude per head) at 448; 1 for a head that never held anything but zeros."""
    a = np.asarray(amax, dtype=np.float64) * margin
    return np.where(a > 0, a / FP8_MAX, 1.0).astype(np.float32)
