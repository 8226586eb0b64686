"""The fused decode attention and o projection's cost: its roofline bound, the analytical time of
a schedule (with its chunks' re-reads of K/V from the L2) and the learned model's features.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from inferx.compiler.families.attention_o.space import (
    attention_o_programs,
    attention_o_tiles,
    attention_o_values_per_thread,
)
from inferx.compiler.families.attention_o.task import AttentionOTask
from inferx.compiler.families.common.hardware import DTYPE_BYTES, H200, Hopper

L2_BYTES_PER_S = 10e12  # what the L2 serves re-reads at (an assumption, not a measurement)


def attention_o_ideal_bytes(task: AttentionOTask) -> float:
    """W_o once, each sequence's K and V at the context once, q, the residual and the output."""
    kvb, wb, ob = (DTYPE_BYTES.get(d, 4) for d in (task.kv_dtype, task.w_dtype, task.out_dtype.split("+")[0]))
    kv = task.rows * task.kv_heads * task.ctx * (task.head_dim + task.head_dim_v) * kvb
    return task.n * task.q_heads * task.head_dim_v * wb + kv + task.rows * task.n * 2 * ob


def bound_ms(task: AttentionOTask, hw: Hopper = H200) -> float:
    """The task's unavoidable bytes at DRAM speed."""
    return 1e3 * attention_o_ideal_bytes(task) / hw.dram_bytes_per_s


def roofline_ms(task: AttentionOTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
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


FEATURES = (
    "log_rows", "log_ctx", "log_group", "log_kv_heads", "log_head_dim", "log_n", "window", "log_bn", "log_bno",
    "log_tiles", "log_warps", "stages", "log_programs", "values_per_thread", "log_roofline",
)


def features(task: AttentionOTask, s: Mapping[str, int], hw: Hopper = H200) -> list[float]:
    """The learned model's inputs for one fused attention and o projection (task, schedule)."""
    lg = lambda v: math.log2(max(1.0, float(v)))  # noqa: E731
    return [
        lg(task.rows), lg(task.ctx), lg(task.q_heads // max(1, task.kv_heads)), lg(task.kv_heads),
        lg(task.head_dim), lg(task.n), float(task.window), lg(s["bn"]), lg(s["bno"]), lg(s["tiles"]),
        lg(s["num_warps"]), float(s["num_stages"]), lg(attention_o_programs(task, s)),
        attention_o_values_per_thread(task, s), math.log(roofline_ms(task, s, hw)),
    ]
