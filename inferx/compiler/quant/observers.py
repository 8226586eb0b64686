"""Observers: the ranges of the linears' inputs over calibration text, and the static FP8
activation scales chosen from them.

``observe`` runs the float program's prefill on the reference interpreter over token windows
and records, for each input that linears read (q, k and v share one; gate and up another),
named by the first of its linears' weights: the largest magnitude of each input channel (what
SmoothQuant migrates, ``smooth``) and a histogram of every element's magnitude. The histogram's
bins are spaced evenly in log2 (``BINS_PER_OCTAVE`` an octave, from 2^LOW to 2^HIGH; zeros
counted apart), so one fixed histogram serves any range with the same relative resolution.

A static scale ``s`` quantizes an input as ``e4m3(clamp(x / s, +-448))`` (``ir.fp8``); the
observers choose the range ``T = 448 s`` values saturate at:

    minmax       the largest magnitude seen
    percentile   the magnitude that ``percentile`` % of the elements lie at or below
    entropy      the T minimising the KL divergence from the histogram of magnitudes (the tail
                 past T counted at T) to the same after E4M3 quantization at ``T / 448`` (each
                 E4M3 value's mass spread evenly over the bins that round to it), over the bin
                 edges from the 99th percentile up: calibration by entropy, for FP8's grid
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.ir import Operation, SSAValue

from inferx.compiler.interpreter.context import KernelContext
from inferx.compiler.interpreter.kernels import linear
from inferx.compiler.interpreter.numerics import round_f8e4m3
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.fp8 import FP8_MAX
from inferx.compiler.quant.calibrate import prefill_windows, weight_name
from inferx.program import Program

OBSERVERS = ("minmax", "percentile", "entropy")
LOW, HIGH, BINS_PER_OCTAVE = -24, 24, 64
EDGES = np.exp2(np.arange(LOW * BINS_PER_OCTAVE, HIGH * BINS_PER_OCTAVE + 1) / BINS_PER_OCTAVE)


@dataclass
class InputRange:
    """What the calibration text made of one linear input."""

    k: int
    channel_max: np.ndarray = field(init=False)  # float32 [K], max |x| of each channel
    counts: np.ndarray = field(init=False)  # int64 [bins], elements per magnitude bin
    zeros: int = 0
    absmax: float = 0.0

    def __post_init__(self) -> None:
        self.channel_max = np.zeros(self.k, dtype=np.float32)
        self.counts = np.zeros(len(EDGES) - 1, dtype=np.int64)

    def add(self, x: np.ndarray) -> None:
        a = np.abs(np.asarray(x, dtype=np.float32).reshape(-1, self.k))
        self.channel_max = np.maximum(self.channel_max, a.max(axis=0))
        self.absmax = max(self.absmax, float(a.max()))
        flat = a.reshape(-1)
        live = flat[flat > 0]
        self.zeros += flat.size - live.size
        idx = np.clip(np.floor(np.log2(live) * BINS_PER_OCTAVE).astype(np.int64) - LOW * BINS_PER_OCTAVE, 0,
                      len(self.counts) - 1)
        self.counts += np.bincount(idx, minlength=len(self.counts))

    def percentile(self, p: float) -> float:
        """The upper edge of the bin where ``p`` % of the elements (zeros first) are reached,
        at most the largest magnitude."""
        total = self.zeros + int(self.counts.sum())
        need = p / 100 * total - self.zeros
        if need <= 0:
            return self.absmax
        i = int(np.searchsorted(np.cumsum(self.counts), need))
        return float(min(EDGES[min(i + 1, len(EDGES) - 1)], self.absmax))

    def entropy(self) -> float:
        """The range of least KL divergence after E4M3 quantization (module docstring)."""
        live = np.nonzero(self.counts)[0]
        if live.size == 0:
            return self.absmax
        centers = np.sqrt(EDGES[:-1] * EDGES[1:])
        start = int(np.searchsorted(EDGES, self.percentile(99.0)))
        best, best_t = np.inf, self.absmax
        for end in range(max(start, live[0] + 1), live[-1] + 2):
            t = float(EDGES[end])
            p = self.counts[: end].astype(np.float64)
            p[end - 1] += self.counts[end:].sum()
            q_vals = round_f8e4m3(np.minimum(centers[: end] / (t / FP8_MAX), FP8_MAX))
            q = np.zeros_like(p)
            for v in np.unique(q_vals[p > 0]):
                cell = (q_vals == v) & (p > 0)
                q[cell] = p[cell].sum() / cell.sum()
            nz = p > 0
            pn, qn = p[nz] / p.sum(), q[nz] / q.sum()
            kl = float((pn * np.log(pn / qn)).sum())
            if kl < best:
                best, best_t = kl, t
        return min(best_t, self.absmax)

    def range(self, observer: str, percentile: float = 99.99) -> float:
        if observer == "minmax":
            return self.absmax
        if observer == "percentile":
            return self.percentile(percentile)
        if observer == "entropy":
            return self.entropy()
        raise ValueError(f"unknown observer {observer!r}: the observers are {', '.join(OBSERVERS)}")


def observe(program: Program, windows: Sequence[Sequence[int]]) -> dict[str, InputRange]:
    """{weight of a linear: the ranges of its input} over ``windows`` of token ids, each one
    prefill of the float ``program`` from an empty cache; the linears of one input share one
    record."""
    names: dict[SSAValue, list[str]] = {}
    for op in program.module.walk():
        if isinstance(op, nn.LinearOp) and (name := weight_name(op)) is not None:
            names.setdefault(op.input, []).append(name)
    out: dict[str, InputRange] = {}
    seen: set[SSAValue] = set()

    def recording(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
        assert isinstance(op, nn.LinearOp)
        group = names.get(op.input)
        if group and op.input not in seen:
            seen.add(op.input)
            record = next((out[n] for n in group if n in out), None) or InputRange(int(ins[0].shape[-1]))
            record.add(ins[0])
            out.update(dict.fromkeys(group, record))
        return linear(op, ins, ctx)

    prefill_windows(program, windows, recording, seen.clear)
    return out


def static_scales(ranges: dict[str, InputRange], observer: str, percentile: float = 99.99) -> dict[str, float]:
    """{weight of a linear: the static scale ``T / 448`` of its input} (an input never nonzero:
    1); one choice per input, shared by the linears that read it."""
    chosen: dict[int, float] = {}
    out = {}
    for name, r in ranges.items():
        if id(r) not in chosen:
            t = r.range(observer, percentile)
            chosen[id(r)] = float(np.float32(t / FP8_MAX)) if t > 0 else 1.0
        out[name] = chosen[id(r)]
    return out
