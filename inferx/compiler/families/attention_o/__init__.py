"""The fused decode attention and o projection family: a decoder layer's attention over the KV
cache and its output projection (with the residual) as one kernel for decode buckets of up to 8
rows, made by the ``fuse-decode-attention-o`` pass from the two kernels it replaces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from xdsl.passes import ModulePass

from inferx.compiler.families.attention_o import codegen, cost, schedule, space, task
from inferx.compiler.families.attention_o.fuse_decode_attention_o import FuseDecodeAttentionO
from inferx.compiler.families.common.hardware import H200, Hopper
from inferx.compiler.families.interface import AnyTask, KernelFamily
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource


class AttentionOFamily(KernelFamily):
    name = "attention_o"
    fuses = "decode attentions"
    takes = ("heads joined by transpose and reshape into a projection with no bias stored [N, K] "
             "(inferx/compiler/families/attention_o/codegen.py)")
    schedule_type = codegen.AttentionOSchedule
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
        return schedule.attention_o_schedule(d)

    def per_batch(self, kernel: KernelOp) -> bool:
        return True

    def task(self, kernel: KernelOp, rows: int, max_seq_len: int) -> AnyTask:
        return task.attention_o_task(kernel, rows, max_seq_len)

    def task_from_json(self, d: Mapping[str, Any]) -> AnyTask:
        return task.AttentionOTask.from_json(dict(d))

    def space(self, hw: Hopper = H200) -> Any:
        return space.AttentionOSpace(hw)

    def launch_cost(self) -> dict[str, Any]:
        return {"kv": "context", "per_row": False, "flops": "queries_by_context"}

    def passes(self) -> tuple[type[ModulePass], ...]:
        return (FuseDecodeAttentionO,)


FAMILY = AttentionOFamily()
