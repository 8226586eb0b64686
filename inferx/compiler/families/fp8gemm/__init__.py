"""The fp8gemm family: an FP8 W8A8 GEMM (``ix.fp8_linear``: E4M3 weights with channel scales,
x quantized per token in the kernel) with its fused prologue (an RMSNorm) and epilogue, on
``tl.dot`` tiles (FP8 wgmma on sm_90). ``codegen`` generates and holds the schedule and its
heuristic. Not tuned yet: every kernel runs the heuristic's schedule, by row bucket (decode:
each batch bucket; prompts: one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferx.compiler.families.fp8gemm import codegen
from inferx.compiler.families.interface import KernelFamily
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource


class Fp8GemmFamily(KernelFamily):
    name = codegen.TEMPLATE
    anchors = (nn.Fp8LinearOp,)
    schedule_type = codegen.Fp8GemmSchedule

    @property
    def tunable(self) -> bool:
        """No task, space or cost model yet: the heuristic's schedule everywhere."""
        return False

    def applies(self, kernel: KernelOp) -> str | None:
        return codegen.applies(kernel)

    def generate(self, kernel: KernelOp, name: str, schedule: Any, target: str, overlap: bool,
                 grid_wait: bool) -> KernelSource:
        return codegen.generate(kernel, name, schedule or codegen.heuristic_schedule(kernel, target))

    def heuristic(self, kernel: KernelOp, target: str, rows: int | None) -> Any:
        return codegen.heuristic_schedule(kernel, target, rows) if codegen.applies(kernel) is None else None

    def per_batch(self, kernel: KernelOp) -> bool:
        return codegen.applies(kernel) is None and codegen.decode_rows(kernel)

    def parse_schedule(self, d: Mapping[str, Any]) -> Any:
        return codegen.fp8gemm_schedule(dict(d))

    def launch_cost(self) -> dict[str, Any]:
        return {"kv": "seq", "per_row": False, "flops": "largest_fp8_weight"}


FAMILY = Fp8GemmFamily()
