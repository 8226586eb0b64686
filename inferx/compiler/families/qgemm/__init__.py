"""The qgemm family: an int4 weight GEMM (``ix.qlinear``) with its fused prologue (an RMSNorm)
and epilogue, as a GEMV for one decode row or tiles on ``tl.dot`` for more. ``codegen``
generates, ``heuristic`` schedules without a record, ``schedule`` says what a schedule may be,
``task``/``space``/``cost`` serve the tuner.

Tuned where records exist: a kernel's task (``task.QGemmTask``) is looked up in the tuning
database at each row bucket it is generated for (a decode kernel at each batch bucket, a
prefill kernel at each of ``heuristic.PREFILL_ROW_BUCKETS`` below ``max_seq_len``'s and at
``max_seq_len``'s), and its heuristic schedule is used where there is no
record (counted among the fallbacks as "no record")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from inferx.compiler.families.common.hardware import H200, Hopper
from inferx.compiler.families.common.keys import rows_bucket
from inferx.compiler.families.interface import AnyTask, KernelFamily
from inferx.compiler.families.qgemm import codegen, cost, heuristic, schedule, space, task
from inferx.compiler.families.qgemm.schedule import QGemmSchedule
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource


class QGemmFamily(KernelFamily):
    name = codegen.TEMPLATE
    anchors = (nn.QLinearOp,)
    schedule_type = QGemmSchedule
    feature_names = cost.FEATURES
    cost_model: ClassVar[Any] = cost

    def applies(self, kernel: KernelOp) -> str | None:
        return codegen.applies(kernel)

    def generate(self, kernel: KernelOp, name: str, schedule: Any, target: str, overlap: bool,
                 grid_wait: bool) -> KernelSource:
        return codegen.generate(kernel, name, schedule or heuristic.heuristic_schedule(kernel, target))

    def heuristic(self, kernel: KernelOp, target: str, rows: int | None) -> Any:
        return heuristic.heuristic_schedule(kernel, target, rows)

    def per_batch(self, kernel: KernelOp) -> bool:
        """A decode kernel (its rows are the batch: no ``seq`` among them)."""
        return heuristic.decode_rows(kernel)

    def row_buckets(self, kernel: KernelOp, batches: Sequence[int], max_seq_len: int) -> list[int | None]:
        """Decode: each batch bucket. Prefill: prompts of up to each of ``PREFILL_ROW_BUCKETS``
        rows below ``max_seq_len``'s bucket (few rows are bound by the codes' bytes, many by the
        tensor cores), and None (any longer prompt, keyed at ``max_seq_len``)."""
        if self.per_batch(kernel):
            return list(batches)
        return [b for b in heuristic.PREFILL_ROW_BUCKETS if b < rows_bucket(max_seq_len)] + [None]

    def parse_schedule(self, d: Mapping[str, Any]) -> Any:
        return schedule.qgemm_schedule(d)

    def record_fits(self, t: AnyTask, s: Any) -> str | None:
        """BK against the task's quantization group and K (``schedule.check_fits``)."""
        assert isinstance(t, task.QGemmTask)
        return schedule.check_fits(s, t.group, t.k)

    def task(self, kernel: KernelOp, rows: int, max_seq_len: int) -> AnyTask:
        return task.qgemm_task(kernel, rows)

    def task_from_json(self, d: Mapping[str, Any]) -> AnyTask:
        return task.QGemmTask.from_json(dict(d))

    def space(self, hw: Hopper = H200) -> Any:
        return space.QGemmSpace(hw)

    def neighbours(self, t: AnyTask, rows: int) -> list[AnyTask]:
        """A prefill task at another row bucket (a long prompt's tiles fill the SMs many times
        over at either); none for decode."""
        assert isinstance(t, task.QGemmTask)
        return [replace(t, rows=rows)] if t.shape == "prefill" else []

    def smem_bytes(self, t: AnyTask, s: Mapping[str, int]) -> int:
        return space.smem_bytes(t, s)  # type: ignore[arg-type]

    def launch_cost(self) -> dict[str, Any]:
        return {"kv": "seq", "per_row": False, "flops": "largest_int4_weight"}


FAMILY = QGemmFamily()
