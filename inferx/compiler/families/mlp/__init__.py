"""The fused decode MLP family: a decoder layer's gated MLP (norm, gate|up GEMV, activation,
down GEMV, residual) as one kernel for decode buckets of up to 8 rows, made by the
``fuse-decode-mlp`` pass from the two GEMM kernels it replaces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from xdsl.passes import ModulePass

from inferx.compiler.families.common.hardware import H200, Hopper
from inferx.compiler.families.interface import AnyTask, KernelFamily
from inferx.compiler.families.mlp import codegen, cost, schedule, space, task
from inferx.compiler.families.mlp.fuse_decode_mlp import FuseDecodeMlp
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource


class MlpFamily(KernelFamily):
    name = "mlp"
    fuses = "decode MLPs"
    takes = ("a gated MLP with an RMSNorm prologue, no biases and weights stored [N, K] "
             "(inferx/compiler/families/mlp/codegen.py)")
    schedule_type = codegen.MlpSchedule
    feature_names = cost.FEATURES
    cost_model: ClassVar[Any] = cost

    def applies(self, kernel: KernelOp) -> str | None:
        return codegen.applies(kernel)

    def generate(self, kernel: KernelOp, name: str, schedule: Any, target: str, overlap: bool,
                 grid_wait: bool) -> KernelSource:
        return codegen.generate(kernel, name, schedule, target)

    def heuristic(self, kernel: KernelOp, target: str, rows: int | None) -> Any:
        return codegen.heuristic_schedule(kernel, target, rows) if codegen.applies(kernel) is None else None

    def parse_schedule(self, d: Mapping[str, Any]) -> Any:
        return schedule.mlp_schedule(d)

    def per_batch(self, kernel: KernelOp) -> bool:
        return True

    def task(self, kernel: KernelOp, rows: int, max_seq_len: int) -> AnyTask:
        return task.mlp_task(kernel, rows)

    def task_from_json(self, d: Mapping[str, Any]) -> AnyTask:
        return task.MlpTask.from_json(dict(d))

    def space(self, hw: Hopper = H200) -> Any:
        return space.MlpSpace(hw)

    def smem_bytes(self, t: AnyTask, s: Mapping[str, int]) -> int:
        return space.mlp_smem_bytes(t, s)  # type: ignore[arg-type]

    def launch_cost(self) -> dict[str, Any]:
        return {"kv": "seq", "per_row": False, "flops": "two_largest_weights"}

    def passes(self) -> tuple[type[ModulePass], ...]:
        return (FuseDecodeMlp,)


FAMILY = MlpFamily()
