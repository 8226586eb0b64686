"""Cost models: predicted time (ms, lower is better) of schedules of a task.

Every model answers ``update(records)`` (learn from measurements), ``predict(task, schedules)``
(one time per schedule, in order), ``save(path)`` and ``load(path)``. Two implement it:

- ``RooflineModel``, the trivial one: an analytical Hopper model that needs no data. DRAM bytes
  (weights read once per row-block of programs, x once per column-block, re-reads beyond the L2
  discounted), FLOPs on wgmma, mma or CUDA cores depending on the tile, the bytes in flight that
  keep DRAM busy (Little's law), waves over 132 SMs with occupancy from shared memory and
  registers, a launch. ``update`` learns nothing. Attention has its own, simpler estimate
  (``attention_roofline_ms``): K/V read once (once per query block in prefill, L2-discounted),
  split-KV partials written and merged, 4 x queries x context x head_dim FLOPs, waves, a serial
  key loop per program, a launch. So has the fused decode MLP (``mlp_roofline_ms``): both
  weights at the bandwidth one program per SM keeps in flight, its partial sums' atomics, the
  last arrival's tail, a launch; and the fused attention and o projection
  (``attention_o_roofline_ms``), with its chunks' re-reads of K/V from the L2.
- ``LearnedModel``, the clever one: gradient-boosted trees (``gbdt.py``) on log(time) over
  features of (task, schedule), the roofline's own estimate among them. Until it has seen
  ``min_records`` finite measurements of a template it answers with the roofline. Each template
  has its own features (``FEATURES``, ``ATTENTION_FEATURES``, ``MLP_FEATURES``) and its own trees.

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

from inferx.autotune.database import Record
from inferx.autotune.gbdt import GBDT
from inferx.autotune.space import (
    DTYPE_BYTES,
    H200,
    Hopper,
    acc_values_per_thread,
    attention_blocks_per_sm,
    attention_bm,
    attention_head_tiles,
    attention_programs,
    attention_smem_bytes,
    attention_values_per_thread,
    attention_wave_efficiency,
    blocks_per_sm,
    grid,
    programs,
    schedule_key,
    smem_bytes,
    wave_efficiency,
    weight_tiles,
)
from inferx.autotune.space_fused import (
    attention_o_programs,
    attention_o_tiles,
    attention_o_values_per_thread,
    mlp_programs,
    mlp_values_per_thread,
)
from inferx.autotune.task import AnyTask, AttentionOTask, AttentionTask, MlpTask, Task
from inferx.compiler.codegen.gemm import GEMV_MAX_ROWS


class CostModel(Protocol):
    def update(self, records: Sequence[Record]) -> None: ...

    def predict(self, task: AnyTask, schedules: Sequence[Mapping[str, int]]) -> np.ndarray: ...

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


def bound_ms(task: AnyTask, hw: Hopper = H200) -> float:
    """The task's roofline: the larger of its unavoidable bytes at DRAM speed and its FLOPs at the
    tensor-core peak (GEMV-shaped tasks, one row, never reach tensor cores). What a schedule's
    "fraction of roofline" is measured against."""
    if isinstance(task, AttentionTask):
        return 1e3 * max(attention_ideal_bytes(task) / hw.dram_bytes_per_s, attention_flops(task) / hw.tensor_flops)
    if isinstance(task, MlpTask):
        return 1e3 * max(mlp_ideal_bytes(task) / hw.dram_bytes_per_s, mlp_flops(task) / hw.fma_flops)
    if isinstance(task, AttentionOTask):
        return 1e3 * attention_o_ideal_bytes(task) / hw.dram_bytes_per_s
    peak = hw.tensor_flops if task.rows > 1 else hw.fma_flops
    return 1e3 * max(ideal_bytes(task) / hw.dram_bytes_per_s, flops(task) / peak)


def roofline_ms(task: AnyTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
    """The analytical time of one launch of ``task`` under schedule ``s`` (see the module doc)."""
    if isinstance(task, AttentionTask):
        return attention_roofline_ms(task, s, hw)
    if isinstance(task, MlpTask):
        return mlp_roofline_ms(task, s, hw)
    if isinstance(task, AttentionOTask):
        return attention_o_roofline_ms(task, s, hw)
    m, k, n, n_out = problem(task)
    gm, gn = grid(task, s)
    xb, wb = DTYPE_BYTES.get(task.x_dtype, 4), DTYPE_BYTES.get(task.w_dtype, 4)
    w_bytes, x_bytes = k * n * wb, m * k * xb
    # Re-reads hit the L2 when the operand fits in it; beyond, they go to DRAM.
    w_miss, x_miss = min(1.0, w_bytes / hw.l2_bytes), min(1.0, x_bytes / hw.l2_bytes)
    split = s.get("split_k", 1)
    dram = (w_bytes * (1 + (gm - 1) * w_miss) + x_bytes * (1 + (gn - 1) * x_miss)
            + m * n_out * _out_bytes(task))
    if split > 1:  # fp32 partials written and read back once (mostly from the L2)
        dram += 2 * 4 * split * gm * s["bm"] * gn * s["bn"] * weight_tiles(task, s) * 0.5
    slots = hw.sms * max(1, blocks_per_sm(task, s, hw))
    n_programs = programs(task, s)
    resident = min(n_programs, slots)
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
    steps = math.ceil(k / (s["bk"] * split))
    waves = math.ceil(n_programs / slots)
    latency_s = waves * steps * hw.dram_latency_s / max(0.5, s["num_stages"] - 1) * 0.25
    eff = wave_efficiency(task, s, hw)
    return 1e3 * (max(mem_s, comp_s) / max(eff, 1e-3) ** 0.5 + latency_s + hw.launch_s)


# --- attention ---------------------------------------------------------------------------------


def _attention_sizes(task: AttentionTask) -> tuple[int, int]:
    """(sequences, queries per sequence): batch x 1 in decode, one prompt of ``rows`` in prefill."""
    return (task.rows, 1) if task.shape == "decode" else (1, task.rows)


def attention_ideal_bytes(task: AttentionTask) -> float:
    """K and V of every sequence's context read once, Q read and the output written once."""
    b, q = _attention_sizes(task)
    kv = b * task.kv_heads * task.ctx * (task.head_dim + task.head_dim_v) * DTYPE_BYTES.get(task.kv_dtype, 4)
    qo = b * task.q_heads * q * (task.head_dim * DTYPE_BYTES.get(task.dtype, 4) + task.head_dim_v * _out_bytes(task))
    return float(kv + qo)


