"""The fused decode MLP's cost: its roofline bound, the analytical time of a schedule and the
learned model's features.

The analytical time (``roofline_ms``): both weights at the bandwidth one program per SM keeps in
flight, its partial sums' atomics, the last arrival's tail, a launch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from inferx.compiler.families.common.cost import out_bytes
from inferx.compiler.families.common.hardware import DTYPE_BYTES, H200, Hopper
from inferx.compiler.families.mlp.space import mlp_programs, mlp_values_per_thread
from inferx.compiler.families.mlp.task import MlpTask


def mlp_ideal_bytes(task: MlpTask) -> float:
    """Both weights once, x, the residual and the output once each."""
    wb, xb = DTYPE_BYTES.get(task.w_dtype, 4), DTYPE_BYTES.get(task.x_dtype, 4)
    weights = (2 * task.i * task.k + task.n * task.i) * wb
    return weights + task.rows * (task.k * xb + task.n * (xb + out_bytes(task)))


def mlp_flops(task: MlpTask) -> float:
    return 2.0 * task.rows * (2 * task.i * task.k + task.n * task.i)


def bound_ms(task: MlpTask, hw: Hopper = H200) -> float:
    """The larger of the task's unavoidable bytes at DRAM speed and its FLOPs on CUDA cores."""
    return 1e3 * max(mlp_ideal_bytes(task) / hw.dram_bytes_per_s, mlp_flops(task) / hw.fma_flops)


def roofline_ms(task: MlpTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
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


FEATURES = (
    "log_rows", "log_k", "log_i", "log_n", "wbytes", "log_bi", "log_bk", "log_bn", "log_warps", "stages",
    "log_programs", "wave_eff", "values_per_thread", "k_steps", "n_steps", "log_roofline", "prefetch", "dot",
    "defer",
)


def features(task: MlpTask, s: Mapping[str, int], hw: Hopper = H200) -> list[float]:
    """The learned model's inputs for one fused-MLP (task, schedule), named by ``FEATURES``."""
    lg = lambda v: math.log2(max(1.0, float(v)))  # noqa: E731
    n_programs = mlp_programs(task, s)
    return [
        lg(task.rows), lg(task.k), lg(task.i), lg(task.n), float(DTYPE_BYTES.get(task.w_dtype, 4)),
        lg(s["bi"]), lg(s["bk"]), lg(s["bn"]), lg(s["num_warps"]), float(s["num_stages"]),
        lg(n_programs), n_programs / (math.ceil(n_programs / hw.sms) * hw.sms), mlp_values_per_thread(s),
        float(math.ceil(task.k / s["bk"])), float(math.ceil(task.n / s["bn"])), math.log(roofline_ms(task, s, hw)),
        float(s.get("prefetch", 0)), float(s.get("dot", 0)), float(s.get("defer", 0)),
    ]
