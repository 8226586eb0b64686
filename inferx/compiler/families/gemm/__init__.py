"""The GEMM family: a linear (or matmul) with its fused prologue (a norm) and epilogue (bias,
RoPE, KV-cache write, gated activation, residual), as a GEMV for decode rows or tiles on the
tensor cores for prefill. ``codegen`` generates, ``heuristic`` schedules without a record,
``schedule`` says what a schedule may be, ``task``/``space``/``cost`` serve the tuner."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from inferx.compiler.families.common.hardware import H200, Hopper
from inferx.compiler.families.common.keys import rows_bucket
from inferx.compiler.families.gemm import codegen, cost, heuristic, schedule, space, task
from inferx.compiler.families.interface import AnyTask, KernelFamily
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource


class GemmFamily(KernelFamily):
    name = "gemm"
    anchors = (nn.LinearOp, nn.MatmulOp)
    schedule_type = codegen.GemmSchedule
    optional_knobs = schedule.OPTIONAL_KNOBS
    feature_names = cost.FEATURES
    cost_model: ClassVar[Any] = cost

    def applies(self, kernel: KernelOp) -> str | None:
        return codegen.applies(kernel)

    def generate(self, kernel: KernelOp, name: str, schedule: Any, target: str, overlap: bool,
                 grid_wait: bool) -> KernelSource:
        if schedule is None:
            schedule = heuristic.heuristic_schedule(kernel, target)
        return codegen.generate(kernel, name, schedule, target=target, preload=overlap, grid_wait=grid_wait)

    def heuristic(self, kernel: KernelOp, target: str, rows: int | None) -> Any:
        return heuristic.heuristic_schedule(kernel, target, rows) if codegen.applies(kernel) is None else None

    def parse_schedule(self, d: Mapping[str, Any]) -> Any:
        return schedule.gemm_schedule(d)

    def per_batch(self, kernel: KernelOp) -> bool:
        return task.shape_of(kernel) == "decode"

    def row_buckets(self, kernel: KernelOp, batches: Sequence[int], max_seq_len: int) -> list[int | None]:
        """Decode: each batch bucket (one row streams weights best as a GEMV, many rows want the
        dot path). Prefill: prompts of up to each of ``PREFILL_ROW_BUCKETS`` rows below
        ``max_seq_len``'s bucket (tiles that fill the SMs at few rows), and None (any longer
        prompt, keyed at ``max_seq_len``)."""
        if self.per_batch(kernel):
            return list(batches)
        if codegen.applies(kernel) is None:
            return [b for b in codegen.PREFILL_ROW_BUCKETS if b < rows_bucket(max_seq_len)] + [None]
        return [None]

    def task(self, kernel: KernelOp, rows: int, max_seq_len: int) -> AnyTask:
        return task.gemm_task(kernel, rows)

    def task_from_json(self, d: Mapping[str, Any]) -> AnyTask:
        return task.Task.from_json(dict(d))

    def space(self, hw: Hopper = H200) -> Any:
        return space.GemmSpace(hw)

    def neighbours(self, t: AnyTask, rows: int) -> list[AnyTask]:
        assert isinstance(t, task.Task)
        return [replace(t, rows=rows)] if t.shape == "prefill" else []

    def smem_bytes(self, t: AnyTask, s: Mapping[str, int]) -> int:
        return space.smem_bytes(t, s)  # type: ignore[arg-type]

    def launch_cost(self) -> dict[str, Any]:
        return {"kv": "seq", "per_row": False, "flops": "largest_weight"}


FAMILY = GemmFamily()
