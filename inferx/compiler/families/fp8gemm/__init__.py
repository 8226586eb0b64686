"""The fp8gemm family: an FP8 W8A8 GEMM (``ix.fp8_linear``: E4M3 weights with channel scales,
x quantized per token in the kernel, by a static scale, or arriving E4M3 with its rows' scales)
with its fused prologue (an RMSNorm) and epilogue, on ``tl.dot`` tiles (FP8 wgmma on sm_90).
``codegen`` generates and holds the schedule and its heuristic; ``task``/``space``/``cost`` serve
the tuner.

Tuned where records exist: a kernel's task (``task.Fp8GemmTask``) is looked up in the tuning
database at each batch bucket for decode kernels, at ``max_seq_len``'s row bucket for prompt
kernels; the heuristic's schedule is used where there is no record (counted among the fallbacks
as "no record")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from inferx.compiler.families.common.hardware import H200, Hopper
from inferx.compiler.families.fp8gemm import codegen, cost, space, task
from inferx.compiler.families.interface import AnyTask, KernelFamily
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource


class Fp8GemmFamily(KernelFamily):
    name = codegen.TEMPLATE
    anchors = (nn.Fp8LinearOp,)
    schedule_type = codegen.Fp8GemmSchedule
    optional_knobs = codegen.OPTIONAL
    feature_names = cost.FEATURES
    cost_model: ClassVar[Any] = cost

    def applies(self, kernel: KernelOp) -> str | None:
        return codegen.applies(kernel)

    def generate(self, kernel: KernelOp, name: str, schedule: Any, target: str, overlap: bool,
                 grid_wait: bool) -> KernelSource:
        return codegen.generate(kernel, name, schedule or codegen.heuristic_schedule(kernel, target))

    def heuristic(self, kernel: KernelOp, target: str, rows: int | None) -> Any:
        return codegen.heuristic_schedule(kernel, target, rows) if codegen.applies(kernel) is None else None

    def at_rows(self, kernel: KernelOp, schedule: Any, rows: int | None) -> Any:
        """Whether the bucket reads x quantized once (``given``) follows from its rows."""
        return codegen.at_rows(kernel, schedule, rows)

    def per_batch(self, kernel: KernelOp) -> bool:
        return codegen.applies(kernel) is None and codegen.decode_rows(kernel)

    def parse_schedule(self, d: Mapping[str, Any]) -> Any:
        return codegen.fp8gemm_schedule(dict(d))

    def task(self, kernel: KernelOp, rows: int, max_seq_len: int) -> AnyTask:
        return task.fp8gemm_task(kernel, rows)

    def task_from_json(self, d: Mapping[str, Any]) -> AnyTask:
        return task.Fp8GemmTask.from_json(dict(d))

    def space(self, hw: Hopper = H200) -> Any:
        return space.Fp8GemmSpace(hw)

    def neighbours(self, t: AnyTask, rows: int) -> list[AnyTask]:
        """A prefill task at another row bucket (a long prompt's tiles fill the SMs many times
        over at either); none for decode."""
        assert isinstance(t, task.Fp8GemmTask)
        return [replace(t, rows=rows)] if t.shape == "prefill" else []

    def smem_bytes(self, t: AnyTask, s: Mapping[str, int]) -> int:
        return space.smem_bytes(t, s)  # type: ignore[arg-type]

    def launch_cost(self) -> dict[str, Any]:
        return {"kv": "seq", "per_row": False, "flops": "largest_fp8_weight"}


FAMILY = Fp8GemmFamily()
