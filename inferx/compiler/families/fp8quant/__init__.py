"""The fp8quant family: x quantized to E4M3 once (``ix.fp8_quantize``, after an RMSNorm where the
GEMM had one) for FP8 GEMMs: a prompt's, which then read ``row_scales``, and a large decode
batch's, which read ``given``. Its kernels are made by the ``fp8-inputs`` pass, one per input x.
Not tuned: its heuristic's schedule, an empty launch in the decode batch buckets below the
quantize's ``min_rows``."""

from __future__ import annotations

from typing import Any

from xdsl.passes import ModulePass

from inferx.compiler.families.fp8quant import codegen
from inferx.compiler.families.fp8quant.inputs import Fp8Inputs
from inferx.compiler.families.interface import KernelFamily
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource


class Fp8QuantFamily(KernelFamily):
    name = codegen.TEMPLATE
    schedule_type = codegen.Fp8QuantSchedule

    @property
    def tunable(self) -> bool:
        """Not searched: a streaming kernel, its heuristic's schedule."""
        return False

    def applies(self, kernel: KernelOp) -> str | None:
        return codegen.applies(kernel)

    def generate(self, kernel: KernelOp, name: str, schedule: Any, target: str, overlap: bool,
                 grid_wait: bool) -> KernelSource:
        return codegen.generate(kernel, name, schedule or codegen.heuristic_schedule(kernel, target, None))

    def heuristic(self, kernel: KernelOp, target: str, rows: int | None) -> Any:
        return codegen.heuristic_schedule(kernel, target, rows) if codegen.applies(kernel) is None else None

    def per_batch(self, kernel: KernelOp) -> bool:
        """x's rows are a decode batch: one kernel a batch bucket (an empty launch below ``min_rows``)."""
        return codegen.applies(kernel) is None and codegen.decode_rows(kernel)

    def launch_cost(self) -> dict[str, Any]:
        return {"kv": "seq", "per_row": False, "flops": "none"}

    def passes(self) -> tuple[type[ModulePass], ...]:
        return (Fp8Inputs,)


FAMILY = Fp8QuantFamily()
