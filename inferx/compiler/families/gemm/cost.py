"""The GEMM template's cost: its roofline bound, the analytical time of a schedule and the
learned model's features.

The analytical time (``roofline_ms``): DRAM bytes (weights read once per row-block of programs,
x once per column-block, re-reads beyond the L2 discounted), FLOPs on wgmma, mma or CUDA cores
depending on the tile, the bytes in flight that keep DRAM busy (Little's law), waves over 132
SMs with occupancy from shared memory and registers, a launch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from inferx.compiler.families.common.cost import out_bytes
from inferx.compiler.families.common.hardware import DTYPE_BYTES, H200, Hopper
from inferx.compiler.families.gemm.codegen import GEMV_MAX_ROWS
from inferx.compiler.families.gemm.space import (
    acc_values_per_thread,
    blocks_per_sm,
    grid,
    programs,
    smem_bytes,
    wave_efficiency,
    weight_tiles,
)
from inferx.compiler.families.gemm.task import Task


def problem(task: Task) -> tuple[int, int, int, int]:
    """(M, K, N, N out): M the row bucket, N the weight's columns (both halves of a gated GEMM),
    N out the columns written."""
    return task.rows, task.k, task.n, task.tile_n


def ideal_bytes(task: Task) -> float:
    """DRAM bytes no schedule can avoid: weights, x and the output once each."""
    m, k, n, n_out = problem(task)
    return (k * n * DTYPE_BYTES.get(task.w_dtype, 4) + m * k * DTYPE_BYTES.get(task.x_dtype, 4)
            + m * n_out * out_bytes(task))


def flops(task: Task) -> float:
    m, k, n, _ = problem(task)
    return 2.0 * m * k * n


def bound_ms(task: Task, hw: Hopper = H200) -> float:
    """The larger of the task's unavoidable bytes at DRAM speed and its FLOPs at the tensor-core
    peak (GEMV-shaped tasks, one row, never reach tensor cores)."""
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
    split = s.get("split_k", 1)
    dram = (w_bytes * (1 + (gm - 1) * w_miss) + x_bytes * (1 + (gn - 1) * x_miss)
            + m * n_out * out_bytes(task))
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


FEATURES = (
    "log_m", "log_k", "log_n", "log_tile_n", "decode", "gated", "rope", "norm", "residual", "wbytes",
    "log_bm", "log_bn", "log_bk", "log_warps", "stages", "gemv", "log_programs", "wave_eff", "occupancy",
    "log_smem", "acc_per_thread", "k_steps", "log_split_k", "log_roofline", "tma", "persistent",
    "log_group_m", "unroll", "defer",
)


def features(task: Task, s: Mapping[str, int], hw: Hopper = H200, roofline: float | None = None) -> list[float]:
    """The learned model's inputs for one (task, schedule), named by ``FEATURES``; ``roofline``:
    the analytical time to take instead of this template's (a family costing its tiles as these)."""
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
        math.log(roofline_ms(task, s, hw) if roofline is None else roofline), float(s.get("tma", 0)),
        float(s.get("persistent", 0)),
        lg(s.get("group_m", 0)), float(s.get("unroll", 0)), float(s.get("defer", 0)),
    ]
