"""Activation-aware weight quantization (AWQ): scale the input channels that see large activations
up before round-to-nearest, so their weights lose less, and divide the scale back out per column.

For each ``alpha`` of the grid 0, 1/grid, ..., (grid - 1)/grid the channel scales are
``c = a ** alpha`` (``a``: the mean |x| of each input channel, floored at 1e-4 of its largest
value so a channel that never fired is not scaled to nothing), normalised by
``sqrt(max(c) * min(c))``; ``W * c`` is quantized by round-to-nearest, the effective weight is its
dequantization times ``1 / c``, and the alpha whose effective weight gives the smallest
``output_error`` on the calibration rows wins. Alpha 0 is plain round-to-nearest, so the result
is never worse than it on those rows. A channel that never fired keeps the smallest scale, so its
column carries the largest error (it did not count on the calibration rows). Not done here: AWQ's
clipping search of each group's range, and the loss over a whole block (q, k and v together)
rather than one linear.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from inferx.compiler.ir.quant import QuantizedWeight, Scheme
from inferx.compiler.quant.rtn import check_scale_dtype, quantize_rtn

FLOOR = 1e-4  # the smallest channel activation, relative to the largest, a scale is drawn from


def channel_stats(xs: Iterable[np.ndarray]) -> np.ndarray:
    """The mean |x| of each input channel (float32 [K]) over the rows of batches ``[..., K]``."""
    total: np.ndarray | None = None
    rows = 0
    for x in xs:
        x = np.asarray(x, dtype=np.float32)
        x = x.reshape(-1, x.shape[-1])
        part = np.abs(x).sum(axis=0, dtype=np.float64)
        total = part if total is None else total + part
        rows += len(x)
    if total is None or rows == 0:
        raise ValueError("channel_stats: no calibration rows")
    return (total / rows).astype(np.float32)


def output_error(x: np.ndarray, w: np.ndarray, w_hat: np.ndarray) -> float:
    """``||x w^T - x w_hat^T||^2`` (Frobenius) for inputs ``x[T, K]`` and weights ``[N, K]``."""
    e = np.asarray(x, dtype=np.float32) @ (np.asarray(w, dtype=np.float32) - w_hat).T
    return float(np.square(e, dtype=np.float64).sum())


def quantize_awq(
    w: np.ndarray,
    x: np.ndarray,
    scheme: Scheme,
    name: str = "weight",
    *,
    stats: np.ndarray | None = None,
    grid: int = 20,
    scale_dtype: str | None = None,
) -> QuantizedWeight:
    """``w[N, K]`` quantized with the AWQ search of the module docstring on calibration inputs
    ``x[T, K]``; ``stats`` (the mean |x| per channel, ``channel_stats``) defaults to that of
    ``x``, but statistics over more rows than ``x`` holds are better. The result's ``codes``,
    ``scales`` and ``mins`` quantize ``W * c`` and its ``col_scale`` is ``1 / c``, so
    ``dequantize()`` gives the effective weight; ``col_scale`` is None when alpha 0 wins."""
    scheme.check(w.shape, name)
    check_scale_dtype(scale_dtype)
    k = w.shape[1]
    x = np.asarray(x, dtype=np.float32).reshape(-1, x.shape[-1])
    if x.shape[1] != k or len(x) == 0:
        raise ValueError(f"{name}: calibration inputs must be [T > 0, {k}], got {list(x.shape)}")
    a = channel_stats([x]) if stats is None else np.asarray(stats, dtype=np.float32)
    if a.shape != (k,) or not np.isfinite(a).all() or (a < 0).any():
        raise ValueError(f"{name}: activation statistics must be [{k}], finite and non-negative")
    if grid < 1:
        raise ValueError(f"{name}: the AWQ grid needs at least one point, got {grid}")
    w = np.asarray(w, dtype=np.float32)
    a = np.maximum(a, FLOOR * a.max()) if a.max() > 0 else np.ones_like(a)

    best = quantize_rtn(w, scheme, name, scale_dtype)  # alpha 0
    best_err = output_error(x, w, best.dequantize())
    for alpha in np.arange(1, grid) / grid:
        c = a ** np.float32(alpha)
        c = (c / np.sqrt(c.max() * c.min())).astype(np.float32)
        qw = quantize_rtn(w * c[None, :], scheme, name, scale_dtype)
        qw.col_scale = (np.float32(1) / c).astype(np.float32)
        err = output_error(x, w, qw.dequantize())
        if err < best_err:
            best, best_err = qw, err
    return best
