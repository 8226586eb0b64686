"""The attention family: scaled dot-product attention over the KV cache (causal, windowed,
soft-capped, GQA), split over the context for decode (partials merged by the last program to
arrive) and tiled over queries for prefill."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from inferx.compiler.families.attention import codegen, cost, schedule, space, task
from inferx.compiler.families.common.hardware import H200, Hopper
from inferx.compiler.families.interface import AnyTask, KernelFamily
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource


class AttentionFamily(KernelFamily):
    name = "attention"
    anchors = (nn.AttentionOp,)
    schedule_type = codegen.AttentionSchedule
    feature_names = cost.FEATURES
    cost_model: ClassVar[Any] = cost

    def applies(self, kernel: KernelOp) -> str | None:
        return codegen.applies(kernel)

    def generate(self, kernel: KernelOp, name: str, schedule: Any, target: str, overlap: bool,
                 grid_wait: bool) -> KernelSource:
        return codegen.generate(kernel, name, target, schedule)

    def heuristic(self, kernel: KernelOp, target: str, rows: int | None) -> Any:
        return codegen.heuristic_schedule(kernel, target, rows) if codegen.applies(kernel) is None else None

    def parse_schedule(self, d: Mapping[str, Any]) -> Any:
        return schedule.attention_schedule(d)

    def per_batch(self, kernel: KernelOp) -> bool:
        """Decode attention (one query per sequence): split-KV wants fewer context slices as the
        batch fills the chip."""
        return codegen.applies(kernel) is None and codegen.is_decode(kernel)

    def task(self, kernel: KernelOp, rows: int, max_seq_len: int) -> AnyTask:
        return task.attention_task(kernel, rows, max_seq_len)

    def task_from_json(self, d: Mapping[str, Any]) -> AnyTask:
        return task.AttentionTask.from_json(dict(d))

    def space(self, hw: Hopper = H200) -> Any:
        return space.AttentionSpace(hw)

    def neighbours(self, t: AnyTask, rows: int) -> list[AnyTask]:
        """The task at ``rows`` with its context scaled alike, then with its own context."""
        assert isinstance(t, task.AttentionTask)
        if t.shape != "prefill":
            return []
        return [replace(t, rows=rows, ctx=max(1, t.ctx * rows // t.rows)), replace(t, rows=rows)]

    def smem_bytes(self, t: AnyTask, s: Mapping[str, int]) -> int:
        return space.attention_smem_bytes(t, s)  # type: ignore[arg-type]

    def launch_cost(self) -> dict[str, Any]:
        return {"kv": "context", "per_row": False, "flops": "queries_by_context"}


FAMILY = AttentionFamily()
