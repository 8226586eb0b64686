"""fuse-decode-mlp: a decode step's gate|up GEMM kernel and the down-projection kernel that reads
its only result become one ``ix.kernel "mlp"``, so a decoder layer's MLP is one launch.

    %h = ix.kernel <GEMM> (%x, %g, %w1) { rmsnorm, linear, gate|up slices, silu, mul; ix.yield %m }
    %y = ix.kernel <GEMM> (%h, %w2, %res) { ^bb0(%a, ...): linear %a, ...; add %res, ...; ix.yield }
becomes
    %y = ix.kernel "mlp" (%x, %g, %w1, %w2, %res) { rmsnorm, linear, ..., mul, linear, add; ix.yield }

Expects fused IR (runs after fuse and norm-stats). Applies where the first kernel has one result,
read only by the second kernel as the input of the linear that starts its body, the first
kernel's rows hold no ``seq`` (decode), and the merged body is one the mlp template implements
(``codegen.mlp.applies``: a gated MLP with an RMSNorm prologue, no biases, weights stored [N, K]);
other kernels are left as they are. Guarantees: the module computes what it computed before (the
body is the two bodies joined), one kernel fewer per merged pair. Not in the default pipeline:
the compiler runs it when asked (``--fuse-mlp``), for decode buckets of up to 8 rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.passes import ModulePass

from inferx.compiler.families.mlp import codegen as mlp
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.passes.kernel_pairs import join, linear_reader


@dataclass(frozen=True)
class FuseDecodeMlp(ModulePass):
    name = "fuse-decode-mlp"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [o for o in op.ops if isinstance(o, FuncOp)]:
            for first in [o for o in func.body.block.ops if isinstance(o, KernelOp)]:
                second = linear_reader(first) if any(isinstance(o, nn.LinearOp) for o in first.body.block.ops) \
                    else None
                if second is not None:
                    join(first, second, "mlp", mlp.applies)
