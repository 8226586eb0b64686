"""The fp8gemm template's cost: its roofline bound, the analytical time of a schedule and the
learned model's features.

An FP8 GEMM is costed as the gemm template's model costs the same tiles (``space.as_gemm``: a
byte a weight, x as it arrives) on tensor cores of twice the bf16 rate (FP8 wgmma), plus, where
the kernel finds each row's scale itself, the pass over x's rows that each column of programs
makes before its K loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from inferx.compiler.families.common.cost import out_bytes
from inferx.compiler.families.common.hardware import DTYPE_BYTES, H200, Hopper
from inferx.compiler.families.fp8gemm.space import as_gemm
from inferx.compiler.families.fp8gemm.task import Fp8GemmTask
from inferx.compiler.families.gemm import cost as gemm_cost
from inferx.compiler.families.gemm import space as gemm_space

FP8_RATE = 2.0  # FP8 tensor-core throughput over bf16's (dense wgmma and mma on Hopper)


def fp8_part(hw: Hopper) -> Hopper:
    """``hw`` with its tensor cores at FP8's rate."""
    return replace(hw, tensor_flops=hw.tensor_flops * FP8_RATE, mma_flops=hw.mma_flops * FP8_RATE)


def ideal_bytes(task: Fp8GemmTask) -> float:
    """DRAM bytes no schedule can avoid: the E4M3 weight and its channel scales, x (and its row
    scales where it arrives E4M3) and the output, once each."""
    x = task.rows * task.k * (1 if task.x_scale == "given" else DTYPE_BYTES.get(task.x_dtype, 4))
    row_scales = 4 * task.rows if task.x_scale == "given" else 0
    return task.k * task.n + 4 * task.n + x + row_scales + task.rows * task.tile_n * out_bytes(task)


def bound_ms(task: Fp8GemmTask, hw: Hopper = H200) -> float:
    """The larger of the task's unavoidable bytes at DRAM speed and its FLOPs at FP8's peak."""
    flops = 2.0 * task.rows * task.k * task.n
    return 1e3 * max(ideal_bytes(task) / hw.dram_bytes_per_s, flops / (hw.tensor_flops * FP8_RATE))


def roofline_ms(task: Fp8GemmTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
    """The analytical time of one launch of ``task`` under ``s`` (module docstring)."""
    g = as_gemm(task)
    ms = gemm_cost.roofline_ms(g, s, fp8_part(hw))
    if task.x_scale == "token":  # each column of programs reads its rows of x once more first
        _, gn = gemm_space.grid(g, s)
        x_bytes = task.rows * task.k * DTYPE_BYTES.get(task.x_dtype, 4)
        ms += 1e3 * gn * x_bytes * min(1.0, x_bytes / hw.l2_bytes) / hw.dram_bytes_per_s
    return ms


FEATURES = (*gemm_cost.FEATURES, "x_given", "x_static")


def features(task: Fp8GemmTask, s: Mapping[str, int], hw: Hopper = H200) -> list[float]:
    """The learned model's inputs for one (task, schedule), named by ``FEATURES``: the gemm
    model's on the same tiles at FP8's rate (its roofline term this model's), and how x is scaled."""
    out = gemm_cost.features(as_gemm(task), s, fp8_part(hw), roofline=roofline_ms(task, s, hw))
    return [*out, float(task.x_scale == "given"), float(task.x_scale == "static")]
