"""FP8 W8A8 linears: the E4M3 numerics that the reference interpreter and the kernels share.

A weight ``W[N, K]`` (HF's [out, in]) is stored as E4M3 values ``codes[N, K]`` with one fp32 scale
per output channel (row), and the activations are quantized per token (row of x) as the kernel
reads them::

    s_w[n] = max|W[n, :]| / 448      codes = e4m3(W / s_w)       (an all-zero row: s_w = 1)
    s_x[m] = max|x[m, :]| / 448      xq    = e4m3(x / s_x)       (an all-zero row: s_x = 1)
    y[m, n] = (sum_k xq[m, k] * codes[n, k]) * s_x[m] * s_w[n]

E4M3 is the "fn" variant (4 exponent bits, 3 fraction bits, no infinity, largest value 448),
rounded to nearest even and saturating (``numerics.round_f8e4m3``, as PyTorch's cast to
``float8_e4m3fn`` after a clamp). Scales and quotients are computed in fp32; each product of two
E4M3 values is exact in fp32 and the products are summed in fp32. Scaling each row by its own
maximum puts that maximum at 448 exactly, so no value saturates.
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


def fp8_matmul(x: np.ndarray, codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """``y = x @ W^T`` with W in E4M3 ``codes`` [N, K] and per-row ``scales`` [N], x quantized per
    token (the module docstring's numerics), in fp32."""
    xq, sx = quantize_rows(x)
    acc = np.matmul(xq, np.asarray(codes, dtype=np.float32).T)
    return (acc * sx[..., None] * np.asarray(scales, dtype=np.float32)).astype(np.float32)


def dequantize(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The float32 weight the codes stand for."""
    return np.asarray(codes, dtype=np.float32) * np.asarray(scales, dtype=np.float32)[:, None]
