"""Calibration: what the linears of a float program see on calibration text, for the quantizers
that use activations (AWQ, GPTQ).

``capture`` runs the program's prefill on the reference interpreter over token windows and, for
every ``ix.linear`` whose weight is an ``ix.weight``, accumulates statistics of its input rows:
``x^T x`` (GPTQ's Hessian, up to a factor), the mean absolute value of each input channel (AWQ's
activation scale) and a fixed-size sample of rows (the loss AWQ's search minimises). Linears that
read the same input (q, k and v; gate and up) share one record. The statistics are those of the
float model: every linear is calibrated on float inputs, not on the outputs of already
quantized layers (``sequential`` calibrates on those).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue

from inferx.compiler.interpreter.context import KernelContext
from inferx.compiler.interpreter.kernels import KERNELS, linear
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.program import Program

SAMPLE_ROWS = 512  # input rows kept per record


@dataclass
class InputStats:
    """The statistics of one linear input over the calibration text."""

    k: int
    rows: int = 0
    xtx: np.ndarray = field(init=False)  # float64 [K, K], the sum of x^T x
    abs_sum: np.ndarray = field(init=False)  # float64 [K], the sum of |x|
    sample: np.ndarray = field(init=False)  # float32 [<= SAMPLE_ROWS, K]

    def __post_init__(self) -> None:
        self.xtx = np.zeros((self.k, self.k))
        self.abs_sum = np.zeros(self.k)
        self.sample = np.zeros((0, self.k), dtype=np.float32)

    def add(self, x: np.ndarray, rng: np.random.Generator) -> None:
        x = np.asarray(x, dtype=np.float32).reshape(-1, self.k)
        self.xtx += x.T.astype(np.float64) @ x.astype(np.float64)
        self.abs_sum += np.abs(x).sum(axis=0)
        self.rows += len(x)
        keep = np.concatenate([self.sample, x])
        if len(keep) > SAMPLE_ROWS:  # a uniform sample of every row seen so far
            keep = keep[np.sort(rng.choice(len(keep), SAMPLE_ROWS, replace=False))]
        self.sample = keep

    @property
    def hessian(self) -> np.ndarray:
        """``2/n x^T x``, GPTQ's H for the squared error of the layer's output."""
        return 2.0 * self.xtx / max(self.rows, 1)

    @property
    def mean_abs(self) -> np.ndarray:
        return (self.abs_sum / max(self.rows, 1)).astype(np.float32)


def weight_name(op: nn.LinearOp) -> str | None:
    """The name of the ``ix.weight`` a linear reads; None when its weight is computed."""
    w = op.weight.owner
    return w.attributes["name"].data if isinstance(w, t.WeightOp) else None  # type: ignore[attr-defined]


def prefill_windows(program: Program, windows: Sequence[Sequence[int]], linear_kernel: Any,
                    each_window: Any = None, kernels: Mapping[type, Any] | None = None) -> None:
    """Runs the float ``program``'s prefill on each of ``windows`` (token ids) from an empty cache
    on the reference interpreter, its ``ix.linear`` computed by ``linear_kernel`` (an interpreter
    kernel that records its inputs and returns ``kernels.linear``'s result) and other ops by
    ``kernels`` ({op class: interpreter kernel}); ``each_window()`` before each."""
    session = program.reference_session(max_batch=1, max_context=max(len(w) for w in windows))
    session.interpreter.kernels = {**KERNELS, nn.LinearOp: linear_kernel, **(kernels or {})}
    for ids in windows:
        if each_window is not None:
            each_window()
        session.reset()
        session.prefill(np.asarray(ids, dtype=np.int64)[None])


def capture(program: Program, windows: Sequence[Sequence[int]], *, seed: int = 0) -> dict[str, InputStats]:
    """{weight name: the statistics of its linear's input} over ``windows`` of token ids, each run
    as one prefill from an empty cache."""
    rng = np.random.default_rng(seed)
    by_input: dict[SSAValue, InputStats] = {}
    inputs: dict[str, list[SSAValue]] = {}  # a weight read in several funcs (prefill, decode)
    for op in program.module.walk():
        if isinstance(op, nn.LinearOp) and (name := weight_name(op)) is not None:
            inputs.setdefault(name, []).append(op.input)
    added: set[SSAValue] = set()  # inputs recorded in this window (q, k and v read one)

    def recording(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
        assert isinstance(op, nn.LinearOp)
        if weight_name(op) is not None and op.input not in added:
            added.add(op.input)
            stats = by_input.get(op.input)
            if stats is None:
                stats = by_input[op.input] = InputStats(int(ins[0].shape[-1]))
            stats.add(ins[0], rng)
        return linear(op, ins, ctx)

    prefill_windows(program, windows, recording, added.clear)
    out: dict[str, InputStats] = {}
    for name, values in inputs.items():
        found = [by_input[v] for v in values if v in by_input]
        if found:
            out[name] = found[0]
    return out
