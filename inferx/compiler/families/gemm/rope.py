"""RoPE in a GEMM's epilogue: the head dim the ropes rotate (the heuristic's and the task's
tiles); the columns, partners, tiles that hold partners and the rotation itself are
``common/rope.py``'s."""

from __future__ import annotations

from xdsl.ir import Operation

from inferx.compiler.families.common.errors import CodegenError
from inferx.compiler.families.common.rope import rope_regions
from inferx.compiler.families.common.tile import Emitter
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp


def rope_head_dim(kernel: KernelOp, lin: nn.LinearOp, epilogue: list[Operation]) -> int:
    """The one head dim the RoPEs of ``epilogue`` rotate; 0 where there is no RoPE, they differ,
    or their columns cannot be read (``generate`` reports that kernel)."""
    try:
        dims = {g.head_dim for g in rope_regions(Emitter(kernel, "rope"), lin, epilogue)}
    except CodegenError:
        return 0
    return dims.pop() if len(dims) == 1 else 0
