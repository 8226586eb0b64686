"""The row-wise families, one program per row: ``gather`` (embedding lookups and the last
token of each prompt), ``reduction`` (softmax, norms and reductions over the last dim, with
their epilogues) and ``pointwise`` (anything else: the fallback every group binds to last).
None takes a schedule."""

from __future__ import annotations

from typing import Any

from inferx.compiler.families.interface import KernelFamily
from inferx.compiler.families.rowwise import codegen
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource


class GatherFamily(KernelFamily):
    name = "gather"
    anchors = (nn.EmbeddingOp, nn.LastTokenOp)

    def applies(self, kernel: KernelOp) -> str | None:
        return codegen.gather_applies(kernel)

    def generate(self, kernel: KernelOp, name: str, schedule: Any, target: str, overlap: bool,
                 grid_wait: bool) -> KernelSource:
        return codegen.gather(kernel, name)

    def launch_cost(self) -> dict[str, Any]:
        return {"kv": "seq", "per_row": True, "flops": "none"}


class ReductionFamily(KernelFamily):
    name = "reduction"
    anchors = (nn.SoftmaxOp, nn.RMSNormOp, nn.LayerNormOp, t.ReduceSumOp, t.ReduceMeanOp, t.ReduceMaxOp)

    def applies(self, kernel: KernelOp) -> str | None:
        return codegen.reduction_applies(kernel)

    def generate(self, kernel: KernelOp, name: str, schedule: Any, target: str, overlap: bool,
                 grid_wait: bool) -> KernelSource:
        return codegen.reduction(kernel, name)


class PointwiseFamily(KernelFamily):
    name = "pointwise"
    fallback = True

    def generate(self, kernel: KernelOp, name: str, schedule: Any, target: str, overlap: bool,
                 grid_wait: bool) -> KernelSource:
        return codegen.pointwise(kernel, name)


GATHER = GatherFamily()
REDUCTION = ReductionFamily()
POINTWISE = PointwiseFamily()
