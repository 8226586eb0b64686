"""The Hopper parts kernels are scheduled for: the figures constraints, heuristics and cost models
share. Bandwidth and tensor-core peak are what a good kernel reaches, not the data sheet's."""

from __future__ import annotations

from dataclasses import dataclass

# Streaming multiprocessors of an H100/H200 (SXM): what grids are sized against.
HOPPER_SMS = 132

DTYPE_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "i8": 1, "i32": 4}


@dataclass(frozen=True)
class Hopper:
    """The figures of one Hopper part the constraints and the roofline model use. Bandwidth and
    tensor-core peak are what a good kernel reaches, not the data sheet's."""

    name: str = "h200"
    sms: int = 132
    smem_per_block: int = 232448  # 227 KB of dynamic shared memory per block
    smem_per_sm: int = 233472  # 228 KB per SM
    regs_per_sm: int = 65536
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    l2_bytes: int = 50 * 1024 * 1024
    dram_bytes_per_s: float = 4.2e12
    tensor_flops: float = 700e12  # bf16/f16 dense through wgmma
    mma_flops: float = 350e12  # tensor cores without wgmma (BM < 64 or fewer than 4 warps)
    fma_flops: float = 60e12  # CUDA cores (GEMV mode multiplies and reduces)
    dram_latency_s: float = 700e-9
    # fixed cost of a launch in a CUDA graph (its start, the ramp to full bandwidth, its drain): a
    # chain of plain streaming kernels fits about this per launch on Hopper (``inferx bench``)
    launch_s: float = 2.3e-6
    max_acc_regs: int = 128  # fp32 accumulator values per thread before spills threaten


H200 = Hopper()
H100 = Hopper(name="h100", l2_bytes=50 * 1024 * 1024, dram_bytes_per_s=3.0e12)
HARDWARE = {"h200": H200, "h100": H100, "sm_90": H200}
