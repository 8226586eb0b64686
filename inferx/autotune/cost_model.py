"""Cost models: predicted time (ms, lower is better) of schedules of a task.

Every model answers ``update(records)`` (learn from measurements), ``predict(task, schedules)``
(one time per schedule, in order), ``save(path)`` and ``load(path)``. Two implement it:

- ``RooflineModel``, the trivial one: an analytical Hopper model that needs no data. DRAM bytes
  (weights read once per row-block of programs, x once per column-block, re-reads beyond the L2
  discounted), FLOPs on wgmma, mma or CUDA cores depending on the tile, the bytes in flight that
  keep DRAM busy (Little's law), waves over 132 SMs with occupancy from shared memory and
  registers, a launch. ``update`` learns nothing.
- ``LearnedModel``, the clever one: gradient-boosted trees (``gbdt.py``) on log(time) over
  features of (task, schedule), the roofline's own estimate among them. Until it has seen
  ``min_records`` finite measurements it answers with the roofline.

Records with an infinite time (failed candidates) teach nothing about speed and are skipped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from inferx.autotune.database import Record
from inferx.autotune.gbdt import GBDT
from inferx.autotune.space import (
    DTYPE_BYTES,
    H200,
    Hopper,
    acc_values_per_thread,
    blocks_per_sm,
    grid,
    smem_bytes,
    wave_efficiency,
    weight_tiles,
)
from inferx.autotune.task import Task
from inferx.compiler.codegen.gemm import GEMV_MAX_ROWS


class CostModel(Protocol):
    def update(self, records: Sequence[Record]) -> None: ...

    def predict(self, task: Task, schedules: Sequence[Mapping[str, int]]) -> np.ndarray: ...

    def save(self, path: Path | str) -> None: ...


# --- the roofline ------------------------------------------------------------------------------


def problem(task: Task) -> tuple[int, int, int, int]:
    """(M, K, N, N out): M the row bucket, N the weight's columns (both halves of a gated GEMM),
    N out the columns written."""
    return task.rows, task.k, task.n, task.tile_n


def ideal_bytes(task: Task) -> float:
    """DRAM bytes no schedule can avoid: weights, x and the output once each."""
    m, k, n, n_out = problem(task)
    return (k * n * DTYPE_BYTES.get(task.w_dtype, 4) + m * k * DTYPE_BYTES.get(task.x_dtype, 4)
            + m * n_out * _out_bytes(task))


def flops(task: Task) -> float:
    m, k, n, _ = problem(task)
    return 2.0 * m * k * n


def bound_ms(task: Task, hw: Hopper = H200) -> float:
    """The task's roofline: the larger of its unavoidable bytes at DRAM speed and its FLOPs at the
    tensor-core peak (GEMV-shaped tasks, one row, never reach tensor cores). What a schedule's
    "fraction of roofline" is measured against."""
    peak = hw.tensor_flops if task.rows > 1 else hw.fma_flops
    return 1e3 * max(ideal_bytes(task) / hw.dram_bytes_per_s, flops(task) / peak)


def roofline_ms(task: Task, s: Mapping[str, int], hw: Hopper = H200) -> float:
    """The analytical time of one launch of ``task`` under schedule ``s`` (see the module doc)."""
    m, k, n, n_out = problem(task)
    gm, gn = grid(task, s)
    xb, wb = DTYPE_BYTES.get(task.x_dtype, 4), DTYPE_BYTES.get(task.w_dtype, 4)
    w_bytes, x_bytes = k * n * wb, m * k * xb
    # Re-reads hit the L2 when the operand fits in it; beyond, they go to DRAM.
    w_miss, x_miss = min(1.0, w_bytes / hw.l2_bytes), min(1.0, x_bytes / hw.l2_bytes)
    dram = (w_bytes * (1 + (gm - 1) * w_miss) + x_bytes * (1 + (gn - 1) * x_miss)
            + m * n_out * _out_bytes(task))
    slots = hw.sms * max(1, blocks_per_sm(task, s, hw))
    programs = gm * gn
    resident = min(programs, slots)
    # Bytes in flight: each resident program keeps (stages - 1) K steps of tiles loading.
    tile = s["bm"] * s["bk"] * xb + weight_tiles(task, s) * s["bn"] * s["bk"] * wb
    inflight = resident * tile * max(0.5, s["num_stages"] - 1)  # one stage: loads not overlapped
    bw = hw.dram_bytes_per_s * min(1.0, inflight / (hw.dram_bytes_per_s * hw.dram_latency_s))
    mem_s = dram / bw
    if s["bm"] <= GEMV_MAX_ROWS:  # GEMV mode: CUDA cores
        peak = hw.fma_flops
    elif s["bm"] >= 64 and s["num_warps"] >= 4:
        peak = hw.tensor_flops
    else:
        peak = hw.mma_flops
    # Operand reuse per tile: a 128x256 tile feeds the tensor cores from shared memory at full rate.
    reuse = (min(1.0, (s["bm"] * s["bn"] / (s["bm"] + s["bn"])) / (128 * 256 / 384)) if s["bm"] > GEMV_MAX_ROWS
             else 1.0)
    padded = gm * s["bm"] * gn * s["bn"] * weight_tiles(task, s)  # masked lanes compute too
    comp_s = 2.0 * max(padded, m * n) * k / (peak * reuse)
    # Serial K loop of one program: each step waits on DRAM unless the pipeline hides it.
    steps = math.ceil(k / s["bk"])
    waves = math.ceil(programs / slots)
    latency_s = waves * steps * hw.dram_latency_s / max(0.5, s["num_stages"] - 1) * 0.25
    eff = wave_efficiency(task, s, hw)
    return 1e3 * (max(mem_s, comp_s) / max(eff, 1e-3) ** 0.5 + latency_s + hw.launch_s)


def _out_bytes(task: Task) -> int:
    return max(DTYPE_BYTES.get(d, 4) for d in task.out_dtype.split("+"))


@dataclass
class RooflineModel:
    """The analytical model; needs no records and keeps none."""

    hw: Hopper = H200

    def update(self, records: Sequence[Record]) -> None:
        return None

    def predict(self, task: Task, schedules: Sequence[Mapping[str, int]]) -> np.ndarray:
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

FEATURES = (
    "log_m", "log_k", "log_n", "log_tile_n", "decode", "gated", "rope", "norm", "residual", "wbytes",
    "log_bm", "log_bn", "log_bk", "log_warps", "stages", "gemv", "log_programs", "wave_eff", "occupancy",
    "log_smem", "acc_per_thread", "k_steps", "log_roofline",
)


def features(task: Task, s: Mapping[str, int], hw: Hopper = H200) -> list[float]:
    """The learned model's inputs for one (task, schedule), named by ``FEATURES``."""
    tags = set(task.epilogue.split("+"))
    gm, gn = grid(task, s)
    lg = lambda v: math.log2(max(1.0, float(v)))  # noqa: E731
    return [
        lg(task.rows), lg(task.k), lg(task.n), lg(task.tile_n), float(task.shape == "decode"),
        float("gated" in tags), float("rope" in tags), float(task.prologue != "none"), float("residual" in tags),
        float(DTYPE_BYTES.get(task.w_dtype, 4)),
        lg(s["bm"]), lg(s["bn"]), lg(s["bk"]), lg(s["num_warps"]), float(s["num_stages"]),
        float(s["bm"] <= GEMV_MAX_ROWS),
        lg(gm * gn), wave_efficiency(task, s, hw), float(blocks_per_sm(task, s, hw)),
        lg(smem_bytes(task, s)), acc_values_per_thread(task, s), float(math.ceil(task.k / s["bk"])),
        math.log(roofline_ms(task, s, hw)),
    ]


