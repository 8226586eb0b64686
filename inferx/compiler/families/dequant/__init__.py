"""The dequant family: an int4 weight dequantized once into a buffer of x's dtype for a prompt's
int4 GEMM (``ix.dequantize``, read through ``ix.qlinear``'s ``dense``). Its kernels are made by
the ``dense-prompt-weights`` pass, one before each such GEMM. Not tuned: its schedule is its row
bucket's, a plain streaming kernel from ``min_rows`` rows and an empty launch below."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.passes import ModulePass

from inferx.compiler.families.dequant import codegen
from inferx.compiler.families.dequant.dense_prompt_weights import DensePromptWeights
from inferx.compiler.families.interface import KernelFamily
from inferx.compiler.ir.ops_base import get_int
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource


class DequantFamily(KernelFamily):
    name = codegen.TEMPLATE
    schedule_type = codegen.DequantSchedule

    @property
    def tunable(self) -> bool:
        """Not searched: the schedule says only whether the row bucket's launch runs."""
        return False

    def applies(self, kernel: KernelOp) -> str | None:
        return codegen.applies(kernel)

    def generate(self, kernel: KernelOp, name: str, schedule: Any, target: str, overlap: bool,
                 grid_wait: bool) -> KernelSource:
        return codegen.generate(kernel, name, schedule or codegen.heuristic_schedule(kernel, target, None))

    def heuristic(self, kernel: KernelOp, target: str, rows: int | None) -> Any:
        return codegen.heuristic_schedule(kernel, target, rows) if codegen.applies(kernel) is None else None

    def row_buckets(self, kernel: KernelOp, batches: Sequence[int], max_seq_len: int) -> list[int | None]:
        """Prompts below ``min_rows`` (an empty launch), and any longer one: the bucket bounds the
        reading GEMM switches at (``min_rows`` - 1 is one of its row buckets)."""
        low = get_int(codegen.dequantize_of(kernel).attributes, "min_rows") - 1
        return [low, None] if low >= 1 else [None]

    def launch_cost(self) -> dict[str, Any]:
        return {"kv": "seq", "per_row": False, "flops": "none"}

    def passes(self) -> tuple[type[ModulePass], ...]:
        return (DensePromptWeights,)


FAMILY = DequantFamily()
