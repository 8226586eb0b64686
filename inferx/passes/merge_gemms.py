"""merge-gemms: linears that read the same input become one linear over concatenated weights.

    %q = ix.linear %x, %wq     %k = ix.linear %x, %wk     %v = ix.linear %x, %wv
      ->  %w = ix.concat %wq', %wk', %wv' {dim = 0}
          %qkv = ix.linear %x, %w
          %q, %k, %v = ix.split %qkv {dim = -1}

Expects verified IR. Merges a group of two or more ``ix.linear`` users of one value when every
weight (and every bias, if any has one) is a leaf ``ix.weight`` in the "nk" layout with the same
dtype. The concatenation is a weight-only subgraph: it costs nothing at run time, since the
artifact writer folds weight-only values into stored weights. Legal for every value of the
symbolic dims (the merged dim is the static N). Old ops are left for dce. Runs before fuse.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from inferx.compiler.ir.ops_base import int_attr
from inferx.compiler.ir.ops_nn import LinearOp
from inferx.compiler.ir.ops_tensor import ConcatOp, SplitOp, WeightOp
from inferx.compiler.ir.types import TensorType


def _leaf_weight(v: SSAValue | None) -> WeightOp | None:
    return v.owner if v is not None and isinstance(v.owner, WeightOp) else None


def _mergeable(op: LinearOp) -> bool:
    if op.attributes.get("w_layout", StringAttr("nk")) != StringAttr("nk"):
        return False
    return _leaf_weight(op.weight) is not None and (op.bias is None or _leaf_weight(op.bias) is not None)


@dataclass(frozen=True)
class MergeGemms(ModulePass):
    name = "merge-gemms"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for block in [b for o in op.walk() for r in o.regions for b in r.blocks]:
            for value in [*block.args, *(r for o in block.ops for r in o.results)]:
                users = [u.operation for u in value.uses]
                group = [u for u in dict.fromkeys(users)
                         if isinstance(u, LinearOp) and u.input == value and _mergeable(u)
                         and u.parent_block() is block]
                group = _same_kind(sorted(group, key=block.get_operation_index))
                if len(group) >= 2:
                    _merge(block, value, group)


def _same_kind(group: list[LinearOp]) -> list[LinearOp]:
    if not group:
        return group
    first = group[0]
    return [g for g in group
            if (g.bias is None) == (first.bias is None)
            and g.weight.type.dtype == first.weight.type.dtype  # type: ignore[attr-defined]
            and g.result.type == first.result.type.with_shape(  # type: ignore[attr-defined]
                [*first.result.type.shape[:-1], g.result.type.shape[-1]])]  # type: ignore[attr-defined]


def _clone_weight(v: SSAValue) -> Operation:
    w = _leaf_weight(v)
    assert w is not None
    return w.clone()


def _merge(block: Block, x: SSAValue, group: list[LinearOp]) -> None:
    first = min(group, key=lambda g: block.get_operation_index(g))
    new_ops: list[Operation] = []
    weights = [_clone_weight(g.weight) for g in group]
    new_ops += weights
    w_cat = ConcatOp.make([w.results[0] for w in weights], dim=int_attr(0))
    new_ops.append(w_cat)
    bias = None
    if group[0].bias is not None:
        biases = [_clone_weight(g.bias) for g in group]  # type: ignore[arg-type]
        new_ops += biases
        bias = ConcatOp.make([b.results[0] for b in biases], dim=int_attr(0))
        new_ops.append(bias)
    lin = LinearOp.make(x, w_cat.results[0], bias.results[0] if bias else None)
    new_ops.append(lin)
    outs: list[TensorType] = [g.result.type for g in group]  # type: ignore[misc]
    split = SplitOp.make(lin.results[0], result_types=outs, dim=int_attr(-1))
    new_ops.append(split)
    Rewriter.insert_op(new_ops, InsertPoint.before(first))
    for g, r in zip(group, split.results, strict=True):
        g.result.replace_all_uses_with(r)