@dataclass
class LearnedModel:
    """Boosted trees on log(ms); the roofline until ``min_records`` finite records are known.
    ``update`` adds records to those already seen (a repeated (task, schedule) keeps its latest
    time) and refits from scratch, so a fit depends only on the records and the seed."""

    hw: Hopper = H200
    seed: int = 0
    min_records: int = 16
    n_trees: int = 80
    max_depth: int = 4
    gbdt: GBDT | None = None
    _seen: dict[tuple[str, str], tuple[Task, dict[str, int], float]] = field(default_factory=dict, repr=False)

    def update(self, records: Sequence[Record]) -> None:
        for r in records:
            if math.isfinite(r.median_ms) and r.median_ms > 0:
                key = (r.task.key, json.dumps(r.schedule, sort_keys=True))
                self._seen[key] = (r.task, dict(r.schedule), r.median_ms)
        if len(self._seen) < self.min_records:
            return
        rows = list(self._seen.values())
        x = np.array([features(t, s, self.hw) for t, s, _ in rows])
        y = np.log(np.array([ms for _, _, ms in rows]))
        self.gbdt = GBDT(n_trees=self.n_trees, max_depth=self.max_depth, seed=self.seed, min_leaf=2).fit(x, y)

    def predict(self, task: Task, schedules: Sequence[Mapping[str, int]]) -> np.ndarray:
        if not schedules:
            return np.zeros(0)
        if self.gbdt is None:
            return RooflineModel(self.hw).predict(task, schedules)
        x = np.array([features(task, s, self.hw) for s in schedules])
        return np.exp(self.gbdt.predict(x))

    def save(self, path: Path | str) -> None:
        d = {"model": "gbdt", "hw": vars(self.hw), "seed": self.seed, "min_records": self.min_records,
             "n_trees": self.n_trees, "max_depth": self.max_depth, "features": list(FEATURES),
             "gbdt": self.gbdt.to_json() if self.gbdt is not None else None}
        Path(path).write_text(json.dumps(d))

    @staticmethod
    def load(path: Path | str) -> LearnedModel:
        """The model as saved; records it had seen are not kept (only the fitted trees), so a
        later ``update`` refits on the new records alone."""
        d = json.loads(Path(path).read_text())
        if d.get("model") != "gbdt":
            raise ValueError(f"{path}: not a learned (gbdt) model")
        if d["features"] != list(FEATURES):
            raise ValueError(f"{path}: saved with other features; retrain it")
        return LearnedModel(Hopper(**d["hw"]), d["seed"], d["min_records"], d["n_trees"], d["max_depth"],
                            GBDT.from_json(d["gbdt"]) if d["gbdt"] is not None else None)
