"""Cost models: the roofline ranks schedules sensibly; the boosted trees fit a synthetic function
and, as the learned cost model, rank held-out records (Spearman >= 0.8); save/load round-trips."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from inferx.autotune.cost_model import LearnedModel, RooflineModel, bound_ms, roofline_ms
from inferx.autotune.gbdt import GBDT, spearman
from inferx.compiler.database import Record
from inferx.compiler.families.gemm.space import GemmSpace
from inferx.compiler.families.gemm.task import Task


def gemm(k: int, n: int, rows: int, shape: str, epilogue: str = "residual") -> Task:
    return Task("gemm", "bf16", "bf16", "bf16", k, n, n, "nk", "none", epilogue, shape, rows)


def sched(bm: int, bn: int, bk: int, warps: int = 4, stages: int = 3) -> dict[str, int]:
    return dict(bm=bm, bn=bn, bk=bk, num_warps=warps, num_stages=stages)


LandscapeOf = Callable[[Sequence[Task]], list[Record]]  # the session fixture `landscape_of` (conftest.py)


def test_spearman() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 3, 3, 4]) == pytest.approx(1.0)  # ties take average ranks
    assert spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)
    assert spearman([1, 1, 1], [1, 2, 3]) == 0.0


@pytest.mark.thorough  # the learned model on measured records stays in CI's run
def test_roofline_ranks_schedules_sensibly(landscape_of: LandscapeOf) -> None:
    decode, prefill = gemm(4096, 4096, 1, "decode"), gemm(4096, 4096, 4096, "prefill")
    t = lambda task, s: roofline_ms(task, s)  # noqa: E731
    # Decode: streaming the weights once in GEMV mode beats a dot tile that wastes 15 of 16 rows
    # on tensor cores no better than the memory; deep pipelines beat one stage.
    assert t(decode, sched(1, 8, 512, 4, 2)) < t(decode, sched(16, 16, 16, 4, 1))
    assert t(decode, sched(1, 8, 512, 4, 3)) <= t(decode, sched(1, 8, 512, 4, 1))
    # Prefill: big wgmma tiles beat small mma tiles and GEMV-like thin tiles by a wide margin.
    big, small = t(prefill, sched(128, 128, 64, 8, 3)), t(prefill, sched(16, 16, 32, 1, 2))
    assert big * 5 < small
    assert t(prefill, sched(128, 128, 64, 8, 3)) < t(prefill, sched(128, 128, 64, 2, 3))  # whole warpgroups
    # No schedule beats the task's roofline, and the best is within 2.5x of it (the landscape has a
    # record of every valid schedule).
    for task in (decode, prefill):
        times = RooflineModel().predict(task, [r.schedule for r in landscape_of([task])])
        assert times.min() >= bound_ms(task) and times.min() < 2.5 * bound_ms(task)
    # The roofline itself: 32 MB of bf16 weights (and x, y) at 4.2 TB/s; 137 GFLOP at 700 TFLOP/s.
    assert bound_ms(decode) == pytest.approx(1e3 * (4096 * 4096 * 2 + 2 * 4096 * 2) / 4.2e12)
    assert bound_ms(prefill) == pytest.approx(1e3 * 2 * 4096**3 / 700e12)


def test_gbdt_fits_a_synthetic_function() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (700, 6))
    y = np.sin(x[:, 0]) + x[:, 1] ** 2 + 0.5 * x[:, 2] * x[:, 3] + 0.05 * rng.normal(size=700)
    model = GBDT(seed=3).fit(x[:500], y[:500])
    assert spearman(model.predict(x[500:]), y[500:]) >= 0.9
    again = GBDT(seed=3).fit(x[:500], y[:500])
    assert np.array_equal(model.predict(x[500:]), again.predict(x[500:])), "a fit is deterministic"
    assert np.array_equal(GBDT.from_json(model.to_json()).predict(x[500:]), model.predict(x[500:]))
    with pytest.raises(ValueError, match="fit needs"):
        GBDT().fit(np.zeros((3, 2)), np.zeros(4))


@pytest.mark.thorough  # the learned model on synthetic records; on measured ones in CI's run
def test_learned_model_ranks_held_out_records(tmp_path: Path, landscape_of: LandscapeOf) -> None:
    tasks = [gemm(4096, 4096, 1, "decode"), gemm(4096, 6144, 16, "decode", "kv_write+rope"),
             gemm(4096, 4096, 4096, "prefill"), gemm(14336, 4096, 256, "prefill")]
    records = [r for r in landscape_of(tasks) if math.isfinite(r.median_ms)]
    random.Random(0).shuffle(records)
    train, test = records[:600], records[600:1800]
    model = LearnedModel(seed=0)
    assert model.gbdts.get("gemm") is None
    model.update(train)
    assert model.gbdts.get("gemm") is not None
    for task in tasks:  # per task, on records the model never saw
        held = [r for r in test if r.task == task]
        pred = model.predict(task, [r.schedule for r in held])
        rho = spearman(pred, [r.median_ms for r in held])
        assert rho >= 0.8, (str(task), rho)
    path = tmp_path / "model.json"
    model.save(path)
    back = LearnedModel.load(path)
    some = [r.schedule for r in test[:50]]
    assert np.allclose(back.predict(tasks[0], some), model.predict(tasks[0], some))
    RooflineModel().save(tmp_path / "roofline.json")
    assert RooflineModel.load(tmp_path / "roofline.json") == RooflineModel()
    with pytest.raises(ValueError, match="not a learned"):
        LearnedModel.load(tmp_path / "roofline.json")


@pytest.mark.slow
def test_learned_model_answers_with_the_roofline_until_it_has_records(landscape_of: LandscapeOf) -> None:
    task = gemm(4096, 4096, 1, "decode")
    schedules = GemmSpace().sample(task, random.Random(0), 20)
    few = [r for r in landscape_of([task]) if math.isfinite(r.median_ms)][:5]
    model = LearnedModel()
    model.update(few)
    assert np.array_equal(model.predict(task, schedules), RooflineModel().predict(task, schedules))


@pytest.mark.slow
def test_learned_model_ranks_held_out_h200_measurements() -> None:
    """Records measured by ``inferx tune`` on an H200 (tuning_logs/h200; Llama-3-8B and 1B shapes):
    fitted on 80% of each template's records, the model ranks the other 20% (pooled over tasks)
    with Spearman >= 0.8, for every split seed tried."""
    from inferx.autotune.cost_model import held_out_ranking
    from inferx.autotune.runner import ReplayRunner

    root = Path(__file__).resolve().parent.parent / "tuning_logs" / "h200"
    records = ReplayRunner.from_files([root]).records
    assert len(records) >= 200
    assert held_out_ranking([replace(r, regime="sustained") for r in records]) == {}  # burst records alone
    for seed in range(4):
        res = held_out_ranking(records, holdout=0.2, seed=seed)
        assert set(res) == {"gemm", "attention"}
        for template, r in res.items():
            assert r["held_out"] >= 10 and r["train"] >= 4 * r["held_out"] - 3
            assert r["spearman_pooled"] >= 0.8, (template, seed, r["spearman_pooled"])
