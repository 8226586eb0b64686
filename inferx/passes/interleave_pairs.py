"""interleave-pairs: a linear whose output is cut into two equal halves that meet only
elementwise (gate and up of a gated MLP) stores its weight rows interleaved, so that each pair of
columns sits side by side.

    %y = ix.linear %x, %w              %w2 = ix.reshape %w  -> [2, N, K]     (weight-only: folded
    %g, %u = ix.split %y {dim = -1}    %w3 = ix.transpose %w2 {perm = [1, 0, 2]}   at compile time)
                                 ->    %w4 = ix.reshape %w3 -> [2N, K]
                                       %y = ix.linear %x, %w4
                                       %g = ix.slice %y {dim = -1, start = 0, end = 2N, step = 2}
                                       %u = ix.slice %y {dim = -1, start = 1, end = 2N, step = 2}

Row 2j of the new weight is gate row j and row 2j + 1 up row j (a bias likewise), so column 2j of
the product is gate column j and 2j + 1 up column j: the module computes what it computed before.
What it buys: the GEMM template takes 2*BN contiguous weight rows per tile as one load (one TMA
box) into one [BM, 2*BN] accumulator whose column pairs split in registers; with the halves
stored apart a tile needs two loads of BN rows, which is slower for long prompts
(docs/performance.md).

Applies to an ``ix.split`` into two equal static halves of the last dim of an ``ix.linear``
result that has no other user, the linear in the "nk" layout with a weight-only weight (and
bias), and every user of both halves an elementwise op (math or cast: where a layout op, RoPE
or a KV write reads a half, the pairs would have to be taken apart again). Legal for every value
of the symbolic dims (only the static N is touched). Runs after merge-gemms (which makes gate|up
one linear), before fold-norm-weights and fuse.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir.ops_base import get_int, int_attr, ints_attr
from inferx.compiler.ir.types import DimAttr, TensorType
from inferx.passes.fold_norm_weights import weight_only
from inferx.passes.fuse import ELEMENTWISE


@dataclass(frozen=True)
class InterleavePairs(ModulePass):
    name = "interleave-pairs"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for split in [o for o in op.walk() if isinstance(o, t.SplitOp)]:
            lin = _pairable(split)
            if lin is not None:
                _interleave(split, lin)


def _pairable(split: t.SplitOp) -> nn.LinearOp | None:
    """The linear whose halves ``split`` cuts, when the rewrite applies (module docstring)."""
    lin = split.input.owner
    if not isinstance(lin, nn.LinearOp) or len(split.results) != 2:
        return None
    y_t = lin.result.type
    assert isinstance(y_t, TensorType)
    if get_int(split.attributes, "dim") not in (-1, y_t.rank - 1):
        return None
    halves = [r.type.shape[-1] for r in split.results]  # type: ignore[attr-defined]
    if halves[0] != halves[1] or not isinstance(halves[0], int):
        return None
    if lin.attributes.get("w_layout", StringAttr("nk")) != StringAttr("nk"):
        return None
    if not weight_only(lin.weight) or (lin.bias is not None and not weight_only(lin.bias)):
        return None
    if {u.operation for u in lin.result.uses} != {split}:
        return None
    if not all(isinstance(u.operation, ELEMENTWISE) for r in split.results for u in r.uses):
        return None
    return lin


def _interleave(split: t.SplitOp, lin: nn.LinearOp) -> None:
    new_ops: list[Operation] = []

    def pairs(v: SSAValue) -> SSAValue:
        """``v`` ([2N, ...]) with rows j and N + j moved to 2j and 2j + 1."""
        v_t = v.type
        assert isinstance(v_t, TensorType)
        n2, rest = v_t.shape[0], list(v_t.shape[1:])
        assert isinstance(n2, int)
        halves = t.ReshapeOp.make(v, result_types=[v_t.with_shape([2, n2 // 2, *rest])])
        swapped = t.TransposeOp.make(halves.results[0], perm=ints_attr([1, 0, *range(2, 2 + len(rest))]))
        flat = t.ReshapeOp.make(swapped.results[0], result_types=[v_t])
        new_ops.extend((halves, swapped, flat))
        return flat.results[0]

    weight = pairs(lin.weight)
    bias = pairs(lin.bias) if lin.bias is not None else None
    Rewriter.insert_op(new_ops, InsertPoint.before(lin))
    lin.operands = [weight if i == 1 else bias if i == 2 and bias is not None else v
                    for i, v in enumerate(lin.operands)]
    n2 = lin.result.type.shape[-1]  # type: ignore[attr-defined]
    slices = [t.SliceOp.make(lin.result, result_types=[r.type], dim=int_attr(-1), start=DimAttr(first),  # type: ignore[list-item]
                             end=DimAttr(n2), step=int_attr(2))
              for first, r in enumerate(split.results)]
    Rewriter.insert_op(slices, InsertPoint.after(split))
    for r, s in zip(split.results, slices, strict=True):
        r.replace_all_uses_with(s.results[0])
    Rewriter.erase_op(split)
