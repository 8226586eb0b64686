"""Cost models: predicted time (ms, lower is better) of schedules of a task.

Every model answers ``update(records)`` (learn from measurements), ``predict(task, schedules)``
(one time per schedule, in order), ``save(path)`` and ``load(path)``. Two implement it:

- ``RooflineModel``, the trivial one: an analytical Hopper model that needs no data. Each family
  has its own (``roofline_ms`` in ``inferx.compiler.families.<family>.cost``): DRAM bytes at the
  bandwidth the bytes in flight sustain (Little's law), FLOPs at the peak the tile reaches,
  waves over the SMs, a serial loop per program, a launch. ``update`` learns nothing.
- ``LearnedModel``, the clever one: gradient-boosted trees (``gbdt.py``) on log(time) over
  features of (task, schedule), the roofline's own estimate among them. Until it has seen
  ``min_records`` finite measurements of a template it answers with the roofline. Each template
  has its own features (its family's ``feature_names`` and ``features``) and its own trees.

``bound_ms``, ``roofline_ms`` and ``features_of`` reach the task's family through the registry.
Records with an infinite time (failed candidates) teach nothing about speed and are skipped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from inferx.autotune.gbdt import GBDT
from inferx.compiler.database import Record
from inferx.compiler.families import family, tunable
from inferx.compiler.families.common.hardware import H200, Hopper
from inferx.compiler.families.common.space import schedule_key
from inferx.compiler.families.interface import AnyTask


class CostModel(Protocol):
    def update(self, records: Sequence[Record]) -> None: ...

    def predict(self, task: AnyTask, schedules: Sequence[Mapping[str, int]]) -> np.ndarray: ...

    def save(self, path: Path | str) -> None: ...


# --- the roofline ------------------------------------------------------------------------------


def bound_ms(task: AnyTask, hw: Hopper = H200) -> float:
    """The task's roofline: the larger of its unavoidable bytes at DRAM speed and its FLOPs at the
    peak its kernels can reach. What a schedule's "fraction of roofline" is measured against."""
    return family(task.template).bound_ms(task, hw)