def attention_flops(task: AttentionTask) -> float:
    """2 x queries x keys x (head_dim + head_dim_v) (q.k and p.v; 4 x q x ctx x d for equal
    dims), halved for a causal prefill."""
    b, q = _attention_sizes(task)
    f = 2.0 * b * task.q_heads * q * task.ctx * (task.head_dim + task.head_dim_v)
    return f / 2 if task.causal and task.shape == "prefill" else f


def attention_roofline_ms(task: AttentionTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
    """The analytical time of one attention launch under ``s``: DRAM bytes at the bandwidth the
    bytes in flight sustain, or padded FLOPs at the tile's peak, whichever is longer, over the
    wave efficiency; plus each program's serial key loop and, in decode, the merge of SPLITS
    partials by the last program; plus a launch."""
    b, q = _attention_sizes(task)
    bm, (bd, bdv) = attention_bm(task, s), attention_head_tiles(task)
    kvb = DTYPE_BYTES.get(task.kv_dtype, 4)
    kv_bytes = b * task.kv_heads * task.ctx * (task.head_dim + task.head_dim_v) * kvb
    n_programs = attention_programs(task, s)
    if task.shape == "decode":
        partials = n_programs * bm * (bdv + 2) * 4 * 2  # written by every slice, read by the merge
        dram = attention_ideal_bytes(task) + partials
        steps = math.ceil(task.ctx / (s["splits"] * s["bn"]))
        rows_padded = b * task.kv_heads * bm
        merge_s = s["splits"] * hw.dram_latency_s * 0.1
    else:
        blocks = math.ceil(q / bm)
        rereads = task.q_heads * blocks - task.kv_heads  # every (query head, block) streams its K/V
        dram = attention_ideal_bytes(task) + kv_bytes / max(1, task.kv_heads) * max(0, rereads) * min(
            1.0, kv_bytes / hw.l2_bytes)
        steps = math.ceil(task.ctx / s["bn"]) // (2 if task.causal else 1) or 1
        rows_padded = task.q_heads * blocks * bm
        merge_s = 0.0
    slots = hw.sms * max(1, attention_blocks_per_sm(task, s, hw))
    resident = min(n_programs, slots)
    inflight = resident * s["bn"] * (bd + bdv) * kvb * max(0.5, s["num_stages"] - 1)
    bw = hw.dram_bytes_per_s * min(1.0, inflight / (hw.dram_bytes_per_s * hw.dram_latency_s))
    mem_s = dram / bw
    peak = hw.tensor_flops if bm >= 64 and s["num_warps"] >= 4 else hw.mma_flops
    keys = task.ctx / (2 if task.causal and task.shape == "prefill" else 1)
    comp_s = 2.0 * rows_padded * keys * (bd + bdv) / peak
    waves = math.ceil(n_programs / slots)
    latency_s = waves * steps * hw.dram_latency_s / max(0.5, s["num_stages"] - 1) * 0.25
    eff = attention_wave_efficiency(task, s, hw)
    return 1e3 * (max(mem_s, comp_s) / max(eff, 1e-3) ** 0.5 + latency_s + merge_s + hw.launch_s)


# --- the fused decode MLP -----------------------------------------------------------------------


def mlp_ideal_bytes(task: MlpTask) -> float:
    """Both weights once, x, the residual and the output once each."""
    wb, xb = DTYPE_BYTES.get(task.w_dtype, 4), DTYPE_BYTES.get(task.x_dtype, 4)
    weights = (2 * task.i * task.k + task.n * task.i) * wb
    return weights + task.rows * (task.k * xb + task.n * (xb + _out_bytes(task)))


def mlp_flops(task: MlpTask) -> float:
    return 2.0 * task.rows * (2 * task.i * task.k + task.n * task.i)


def mlp_roofline_ms(task: MlpTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
    """The analytical time of one fused-MLP launch under ``s``: the weights at the bandwidth the
    programs' loads in flight sustain (each program alone on its SM, one K or N step of tiles in
    flight, two with prefetch; Triton's stages do not pipeline these loads, which feed no dot:
    measured alike at 1 and 2 stages; in the dot form they do, stages - 1 ahead), or the products
    on CUDA cores, whichever is longer, over the wave efficiency; the partial sums' atomics (one
    per output element per program, at an assumed 1.5e11 a second across the L2); the last
    arrival's loads and stores after the weights (two DRAM latencies); plus a launch."""
    wb = DTYPE_BYTES.get(task.w_dtype, 4)
    n_programs = mlp_programs(task, s)
    slots = hw.sms  # 16 warps: one program per SM; fewer warps: more, capped by registers
    if s["num_warps"] < 16:
        slots = hw.sms * max(1, min(16 // s["num_warps"], hw.max_blocks_per_sm))
    resident = min(n_programs, slots)
    tile = max(2 * s["bi"] * s["bk"], s["bn"] * s["bi"]) * wb
    ahead = max(1, s["num_stages"] - 1) if s.get("dot", 0) else 1 + s.get("prefetch", 0)
    inflight = resident * tile * ahead
    bw = hw.dram_bytes_per_s * min(1.0, inflight / (hw.dram_bytes_per_s * hw.dram_latency_s))
    mem_s = mlp_ideal_bytes(task) / bw
    comp_s = mlp_flops(task) / hw.fma_flops
    waves = math.ceil(n_programs / slots)
    eff = n_programs / (waves * slots)
    atomics_s = n_programs * s["bm"] * task.n / 1.5e11
    steps = math.ceil(task.k / s["bk"]) + math.ceil(task.n / s["bn"])
    latency_s = waves * steps * hw.dram_latency_s / ahead * 0.25
    return 1e3 * (max(mem_s, comp_s) / max(eff, 1e-3) ** 0.5 + atomics_s + latency_s + 2 * hw.dram_latency_s
                  + hw.launch_s)


# --- the fused decode attention and o projection ------------------------------------------------

L2_BYTES_PER_S = 10e12  # what the L2 serves re-reads at (an assumption, not a measurement)


def attention_o_ideal_bytes(task: AttentionOTask) -> float:
    """W_o once, each sequence's K and V at the context once, q, the residual and the output."""
    kvb, wb, ob = (DTYPE_BYTES.get(d, 4) for d in (task.kv_dtype, task.w_dtype, task.out_dtype.split("+")[0]))
    kv = task.rows * task.kv_heads * task.ctx * (task.head_dim + task.head_dim_v) * kvb
    return task.n * task.q_heads * task.head_dim_v * wb + kv + task.rows * task.n * 2 * ob


def attention_o_roofline_ms(task: AttentionOTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
    """The analytical time of one fused attention and o projection launch under ``s``: the ideal
    bytes at DRAM speed, the chunks' re-reads of K/V at ``L2_BYTES_PER_S``, each program's serial
    key loop (a DRAM latency per step over the pipeline's stages), the atomics (one per output per
    KV head), the last arrival's tail, a launch; over the wave efficiency."""
    kvb = DTYPE_BYTES.get(task.kv_dtype, 4)
    chunks = math.ceil(attention_o_tiles(task, s) / s["tiles"])
    n_programs = attention_o_programs(task, s)
    kv_head = task.ctx * (task.head_dim + task.head_dim_v) * kvb
    rereads_s = task.rows * task.kv_heads * (chunks - 1) * kv_head / L2_BYTES_PER_S
    slots = hw.sms * max(1, min(8 // max(1, s["num_warps"] // 2), hw.max_blocks_per_sm))  # resident programs
    waves = math.ceil(n_programs / slots)
    eff = n_programs / (math.ceil(n_programs / hw.sms) * hw.sms)  # SMs busy
    key_loop_s = waves * math.ceil(task.ctx / s["bn"]) * hw.dram_latency_s / max(1, s["num_stages"]) * 0.5
    atomics_s = task.rows * task.kv_heads * task.n / 1.5e11
    mem_s = attention_o_ideal_bytes(task) / hw.dram_bytes_per_s
    return 1e3 * (max(mem_s, rereads_s) / max(eff, 1e-3) ** 0.5 + key_loop_s + atomics_s + 2 * hw.dram_latency_s
                  + hw.launch_s)


def _out_bytes(task: AnyTask) -> int:
    return max(DTYPE_BYTES.get(d, 4) for d in task.out_dtype.split("+"))


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

FEATURES = (
    "log_m", "log_k", "log_n", "log_tile_n", "decode", "gated", "rope", "norm", "residual", "wbytes",
    "log_bm", "log_bn", "log_bk", "log_warps", "stages", "gemv", "log_programs", "wave_eff", "occupancy",
    "log_smem", "acc_per_thread", "k_steps", "log_split_k", "log_roofline", "tma", "persistent",
    "log_group_m", "unroll", "defer",
)


def features(task: Task, s: Mapping[str, int], hw: Hopper = H200) -> list[float]:
    """The learned model's inputs for one (task, schedule), named by ``FEATURES``."""
    tags = set(task.epilogue.split("+"))
    lg = lambda v: math.log2(max(1.0, float(v)))  # noqa: E731
    return [
        lg(task.rows), lg(task.k), lg(task.n), lg(task.tile_n), float(task.shape == "decode"),
        float(task.gated), float("rope" in tags), float(task.prologue != "none"), float("residual" in tags),
        float(DTYPE_BYTES.get(task.w_dtype, 4)),
        lg(s["bm"]), lg(s["bn"]), lg(s["bk"]), lg(s["num_warps"]), float(s["num_stages"]),
        float(s["bm"] <= GEMV_MAX_ROWS),
        lg(programs(task, s)), wave_efficiency(task, s, hw), float(blocks_per_sm(task, s, hw)),
        lg(smem_bytes(task, s)), acc_values_per_thread(task, s),
        float(math.ceil(task.k / (s["bk"] * s.get("split_k", 1)))), lg(s.get("split_k", 1)),
        math.log(roofline_ms(task, s, hw)), float(s.get("tma", 0)), float(s.get("persistent", 0)),
        lg(s.get("group_m", 0)), float(s.get("unroll", 0)), float(s.get("defer", 0)),
    ]


ATTENTION_FEATURES = (
    "log_rows", "log_ctx", "decode", "log_group", "log_kv_heads", "log_head_dim", "causal", "window", "softcap",
    "kvbytes", "log_bm", "log_bn", "log_splits", "log_warps", "stages", "log_programs", "wave_eff", "occupancy",
    "log_smem", "values_per_thread", "key_steps", "log_roofline",
)


def attention_features(task: AttentionTask, s: Mapping[str, int], hw: Hopper = H200) -> list[float]:
    """The learned model's inputs for one attention (task, schedule), named by ``ATTENTION_FEATURES``."""
    lg = lambda v: math.log2(max(1.0, float(v)))  # noqa: E731
    splits = s.get("splits", 1)
    return [
        lg(task.rows), lg(task.ctx), float(task.shape == "decode"), lg(task.q_heads // max(1, task.kv_heads)),
        lg(task.kv_heads), lg(task.head_dim), float(task.causal), float(task.window), float(task.softcap),
        float(DTYPE_BYTES.get(task.kv_dtype, 4)),
        lg(attention_bm(task, s)), lg(s["bn"]), lg(splits), lg(s["num_warps"]), float(s["num_stages"]),
        lg(attention_programs(task, s)), attention_wave_efficiency(task, s, hw),
        float(attention_blocks_per_sm(task, s, hw)), lg(attention_smem_bytes(task, s)),
        attention_values_per_thread(task, s), float(math.ceil(task.ctx / (splits * s["bn"]))),
        math.log(roofline_ms(task, s, hw)),
    ]


MLP_FEATURES = (
    "log_rows", "log_k", "log_i", "log_n", "wbytes", "log_bi", "log_bk", "log_bn", "log_warps", "stages",
    "log_programs", "wave_eff", "values_per_thread", "k_steps", "n_steps", "log_roofline", "prefetch", "dot",
    "defer",
)


def mlp_features(task: MlpTask, s: Mapping[str, int], hw: Hopper = H200) -> list[float]:
    """The learned model's inputs for one fused-MLP (task, schedule), named by ``MLP_FEATURES``."""
    lg = lambda v: math.log2(max(1.0, float(v)))  # noqa: E731
    n_programs = mlp_programs(task, s)
    return [
        lg(task.rows), lg(task.k), lg(task.i), lg(task.n), float(DTYPE_BYTES.get(task.w_dtype, 4)),
        lg(s["bi"]), lg(s["bk"]), lg(s["bn"]), lg(s["num_warps"]), float(s["num_stages"]),
        lg(n_programs), n_programs / (math.ceil(n_programs / hw.sms) * hw.sms), mlp_values_per_thread(s),
        float(math.ceil(task.k / s["bk"])), float(math.ceil(task.n / s["bn"])), math.log(roofline_ms(task, s, hw)),
        float(s.get("prefetch", 0)), float(s.get("dot", 0)), float(s.get("defer", 0)),
    ]


ATTENTION_O_FEATURES = (
    "log_rows", "log_ctx", "log_group", "log_kv_heads", "log_head_dim", "log_n", "window", "log_bn", "log_bno",
    "log_tiles", "log_warps", "stages", "log_programs", "values_per_thread", "log_roofline",
)


def attention_o_features(task: AttentionOTask, s: Mapping[str, int], hw: Hopper = H200) -> list[float]:
    """The learned model's inputs for one fused attention and o projection (task, schedule)."""
    lg = lambda v: math.log2(max(1.0, float(v)))  # noqa: E731
    return [
        lg(task.rows), lg(task.ctx), lg(task.q_heads // max(1, task.kv_heads)), lg(task.kv_heads),
        lg(task.head_dim), lg(task.n), float(task.window), lg(s["bn"]), lg(s["bno"]), lg(s["tiles"]),
        lg(s["num_warps"]), float(s["num_stages"]), lg(attention_o_programs(task, s)),
        attention_o_values_per_thread(task, s), math.log(roofline_ms(task, s, hw)),
    ]


def features_of(task: AnyTask, s: Mapping[str, int], hw: Hopper = H200) -> list[float]:
    """The features of ``task``'s template (``features``, ``attention_features``, ``mlp_features``,
    ``attention_o_features``)."""
    if isinstance(task, AttentionTask):
        return attention_features(task, s, hw)
    if isinstance(task, MlpTask):
        return mlp_features(task, s, hw)
    if isinstance(task, AttentionOTask):
        return attention_o_features(task, s, hw)
    return features(task, s, hw)


FEATURES_BY_TEMPLATE = {"gemm": FEATURES, "attention": ATTENTION_FEATURES, "mlp": MLP_FEATURES,
                        "attention_o": ATTENTION_O_FEATURES}


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

    @property
    def gbdt(self) -> GBDT | None:
        """The GEMM template's trees (None until fitted)."""
        return self.gbdts.get("gemm")

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
