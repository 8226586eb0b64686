"""The qgemm family: an int4 weight GEMM (``ix.qlinear``) with its fused epilogue, as a GEMV for
decode rows or tiles on ``tl.dot`` for prefill. ``codegen`` generates, ``heuristic`` schedules,
``schedule`` says what a schedule may be.

Not tuned yet: it has no task, space or cost model, so ``schedule_type`` stays None (no record
looked up, its kernels counted among the fallbacks as "not tuned"), but its heuristic picks a
schedule per row bucket: a decode kernel is generated for each batch bucket (a GEMV for one row,
the dot path for more), as the bf16 GEMMs are. ``parse_schedule`` states the validity rules, for
schedules given to ``codegen.generate`` directly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferx.compiler.families.common.errors import CodegenError
from inferx.compiler.families.interface import KernelFamily
from inferx.compiler.families.qgemm import codegen, heuristic, schedule
from inferx.compiler.families.qgemm.schedule import QGemmSchedule
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource


class QGemmFamily(KernelFamily):
    name = codegen.TEMPLATE
    anchors = (nn.QLinearOp,)

    def applies(self, kernel: KernelOp) -> str | None:
        return codegen.applies(kernel)

    def generate(self, kernel: KernelOp, name: str, schedule: Any, target: str, overlap: bool,
                 grid_wait: bool) -> KernelSource:
        return codegen.generate(kernel, name, schedule or heuristic.heuristic_schedule(kernel, target))

    def heuristic(self, kernel: KernelOp, target: str, rows: int | None) -> Any:
        return heuristic.heuristic_schedule(kernel, target, rows)

    def check_schedule(self, name: str, schedule: Any) -> None:
        if schedule is not None and not isinstance(schedule, QGemmSchedule):
            raise CodegenError(f"kernel {name}: a {type(schedule).__name__} cannot schedule a qgemm kernel")

    def per_batch(self, kernel: KernelOp) -> bool:
        """A decode kernel (its rows are the batch: no ``seq`` among them)."""
        return heuristic.decode_rows(kernel)

    def parse_schedule(self, d: Mapping[str, Any]) -> Any:
        return schedule.qgemm_schedule(d)

    def launch_cost(self) -> dict[str, Any]:
        return {"kv": "seq", "per_row": False, "flops": "largest_int4_weight"}


FAMILY = QGemmFamily()