def roofline_ms(task: AnyTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
    """The analytical time of one launch of ``task`` under schedule ``s`` (its family's model)."""
    return family(task.template).roofline_ms(task, s, hw)


@dataclass
class RooflineModel:
    """The analytical model; needs no records and keeps none."""

    hw: Hopper = H200

    def update(self, records: Sequence[Record]) -> None:
        return None

    def predict(self, task: AnyTask, schedules: Sequence[Mapping[str, int]]) -> np.ndarray:
        return np.array([roofline_ms(task, s, self.hw) for s in schedules], dtype=np.float64)

    def save(self, path: Path | str) -> None:
        Path(path).write_text(json.dumps({"model": "roofline", "hw": vars(self.hw)}, indent=1))

    @staticmethod
    def load(path: Path | str) -> RooflineModel:
        d = json.loads(Path(path).read_text())
        if d.get("model") != "roofline":
            raise ValueError(f"{path}: not a roofline model")
        return RooflineModel(Hopper(**d["hw"]))


# --- the learned model -------------------------------------------------------------------------


def features_of(task: AnyTask, s: Mapping[str, int], hw: Hopper = H200) -> list[float]:
    """The learned model's inputs for one (task, schedule): its family's features, named by its
    ``feature_names``."""
    return family(task.template).features(task, s, hw)


FEATURES_BY_TEMPLATE = {f.name: f.feature_names for f in tunable()}


@dataclass
class LearnedModel:
    """Boosted trees on log(ms), one ensemble per template; a template's roofline until
    ``min_records`` finite records of it are known. ``update`` adds records to those already
    seen (a repeated (task, schedule) keeps its latest time) and refits the templates they touch
    from scratch, so a fit depends only on the records and the seed."""

    hw: Hopper = H200
    seed: int = 0
    min_records: int = 16
    n_trees: int = 80
    max_depth: int = 4
    gbdts: dict[str, GBDT] = field(default_factory=dict)
    _seen: dict[tuple[str, str], tuple[AnyTask, dict[str, int], float]] = field(default_factory=dict, repr=False)


    def update(self, records: Sequence[Record]) -> None:
        touched = set()
        for r in records:
            if math.isfinite(r.median_ms) and r.median_ms > 0 and r.task.template in FEATURES_BY_TEMPLATE:
                key = (r.task.key, json.dumps(r.schedule, sort_keys=True))
                self._seen[key] = (r.task, dict(r.schedule), r.median_ms)
                touched.add(r.task.template)
        for template in sorted(touched):
            rows = [v for v in self._seen.values() if v[0].template == template]
            if len(rows) < self.min_records:
                continue
            x = np.array([features_of(t, s, self.hw) for t, s, _ in rows])
            y = np.log(np.array([ms for _, _, ms in rows]))
            self.gbdts[template] = GBDT(n_trees=self.n_trees, max_depth=self.max_depth, seed=self.seed,
                                        min_leaf=2).fit(x, y)

    def predict(self, task: AnyTask, schedules: Sequence[Mapping[str, int]]) -> np.ndarray:
        if not schedules:
            return np.zeros(0)
        trees = self.gbdts.get(task.template)
        if trees is None:
            return RooflineModel(self.hw).predict(task, schedules)
        x = np.array([features_of(task, s, self.hw) for s in schedules])
        return np.exp(trees.predict(x))

    def save(self, path: Path | str) -> None:
        d = {"model": "gbdt", "hw": vars(self.hw), "seed": self.seed, "min_records": self.min_records,
             "n_trees": self.n_trees, "max_depth": self.max_depth,
             "features": {t: list(f) for t, f in FEATURES_BY_TEMPLATE.items()},
             "gbdts": {t: g.to_json() for t, g in sorted(self.gbdts.items())}}
        Path(path).write_text(json.dumps(d))

    @staticmethod
    def load(path: Path | str) -> LearnedModel:
        """The model as saved; records it had seen are not kept (only the fitted trees), so a
        later ``update`` refits on the new records alone."""
        d = json.loads(Path(path).read_text())
        if d.get("model") != "gbdt":
            raise ValueError(f"{path}: not a learned (gbdt) model")
        if d.get("features") != {t: list(f) for t, f in FEATURES_BY_TEMPLATE.items()}:
            raise ValueError(f"{path}: saved with other features; retrain it")
        return LearnedModel(Hopper(**d["hw"]), d["seed"], d["min_records"], d["n_trees"], d["max_depth"],
                            {t: GBDT.from_json(g) for t, g in d["gbdts"].items()})


def held_out_ranking(records: Sequence[Record], holdout: float = 0.2, seed: int = 0,
                     min_task: int = 5, regime: str = "") -> dict[str, Any]:
    """How well ``LearnedModel`` ranks measurements it was not fitted on. Per template, the finite
    records (the fastest of each (task, schedule)) are split at random (``seed``) into training and
    ``holdout`` parts; the model fitted on the training part predicts the held-out part, and
    Spearman's rank correlation against the measured times is reported over all held-out records
    ("pooled", across tasks too) and within each task with at least ``min_task`` held-out records
    (only the schedules differ: the ranking a search needs), with the median of those. Only
    records of ``regime`` count (burst timings by default; a sustained time is another quantity)."""
    import random
    import statistics
    from collections import defaultdict

    from inferx.autotune.gbdt import spearman

    records = [r for r in records if math.isfinite(r.median_ms) and r.median_ms > 0 and r.regime == regime]
    best: dict[tuple[str, str], Any] = {}  # one record per (task, schedule): the fastest
    for r in records:
        key = (r.task.key, schedule_key(r.schedule))
        if key not in best or r.median_ms < best[key].median_ms:
            best[key] = r
    by_template: dict[str, list[Any]] = defaultdict(list)
    for r in best.values():
        by_template[r.task.template].append(r)
    out: dict[str, Any] = {}
    for template, recs in sorted(by_template.items()):
        rng = random.Random(seed)
        recs = sorted(recs, key=lambda r: (r.task.key, schedule_key(r.schedule)))
        rng.shuffle(recs)
        n_test = max(1, int(len(recs) * holdout))
        test, train = recs[:n_test], recs[n_test:]
        model = LearnedModel(seed=seed, min_records=min(16, len(train)))
        model.update(train)
        # one call per task (features are per schedule, so batching changes no prediction)
        by_task: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(test):
            by_task[r.task.key].append(i)
        pred = [0.0] * len(test)
        for idx in by_task.values():
            for i, p in zip(idx, model.predict(test[idx[0]].task, [test[i].schedule for i in idx]), strict=True):
                pred[i] = float(p)
        pooled = spearman(pred, [r.median_ms for r in test]) if len(test) >= 3 else float("nan")
        per_task: dict[str, float] = {}
        groups: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for r, p in zip(test, pred, strict=True):
            groups[str(r.task)].append((p, r.median_ms))
        for name, pairs in groups.items():
            if len(pairs) >= min_task:
                per_task[name] = spearman([p for p, _ in pairs], [m for _, m in pairs])
        out[template] = {"records": len(recs), "train": len(train), "held_out": len(test),
                         "tasks": len({r.task.key for r in recs}), "spearman_pooled": pooled,
                         "spearman_within_task": per_task,
                         "spearman_within_task_median": statistics.median(per_task.values()) if per_task else None}
    return out
