"""fuse-decode-attention-o: a decode step's attention kernel and the output-projection kernel that
reads its only result become one ``ix.kernel "attention_o"``, so a decoder layer's attention and
o projection are one launch.

    %a = ix.kernel <attention> (%q, %k, %v, %pos, %lens) { attention, transpose, reshape; ix.yield }
    %y = ix.kernel <GEMM> (%a, %wo, %res) { ^bb0(%x, ...): linear %x, ...; add %res, ...; ix.yield }
becomes
    %y = ix.kernel "attention_o" (%q, %k, %v, %pos, %lens, %wo, %res) { attention, ..., linear, add; ix.yield }

Expects fused IR (runs after fuse and norm-stats). Applies where the attention kernel has one
query per sequence (decode) and one result, read only by the next kernel as the input of the
linear that starts its body, and the joined body is one the attention_o template implements
(``codegen.attention_o.applies``: heads joined by transpose and reshape, a projection with no
bias stored [N, K]); other kernels are left as they are. Guarantees: the module computes what it
computed before, one kernel fewer per joined pair. Not in the default pipeline: the compiler runs
it when asked (``--fuse-attention-o``), for decode buckets of up to 8 rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.passes import ModulePass

from inferx.compiler.families.attention_o import codegen as attention_o
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.passes.kernel_pairs import join, linear_reader


@dataclass(frozen=True)
class FuseDecodeAttentionO(ModulePass):
    name = "fuse-decode-attention-o"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [o for o in op.ops if isinstance(o, FuncOp)]:
            for first in [o for o in func.body.block.ops if isinstance(o, KernelOp)]:
                if not isinstance(first.body.block.first_op, nn.AttentionOp):
                    continue
                second = linear_reader(first)  # the fused template's check says if it is decode
                if second is not None:
                    join(first, second, "attention_o", attention_o.applies)
