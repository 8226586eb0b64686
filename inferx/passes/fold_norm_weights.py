"""fold-norm-weights: an RMSNorm's scale moves into the weights of the linears it feeds.

    %n = ix.rmsnorm %x, %g           %n = ix.rmsnorm %x, %ones
    %y = ix.linear %n, %w      ->    %w2 = ix.mul %w, %g          (weight-only: folded at compile time)
                                     %y = ix.linear %n, %w2

``(x * r * g) @ W^T = (x * r) @ (W * g)^T`` for the row scale ``r`` and the scale ``g`` along K,
so the product is unchanged (up to one rounding of ``W * g`` in the weight dtype). What it buys:
the GEMM template no longer has to scale each loaded tile of x before the dot. A tile used as
loaded goes straight from the pipelined shared-memory buffers to the tensor cores; a tile
rescaled in registers does not, which makes prefill GEMMs behind a norm up to about twice as
slow (docs/performance.md).

Applies to an ``ix.rmsnorm`` whose scale is weight-only (computed from ``ix.weight`` and
``ix.constant`` alone) and whose every user is an ``ix.linear`` reading it as the input, in the
"nk" layout, with a weight-only weight. The scale becomes a splat of ones (which the GEMM
template skips). A weight shared with other users (a tied lm_head) gets a scaled copy; the
original stays for them. Runs after merge-gemms (so q/k/v share one scaled weight), before fuse.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FloatAttr, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir.types import TensorType
from inferx.passes.canonicalize_rules import FLOAT_ATTR_TYPES
from inferx.passes.fuse import CONSTANT_SOURCES


def weight_only(v: SSAValue) -> bool:
    """Whether ``v`` is computed from weights and constants alone (no function argument)."""
    seen: set[SSAValue] = set()
    stack = [v]
    while stack:
        cur = stack.pop()
        if cur in seen:
            continue
        seen.add(cur)
        owner = cur.owner
        if not isinstance(owner, Operation) or owner.regions:
            return False
        if not isinstance(owner, CONSTANT_SOURCES):
            if not owner.operands:
                return False
            stack.extend(owner.operands)
    return True


def is_ones(v: SSAValue) -> bool:
    """Whether ``v`` is a splat ``ix.constant`` of 1.0."""
    owner = v.owner
    if not isinstance(owner, t.ConstantOp):
        return False
    value = owner.attributes.get("value")
    return isinstance(value, FloatAttr) and value.value.data == 1.0


def _foldable(norm: nn.RMSNormOp) -> list[nn.LinearOp] | None:
    if is_ones(norm.weight) or not weight_only(norm.weight):
        return None
    users = [u.operation for u in norm.result.uses]
    if not users:
        return None
    for u in users:
        if not (isinstance(u, nn.LinearOp) and u.input == norm.result and u.bias != norm.result
                and u.weight != norm.result and weight_only(u.weight)):
            return None
        layout = u.attributes.get("w_layout", StringAttr("nk"))
        if layout != StringAttr("nk"):
            return None
    return list(dict.fromkeys(users))  # type: ignore[arg-type]


@dataclass(frozen=True)
class FoldNormWeights(ModulePass):
    name = "fold-norm-weights"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for norm in [o for o in op.walk() if isinstance(o, nn.RMSNormOp)]:
            linears = _foldable(norm)
            if linears is not None:
                _fold(norm, linears)


def _fold(norm: nn.RMSNormOp, linears: list[nn.LinearOp]) -> None:
    g = norm.weight
    g_t = g.type
    assert isinstance(g_t, TensorType)
    for lin in linears:
        w = lin.weight
        scaled = t.MulOp.make(w, g)
        Rewriter.insert_op(scaled, InsertPoint.before(lin))
        lin.operands = [scaled.results[0] if v == w and i == 1 else v for i, v in enumerate(lin.operands)]
    ones = t.ConstantOp.make(result_types=[g_t], value=FloatAttr(1.0, FLOAT_ATTR_TYPES[g_t.dtype]))
    Rewriter.insert_op(ones, InsertPoint.before(norm))
    norm.operands = [ones.results[0] if i == 1 else v for i, v in enumerate(norm.operands)]

