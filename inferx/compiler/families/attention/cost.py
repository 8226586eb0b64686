"""The attention template's cost: its roofline bound, the analytical time of a schedule and the
learned model's features.

The analytical time (``roofline_ms``), a simple estimate: K/V read once (once per query
block in prefill, L2-discounted), split-KV partials written and merged, 4 x queries x context x
head_dim FLOPs, waves, a serial key loop per program, a launch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from inferx.compiler.families.attention.space import (
    attention_blocks_per_sm,
    attention_bm,
    attention_head_tiles,
    attention_programs,
    attention_smem_bytes,
    attention_values_per_thread,
    attention_wave_efficiency,
)
from inferx.compiler.families.attention.task import AttentionTask
from inferx.compiler.families.common.cost import out_bytes
from inferx.compiler.families.common.hardware import DTYPE_BYTES, H200, Hopper


def _attention_sizes(task: AttentionTask) -> tuple[int, int]:
    """(sequences, queries per sequence): batch x 1 in decode, one prompt of ``rows`` in prefill."""
    return (task.rows, 1) if task.shape == "decode" else (1, task.rows)


def attention_ideal_bytes(task: AttentionTask) -> float:
    """K and V of every sequence's context read once, Q read and the output written once."""
    b, q = _attention_sizes(task)
    kv = b * task.kv_heads * task.ctx * (task.head_dim + task.head_dim_v) * DTYPE_BYTES.get(task.kv_dtype, 4)
    qo = b * task.q_heads * q * (task.head_dim * DTYPE_BYTES.get(task.dtype, 4) + task.head_dim_v * out_bytes(task))
    return float(kv + qo)


def attention_flops(task: AttentionTask) -> float:
    """2 x queries x keys x (head_dim + head_dim_v) (q.k and p.v; 4 x q x ctx x d for equal
    dims), halved for a causal prefill."""
    b, q = _attention_sizes(task)
    f = 2.0 * b * task.q_heads * q * task.ctx * (task.head_dim + task.head_dim_v)
    return f / 2 if task.causal and task.shape == "prefill" else f


def bound_ms(task: AttentionTask, hw: Hopper = H200) -> float:
    """The larger of the task's unavoidable bytes at DRAM speed and its FLOPs at the tensor-core
    peak."""
    return 1e3 * max(attention_ideal_bytes(task) / hw.dram_bytes_per_s, attention_flops(task) / hw.tensor_flops)


def roofline_ms(task: AttentionTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
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


FEATURES = (
    "log_rows", "log_ctx", "decode", "log_group", "log_kv_heads", "log_head_dim", "causal", "window", "softcap",
    "kvbytes", "log_bm", "log_bn", "log_splits", "log_warps", "stages", "log_programs", "wave_eff", "occupancy",
    "log_smem", "values_per_thread", "key_steps", "log_roofline",
)


def features(task: AttentionTask, s: Mapping[str, int], hw: Hopper = H200) -> list[float]:
    """The learned model's inputs for one attention (task, schedule), named by ``FEATURES``."""
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
