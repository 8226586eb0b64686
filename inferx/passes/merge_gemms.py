"""merge-gemms: linears (or quantized linears) that read the same input become one over
concatenated weights.

    %q = ix.linear %x, %wq     %k = ix.linear %x, %wk     %v = ix.linear %x, %wv
      ->  %w = ix.concat %wq', %wk', %wv' {dim = 0}
          %qkv = ix.linear %x, %w
          %q, %k, %v = ix.split %qkv {dim = -1}

    %q = ix.qlinear %x, %cq, %sq mins %mq {group = 32}     (and %k, %v likewise)
      ->  %qkv = ix.qlinear %x, concat(%cq, %ck, %cv), concat(%sq, ...) mins concat(%mq, ...) {group = 32}
          %q, %k, %v = ix.split %qkv {dim = -1}

    %q = ix.fp8_linear %x, %cq, %sq                          (and %k, %v likewise)
      ->  %qkv = ix.fp8_linear %x, concat(%cq, %ck, %cv), concat(%sq, %sk, %sv)

Expects verified IR. Merges a group of two or more users of one value that are all ``ix.linear``,
all ``ix.qlinear`` or all ``ix.fp8_linear`` and agree on what the merged op must share:
  - linears: every weight (and every bias, if any has one) a leaf ``ix.weight`` in the "nk"
    layout, all of one dtype, all with a bias or all without;
  - qlinears: codes, scales and mins leaf ``ix.weight``s, one ``group``, one scales dtype, all
    with mins or all without, and the same ``col_scale`` (one SSA value, or none). Codes, scales
    and mins concatenate along N, which keeps every quantization group whole (groups run along K);
  - fp8_linears: codes and scales (and biases, all or none) leaf ``ix.weight``s, and a static
    activation scale of one weight name or none. Their scales are per output channel and x's per
    token (or the one static scale), so the merged op computes the same values.
Users of one value that differ split into several groups, each merged on its own (a GGUF file's
q and k in Q4_0 beside a v in Q6_K: q|k merge, v stays). The concatenations are weight-only
subgraphs: they cost nothing at run time, since the artifact writer folds weight-only values into
stored weights (i4 codes concatenated before they are packed). Legal for every value of the
symbolic dims (the merged dim is the static N). Old ops are left for dce. Runs after quantize,
before interleave-pairs and fuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from inferx.compiler.ir.ops_base import get_int, int_attr
from inferx.compiler.ir.ops_nn import Fp8LinearOp, LinearOp, QLinearOp
from inferx.compiler.ir.ops_tensor import ConcatOp, SplitOp, WeightOp
from inferx.compiler.ir.types import TensorType

Gemm = LinearOp | QLinearOp | Fp8LinearOp


def _leaf_weight(v: SSAValue | None) -> WeightOp | None:
    return v.owner if v is not None and isinstance(v.owner, WeightOp) else None


def _dtype(v: SSAValue | None) -> Any:
    return None if v is None else v.type.dtype  # type: ignore[attr-defined]


def _key(op: Operation) -> tuple[Any, ...] | None:
    """What ops must have in common to merge (equal keys merge), or None for an op that cannot."""
    y = op.results[0].type if op.results else None
    if not isinstance(y, TensorType):
        return None
    out = (y.dtype, tuple(y.shape[:-1]))
    if isinstance(op, LinearOp):
        if op.attributes.get("w_layout", StringAttr("nk")) != StringAttr("nk"):
            return None
        if _leaf_weight(op.weight) is None or (op.bias is not None and _leaf_weight(op.bias) is None):
            return None
        return ("linear", *out, _dtype(op.weight), op.bias is None)
    if isinstance(op, QLinearOp):
        if any(_leaf_weight(v) is None for v in (op.codes, op.scales, *(v for v in (op.mins, op.bias) if v))):
            return None
        return ("qlinear", *out, get_int(op.attributes, "group"), _dtype(op.scales), op.mins is None, op.col_scale,
                op.bias is None)
    if isinstance(op, Fp8LinearOp):
        if any(_leaf_weight(v) is None for v in (op.codes, op.scales, *(v for v in (op.bias, op.x_scale) if v))):
            return None
        xs = _leaf_weight(op.x_scale)
        return ("fp8_linear", *out, op.bias is None, None if xs is None else xs.attributes["name"])
    return None


@dataclass(frozen=True)
class MergeGemms(ModulePass):
    name = "merge-gemms"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for block in [b for o in op.walk() for r in o.regions for b in r.blocks]:
            for value in [*block.args, *(r for o in block.ops for r in o.results)]:
                users = [u.operation for u in value.uses]
                candidates = [u for u in dict.fromkeys(users)
                              if isinstance(u, Gemm) and u.input == value and u.parent_block() is block]
                for group in _groups(sorted(candidates, key=block.get_operation_index)):
                    if len(group) >= 2:
                        _merge(block, value, group)


def _groups(ops: list[Gemm]) -> list[list[Gemm]]:
    """``ops`` (in program order) partitioned by ``_key``; those that cannot merge left out."""
    groups: list[tuple[tuple[Any, ...], list[Gemm]]] = []
    for op in ops:
        key = _key(op)
        if key is None:
            continue
        same = next((g for k, g in groups if k == key), None)
        if same is None:
            groups.append((key, [op]))
        else:
            same.append(op)
    return [g for _, g in groups]


def _concat(values: list[SSAValue], new_ops: list[Operation]) -> SSAValue:
    """The leaf weights ``values`` cloned and concatenated along dim 0 (ops appended to ``new_ops``)."""
    clones = [_leaf_weight(v).clone() for v in values]  # type: ignore[union-attr]
    cat = ConcatOp.make([c.results[0] for c in clones], dim=int_attr(0))
    new_ops.extend([*clones, cat])
    return cat.results[0]


def _merge(block: Block, x: SSAValue, group: list[Gemm]) -> None:
    first = min(group, key=lambda g: block.get_operation_index(g))
    new_ops: list[Operation] = []
    merged: Operation
    if isinstance(first, LinearOp):
        lins: list[LinearOp] = group  # type: ignore[assignment]
        w = _concat([g.weight for g in lins], new_ops)
        bias = _concat([g.bias for g in lins], new_ops) if first.bias is not None else None  # type: ignore[misc]
        merged = LinearOp.make(x, w, bias)
    elif isinstance(first, Fp8LinearOp):
        fs: list[Fp8LinearOp] = group  # type: ignore[assignment]
        fbias = _concat([g.bias for g in fs], new_ops) if first.bias is not None else None  # type: ignore[misc]
        xs = None
        if first.x_scale is not None:  # one static scale of their one input (a weight of one name)
            clone = _leaf_weight(first.x_scale).clone()  # type: ignore[union-attr]
            new_ops.append(clone)
            xs = clone.results[0]
        merged = Fp8LinearOp.make(x, _concat([g.codes for g in fs], new_ops), _concat([g.scales for g in fs], new_ops),
                                  fbias, xs)
    else:
        qs: list[QLinearOp] = group  # type: ignore[assignment]
        codes = _concat([g.codes for g in qs], new_ops)
        scales = _concat([g.scales for g in qs], new_ops)
        mins = _concat([g.mins for g in qs], new_ops) if first.mins is not None else None  # type: ignore[misc]
        qbias = _concat([g.bias for g in qs], new_ops) if first.bias is not None else None  # type: ignore[misc]
        merged = QLinearOp.make(x, codes, scales, mins, first.col_scale, qbias, None, group=first.attributes["group"])
    new_ops.append(merged)
    outs: list[TensorType] = [g.result.type for g in group]  # type: ignore[misc]
    split = SplitOp.make(merged.results[0], result_types=outs, dim=int_attr(-1))
    new_ops.append(split)
    Rewriter.insert_op(new_ops, InsertPoint.before(first))
    for g, r in zip(group, split.results, strict=True):
        g.result.replace_all_uses_with(r)
