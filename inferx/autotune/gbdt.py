"""Gradient-boosted regression trees in numpy: squared loss, histogram splits, row subsampling.

Small and deterministic (a seed fixes the subsamples): the learned cost model fits a few hundred
to a few thousand records, so exactness of splits matters less than having no dependency. Each
feature is cut into at most ``max_bins`` quantile bins once per fit; a node's best split is found
from per-bin gradient sums (``np.bincount``), as histogram GBDTs do. A fitted ensemble is plain
lists (``to_json``/``from_json``), so saving never pickles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class _Tree:
    """Nodes in arrays: an internal node splits on ``feature <= threshold`` (left) or goes right;
    a leaf (``feature == -1``) holds ``value``."""

    feature: list[int] = field(default_factory=list)
    threshold: list[float] = field(default_factory=list)
    left: list[int] = field(default_factory=list)
    right: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)

    def add(self, feature: int = -1, threshold: float = 0.0, value: float = 0.0) -> int:
        self.feature.append(feature)
        self.threshold.append(threshold)
        self.left.append(-1)
        self.right.append(-1)
        self.value.append(value)
        return len(self.feature) - 1

    def predict(self, x: np.ndarray) -> np.ndarray:
        feature, thr = np.array(self.feature), np.array(self.threshold)
        left, right, value = np.array(self.left), np.array(self.right), np.array(self.value)
        node = np.zeros(len(x), dtype=np.int64)
        for _ in range(64):  # depth bound
            f = feature[node]
            inner = f >= 0
            if not inner.any():
                break
            go_left = x[np.arange(len(x)), np.maximum(f, 0)] <= thr[node]
            node = np.where(inner, np.where(go_left, left[node], right[node]), node)
        return value[node]


@dataclass
class GBDT:
    """A boosted ensemble of regression trees on squared loss. ``fit`` replaces any previous fit."""

    n_trees: int = 120
    max_depth: int = 4
    learning_rate: float = 0.1
    min_leaf: int = 3
    subsample: float = 0.8
    max_bins: int = 32
    l2: float = 1.0
    seed: int = 0
    base: float = 0.0
    trees: list[_Tree] = field(default_factory=list)

    def fit(self, x: np.ndarray, y: np.ndarray) -> GBDT:
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if x.ndim != 2 or len(x) != len(y) or len(y) == 0:
            raise ValueError(f"fit needs x [n, features] and y [n] with n > 0, got {x.shape} and {y.shape}")
        rng = np.random.default_rng(self.seed)
        edges = [_bin_edges(x[:, j], self.max_bins) for j in range(x.shape[1])]
        bins = np.stack([np.searchsorted(e, x[:, j], side="left") for j, e in enumerate(edges)], axis=1)
        self.base = float(y.mean())
        self.trees = []
        pred = np.full(len(y), self.base)
        for _ in range(self.n_trees):
            grad = y - pred  # the negative gradient of squared loss
            n_sub = max(2 * self.min_leaf, int(round(self.subsample * len(y))))
            rows = np.sort(rng.choice(len(y), size=min(len(y), n_sub), replace=False))
            tree = _Tree()
            self._grow(tree, bins, edges, grad, rows, 0)
            self.trees.append(tree)
            pred += self.learning_rate * tree.predict(x)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        out = np.full(len(x), self.base)
        for tree in self.trees:
            out += self.learning_rate * tree.predict(x)
        return out

    def _grow(self, tree: _Tree, bins: np.ndarray, edges: list[np.ndarray], grad: np.ndarray,
              rows: np.ndarray, depth: int) -> int:
        g = grad[rows]
        node = tree.add(value=float(g.sum() / (len(g) + self.l2)))
        if depth >= self.max_depth or len(rows) < 2 * self.min_leaf:
            return node
        best = (0.0, -1, -1)  # (gain, feature, bin)
        total, count = g.sum(), len(g)
        parent = total * total / (count + self.l2)
        for j in range(bins.shape[1]):
            nb = len(edges[j]) + 1
            if nb < 2:
                continue
            b = bins[rows, j]
            gs = np.cumsum(np.bincount(b, weights=g, minlength=nb))[:-1]
            cs = np.cumsum(np.bincount(b, minlength=nb))[:-1]
            ok = (cs >= self.min_leaf) & (count - cs >= self.min_leaf)
            if not ok.any():
                continue
            gain = gs**2 / (cs + self.l2) + (total - gs) ** 2 / (count - cs + self.l2) - parent
            gain = np.where(ok, gain, -np.inf)
            k = int(np.argmax(gain))
            if gain[k] > best[0] + 1e-12:
                best = (float(gain[k]), j, k)
        if best[1] < 0:
            return node
        _, j, k = best
        tree.feature[node], tree.threshold[node] = j, float(edges[j][k])
        mask = bins[rows, j] <= k
        tree.left[node] = self._grow(tree, bins, edges, grad, rows[mask], depth + 1)
        tree.right[node] = self._grow(tree, bins, edges, grad, rows[~mask], depth + 1)
        return node

    def to_json(self) -> dict[str, Any]:
        params = {k: getattr(self, k) for k in ("n_trees", "max_depth", "learning_rate", "min_leaf", "subsample",
                                                "max_bins", "l2", "seed", "base")}
        return {**params, "trees": [vars(t) for t in self.trees]}

    @staticmethod
    def from_json(d: dict[str, Any]) -> GBDT:
        trees = [_Tree(**t) for t in d["trees"]]
        return GBDT(**{k: v for k, v in d.items() if k != "trees"}, trees=trees)


def _bin_edges(col: np.ndarray, max_bins: int) -> np.ndarray:
    """Split points between distinct values (all of them when few, else quantile midpoints):
    bin i holds values <= edges[i]."""
    values = np.unique(col)
    if len(values) <= max_bins:
        return (values[:-1] + values[1:]) / 2
    qs = np.unique(np.quantile(col, np.linspace(0, 1, max_bins + 1)[1:-1]))
    return qs


def spearman(a: np.ndarray | list[float], b: np.ndarray | list[float]) -> float:
    """Spearman's rank correlation (ties take their average rank); 0.0 when either side is
    constant."""
    ra, rb = _ranks(np.asarray(a, dtype=np.float64)), _ranks(np.asarray(b, dtype=np.float64))
    if len(ra) != len(rb):
        raise ValueError(f"spearman needs equal lengths, got {len(ra)} and {len(rb)}")
    da, db = ra - ra.mean(), rb - rb.mean()
    denom = float(np.sqrt((da * da).sum() * (db * db).sum()))
    return float((da * db).sum() / denom) if denom > 0 else 0.0


def _ranks(v: np.ndarray) -> np.ndarray:
    order = np.argsort(v, kind="mergesort")
    ranks = np.empty(len(v))
    ranks[order] = np.arange(len(v), dtype=np.float64)
    _, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]
