"""SmoothQuant-style migration: per input channel, part of an activation's range moved into the
weights that read it, so that the activations a linear quantizes have fewer outlier channels.

For an input x read by linears of weights ``W_j [N_j, K]`` and a channel factor ``s[K]``,
``x W_j^T = (x / s) (W_j * s)^T``. The division is folded into what produces x, so the model
computes the same function in exact arithmetic:

- x the output of an RMSNorm (q|k|v, gate|up): its weight ``g / s``;
- x the gated product ``act(gate) * up`` (the down projection): the up projection's rows ``/ s``.

``s_k = max|x_k|^alpha / max_j max_n |W_j[n, k]|^(1 - alpha)`` from the calibration ranges
(``observers.observe``), 1 where either maximum is 0; ``alpha`` (0..1) says how much of the range
moves. Other inputs (the o projection's) are left as they are, and so is an input one of whose
readers is an embedding table (a tied LM head: the table's lookups would change too).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.quant.calibrate import weight_name
from inferx.compiler.quant.observers import InputRange
from inferx.passes.quantize import embedding_tables, is_kn
from inferx.program import Program


class Overlay(Mapping[str, np.ndarray]):
    """``base``'s weights with some replaced by ``changed``."""

    def __init__(self, base: Mapping[str, np.ndarray], changed: Mapping[str, np.ndarray]):
        self.base, self.changed = base, dict(changed)

    def __getitem__(self, key: str) -> np.ndarray:
        return self.changed[key] if key in self.changed else self.base[key]

    def __contains__(self, key: object) -> bool:
        return key in self.changed or key in self.base

    def __iter__(self) -> Iterator[str]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)


def _weight(v: object) -> str | None:
    owner = getattr(v, "owner", None)
    return owner.attributes["name"].data if isinstance(owner, t.WeightOp) else None  # type: ignore[attr-defined]


def smooth(program: Program, ranges: Mapping[str, InputRange], alpha: float) -> dict[str, np.ndarray]:
    """Migrates ``alpha`` of each smoothable input's range into its weights (module docstring):
    ``program``'s store becomes an ``Overlay`` of the changed weights (in place). Returns
    {linear weight: s} of the inputs it smoothed."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"smoothquant alpha must be in [0, 1], got {alpha}")
    tables = embedding_tables(program.module)
    readers: dict[object, list[nn.LinearOp]] = {}
    for op in program.module.walk():
        if isinstance(op, nn.LinearOp) and weight_name(op) is not None and not is_kn(op):
            readers.setdefault(op.input, []).append(op)
    changed: dict[str, np.ndarray] = {}
    factors: dict[str, np.ndarray] = {}
    done: set[str] = set()  # producers already divided (the entry points repeat the layers)
    for x, lins in readers.items():
        names = [n for lin in lins if (n := weight_name(lin)) is not None]
        producer = getattr(x, "owner", None)
        target = _fold_target(producer)
        if target is None or names[0] in factors or names[0] not in ranges or tables & set(names):
            continue
        kind, what = target
        if what in done:
            factors.update(dict.fromkeys(names, factors.get(names[0], np.ones(1))))
            continue
        xmax = ranges[names[0]].channel_max.astype(np.float64)
        current = lambda n: changed[n] if n in changed else np.asarray(program.weights[n])  # type: ignore[index]  # noqa: E731
        ws = [current(n).astype(np.float32) for n in names]
        wmax = np.max([np.abs(w).max(axis=0) for w in ws], axis=0).astype(np.float64)
        live = (xmax > 0) & (wmax > 0)
        s = np.ones_like(xmax)
        s[live] = xmax[live] ** alpha / wmax[live] ** (1 - alpha)
        s = s.astype(np.float32)
        for n, w in zip(names, ws, strict=True):
            changed[n] = (w * s[None, :]).astype(np.asarray(program.weights[n]).dtype)  # type: ignore[index]
        base = current(what)
        div = s if kind == "norm" else s[:, None]  # the norm's weight [K]; the up projection's rows [K, hidden]
        changed[what] = (base.astype(np.float32) / div).astype(base.dtype)
        done.add(what)
        factors.update(dict.fromkeys(names, s))
    program.weights = Overlay(program.weights, changed)
    return factors


def _fold_target(producer: object) -> tuple[str, str] | None:
    """("norm", its weight) for an RMSNorm's output with a stored weight; ("up", the up
    projection's weight) for ``act(gate) * up``; else None."""
    if isinstance(producer, nn.RMSNormOp):
        w = _weight(producer.weight)
        return ("norm", w) if w is not None else None
    if isinstance(producer, t.MulOp):
        for v in producer.operands:
            lin = getattr(v, "owner", None)
            if isinstance(lin, nn.LinearOp) and not is_kn(lin) and lin.bias is None and (w := weight_name(lin)):
                other = next(o for o in producer.operands if o is not v)
                if not isinstance(getattr(other, "owner", None), nn.LinearOp):  # act(gate), not a linear
                    return ("up", w)
    return None
