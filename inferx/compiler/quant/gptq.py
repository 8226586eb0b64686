"""GPTQ: quantize a weight one input column at a time and spread each column's rounding error over
the columns not yet quantized, weighted by the inverse Hessian ``H = 2/T X^T X`` of the layer's
output error (Frantar et al., "GPTQ", Algorithm 1).

As in the paper's implementation: a column whose channel never fired (``H_kk = 0``) is zeroed and
its diagonal set to 1; ``damp`` times the mean diagonal is added to H; the updates use the upper
Cholesky factor of ``H^-1`` and are applied lazily, ``block`` columns at a time (the block is
rounded to a multiple of the group). Columns are taken left to right, and each contiguous group's
scale and minimum come from the updated weights when the group's first column is reached. With
``act_order`` the columns are taken in order of decreasing ``H_kk`` and each group's scale and
minimum are fixed up front from the original weights ("static groups"), so the groups stay the
contiguous ones the contract has. The group rule is round-to-nearest's (``rtn.group_params``).

The factorisation runs in float64 (torch, CPU), the column updates in float32 (numpy).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from inferx.compiler.ir.quant import QuantizedWeight, Scheme
from inferx.compiler.quant.rtn import check_scale_dtype, decode, encode, group_params


def hessian(xs: Iterable[np.ndarray]) -> np.ndarray:
    """``2/T sum X^T X`` (float64 [K, K]) over the T rows of batches ``X[..., K]``."""
    total: np.ndarray | None = None
    rows = 0
    for x in xs:
        x = np.asarray(x, dtype=np.float64)
        x = x.reshape(-1, x.shape[-1])
        total = x.T @ x if total is None else total + x.T @ x
        rows += len(x)
    if total is None or rows == 0:
        raise ValueError("hessian: no calibration rows")
    return 2.0 * total / rows


def quantize_gptq(
    w: np.ndarray,
    h: np.ndarray,
    scheme: Scheme,
    name: str = "weight",
    *,
    damp: float = 0.01,
    act_order: bool = False,
    block: int = 128,
    scale_dtype: str | None = None,
) -> QuantizedWeight:
    """``w[N, K]`` quantized by GPTQ (the module docstring) for the Hessian ``h[K, K]``
    (``hessian``). SchemeError (naming ``name``) unless the group divides K; ValueError when H
    is not [K, K] or stays singular after damping."""
    scheme.check(w.shape, name)
    check_scale_dtype(scale_dtype)
    n, k = w.shape
    g = scheme.group
    h = np.asarray(h)
    if h.shape != (k, k):
        raise ValueError(f"{name}: the Hessian must be [{k}, {k}], got {list(h.shape)}")
    if damp < 0:
        raise ValueError(f"{name}: damp must be >= 0, got {damp}")
    block = max(g, block // g * g)

    work = np.array(w, dtype=np.float32)  # a copy: updated in place
    hh = np.array(h, dtype=np.float64)
    dead = np.diag(hh) == 0
    hh[dead, dead] = 1.0
    work[:, dead] = 0.0

    scales = np.empty((n, k // g), dtype=np.float32)
    mins = None if scheme.symmetric else np.empty((n, k // g), dtype=np.float32)
    if act_order:
        s, m = group_params(work.reshape(n, k // g, g), scheme.symmetric, scale_dtype, name)
        scales[:] = s
        if mins is not None and m is not None:
            mins[:] = m
        order = np.argsort(-np.diag(hh), kind="stable")
        work, hh = np.ascontiguousarray(work[:, order]), hh[np.ix_(order, order)]
    else:
        order = np.arange(k)
    u = _inverse_cholesky(hh, damp, name)

    codes = np.empty((n, k), dtype=np.uint8)  # in processing order
    for b0 in range(0, k, block):
        b1 = min(b0 + block, k)
        w1, u1 = work[:, b0:b1], u[b0:b1, b0:b1]  # views: w1 updates work
        err = np.empty((n, b1 - b0), dtype=np.float32)
        for i in range(b1 - b0):
            col = order[b0 + i]
            if not act_order and col % g == 0:
                s, m = group_params(w1[:, i : i + g], scheme.symmetric, scale_dtype, name)
                scales[:, col // g] = s
                if mins is not None and m is not None:
                    mins[:, col // g] = m
            s = scales[:, col // g]
            m = None if mins is None else mins[:, col // g]
            q = encode(w1[:, i], s, m)
            codes[:, b0 + i] = q
            e = (w1[:, i] - decode(q, s, m)) / u1[i, i]
            w1[:, i:] -= e[:, None] * u1[i, i:][None, :]
            err[:, i] = e
        work[:, b1:] -= err @ u[b0:b1, b1:]

    out = np.empty_like(codes)
    out[:, order] = codes
    return QuantizedWeight(scheme, out, scales, mins)


def _inverse_cholesky(h: np.ndarray, damp: float, name: str) -> np.ndarray:
    """The upper Cholesky factor U of ``(H + damp * mean(diag H) * I)^-1`` (``U^T U``), float32."""
    ht = torch.from_numpy(h)
    ht += damp * torch.diag(ht).mean() * torch.eye(len(ht), dtype=ht.dtype)
    try:
        lower = torch.linalg.cholesky(ht)
        upper = torch.linalg.cholesky(torch.cholesky_inverse(lower), upper=True)
    except torch.linalg.LinAlgError as e:
        raise ValueError(f"{name}: the Hessian is not positive definite after damping ({damp}); raise damp") from e
    return np.ascontiguousarray(upper.to(torch.float32).numpy())


def quantize_gptq_fp8(w: np.ndarray, h: np.ndarray, name: str = "weight", *, damp: float = 0.01,
                      act_order: bool = False, block: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """(codes [N, K] as float32 E4M3 values, scales [N]) of ``w[N, K]`` in FP8 (``ir.fp8``: one
    scale per row, ``max|w| / 448`` of the original row, fixed up front) with GPTQ's column order
    and error updates (the module docstring) over the E4M3 grid instead of an int4 one. A value
    the updates push past the row's range saturates at +-448."""
    from inferx.compiler.interpreter.numerics import round_f8e4m3
    from inferx.compiler.ir.fp8 import FP8_MAX, row_scales

    n, k = w.shape
    h = np.asarray(h)
    if h.shape != (k, k):
        raise ValueError(f"{name}: the Hessian must be [{k}, {k}], got {list(h.shape)}")
    work = np.array(w, dtype=np.float32)
    scales = row_scales(work)
    hh = np.array(h, dtype=np.float64)
    dead = np.diag(hh) == 0
    hh[dead, dead] = 1.0
    work[:, dead] = 0.0
    order = np.argsort(-np.diag(hh), kind="stable") if act_order else np.arange(k)
    work, hh = np.ascontiguousarray(work[:, order]), hh[np.ix_(order, order)]
    u = _inverse_cholesky(hh, damp, name)
    codes = np.empty((n, k), dtype=np.float32)  # in processing order
    for b0 in range(0, k, block):
        b1 = min(b0 + block, k)
        w1, u1 = work[:, b0:b1], u[b0:b1, b0:b1]
        err = np.empty((n, b1 - b0), dtype=np.float32)
        for i in range(b1 - b0):
            q = round_f8e4m3(np.clip(w1[:, i] / scales, -FP8_MAX, FP8_MAX))
            codes[:, b0 + i] = q
            e = (w1[:, i] - q * scales) / u1[i, i]
            w1[:, i:] -= e[:, None] * u1[i, i:][None, :]
            err[:, i] = e
        work[:, b1:] -= err @ u[b0:b1, b1:]
    out = np.empty_like(codes)
    out[:, order] = codes
    return out, scales
