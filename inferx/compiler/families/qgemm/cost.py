"""The qgemm template's cost: its roofline bound, the analytical time of a schedule and the
learned model's features.

The weight is read as packed codes, half a byte a weight, with one scale (and minimum) per row
per group. The analytical time (``roofline_ms``), a simple estimate in the gemm family's form:
DRAM bytes (the codes once per row-block of programs, x once per column-block, re-reads beyond
the L2 discounted) at the bandwidth the bytes in flight sustain (Little's law); the CUDA-core
instructions that unpack and dequantize every code once per row-block of programs (in GEMV mode
the products too), or on the dot path the tensor cores' time where it is longer; waves over the
SMs; a serial K loop; a launch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from inferx.compiler.families.common.cost import out_bytes
from inferx.compiler.families.common.hardware import DTYPE_BYTES, H200, Hopper
from inferx.compiler.families.qgemm.space import (
    blocks_per_sm,
    gemv,
    grid,
    programs,
    smem_bytes,
    step_bytes,
    values_per_thread,
    wave_efficiency,
    weight_tiles,
)
from inferx.compiler.families.qgemm.task import QGemmTask

# CUDA-core instructions a code costs to unpack, dequantize and multiply: the one-row GEMV's loop
# counts 5.2-6.7 a code (docs/performance.md, SASS on sm_90). The dot path's count (7.7, before its
# codes went to the tensor cores as 128 + q) would make the 8B gate|up at 16 rows 27 us; it was
# measured at 14.1 us, about its bytes' time, so the model takes 4.
GEMV_OPS_PER_CODE = 6.0
DOT_OPS_PER_CODE = 4.0


def weight_bytes(task: QGemmTask) -> float:
    """The weight as stored: codes N x K / 2, a scale per row per group, a minimum too with
    ``mins``."""
    per_group = DTYPE_BYTES.get(task.scales_dtype, 4) * (2 if task.mins else 1)
    return task.n * task.k / 2 + task.n * (task.k // task.group) * per_group


def ideal_bytes(task: QGemmTask) -> float:
    """DRAM bytes no schedule can avoid: the weight (``weight_bytes``), x, the column scale and
    the norm's weight, the bias, the output, each once."""
    xb = DTYPE_BYTES.get(task.x_dtype, 4)
    vectors = task.k * xb * (int(task.col_scale) + int(task.prologue != "none"))
    bias = task.n * DTYPE_BYTES.get(task.scales_dtype, 4) if task.bias else 0
    return (weight_bytes(task) + task.rows * task.k * xb + vectors + bias
            + task.rows * task.tile_n * out_bytes(task))


def flops(task: QGemmTask) -> float:
    return 2.0 * task.rows * task.k * task.n


def bound_ms(task: QGemmTask, hw: Hopper = H200) -> float:
    """The larger of the task's unavoidable bytes at the copy rate and its FLOPs at the
    tensor-core peak."""
    return 1e3 * max(ideal_bytes(task) / hw.dram_bytes_per_s, flops(task) / hw.tensor_flops)


def roofline_ms(task: QGemmTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
    """The analytical time of one launch of ``task`` under schedule ``s`` (see the module doc)."""
    m, k, n = task.rows, task.k, task.n
    gm, gn = grid(task, s)
    xb = DTYPE_BYTES.get(task.x_dtype, 4)
    w_bytes, x_bytes = weight_bytes(task), m * k * xb
    w_miss, x_miss = min(1.0, w_bytes / hw.l2_bytes), min(1.0, x_bytes / hw.l2_bytes)
    dram = (ideal_bytes(task) + w_bytes * (gm - 1) * w_miss + x_bytes * (gn - 1) * x_miss)
    slots = hw.sms * max(1, blocks_per_sm(task, s, hw))
    n_programs = programs(task, s)
    resident = min(n_programs, slots)
    ahead = s["num_stages"] - 1 + s.get("prefetch", 0)  # steps in flight beyond the one computed
    inflight = resident * step_bytes(task, s) * max(0.5, ahead)
    bw = hw.dram_bytes_per_s * min(1.0, inflight / (hw.dram_bytes_per_s * hw.dram_latency_s))
    mem_s = dram / bw
    # every row-block of programs unpacks and dequantizes the whole weight on CUDA cores
    ops_per_code = GEMV_OPS_PER_CODE if gemv(s) else DOT_OPS_PER_CODE
    unpack_s = gm * n * k * ops_per_code / (hw.fma_flops / 2)
    padded = gm * s["bm"] * gn * s["bn"] * weight_tiles(task)  # masked lanes compute too
    if gemv(s):  # the products are among the GEMV's instructions a code
        comp_s = unpack_s
    else:
        # wgmma tiles (BM >= 64) are fed from shared memory, at full rate from 128 x 256 tiles
        # (the gemm family's reuse); mma tiles take the unpacked codes from registers
        wgmma = s["bm"] >= 64 and s["num_warps"] >= 4
        peak = hw.tensor_flops if wgmma else hw.mma_flops
        reuse = min(1.0, (s["bm"] * s["bn"] / (s["bm"] + s["bn"])) / (128 * 256 / 384)) if wgmma else 1.0
        comp_s = max(2.0 * max(padded, m * n) * k / (peak * reuse), unpack_s)
    steps = math.ceil(k / (s["bk"] * s.get("split_k", 1)))
    waves = math.ceil(n_programs / slots)
    latency_s = waves * steps * hw.dram_latency_s / max(0.5, ahead) * 0.25
    eff = wave_efficiency(task, s, hw)
    return 1e3 * (max(mem_s, comp_s) / max(eff, 1e-3) ** 0.5 + latency_s + hw.launch_s)


FEATURES = (
    "log_m", "log_k", "log_tile_n", "decode", "gated", "norm", "mins", "log_group", "log_bm", "log_bn", "log_bk",
    "log_warps", "stages", "gemv", "log_programs", "wave_eff", "occupancy", "log_smem", "values_per_thread",
    "k_steps", "log_roofline", "log_split_k", "prefetch",
)


def features(task: QGemmTask, s: Mapping[str, int], hw: Hopper = H200) -> list[float]:
    """The learned model's inputs for one qgemm (task, schedule), named by ``FEATURES``."""
    lg = lambda v: math.log2(max(1.0, float(v)))  # noqa: E731
    return [
        lg(task.rows), lg(task.k), lg(task.tile_n), float(task.shape == "decode"), float(task.gated),
        float(task.prologue != "none"), float(task.mins), lg(task.group),
        lg(s["bm"]), lg(s["bn"]), lg(s["bk"]), lg(s["num_warps"]), float(s["num_stages"]), float(gemv(s)),
        lg(programs(task, s)), wave_efficiency(task, s, hw), float(blocks_per_sm(task, s, hw)),
        lg(smem_bytes(task, s)), values_per_thread(task, s), float(math.ceil(task.k / s["bk"])),
        math.log(roofline_ms(task, s, hw)), lg(s.get("split_k", 1)), float(s.get("prefetch", 0)),
    ]
