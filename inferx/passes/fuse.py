"""fuse: groups the ops of each function into ``ix.kernel`` ops, one per GPU launch.

Expects verified ix IR with no kernels yet (run merge-gemms first so q/k/v and gate/up are one
GEMM each). Guarantees: every op that does run-time work sits in exactly one ``ix.kernel``;
weight-only values (``ix.weight`` and what is computed from weights alone) stay outside, to be
folded into stored weights; the kernels are in an order where every input is computed before
use; the module computes what it computed before (the interpreter runs both).

Grouping, in program order:
  1. an anchor starts a group: ``linear``, ``qlinear``, ``fp8_linear``, ``matmul``, ``attention``,
     ``embedding``, ``last_token``, ``softmax``, the reductions and the norms;
  2. a norm whose only user is a linear joins that linear as its prologue; an RMSNorm whose only
     user is a qlinear or an fp8_linear joins it likewise (the int4 and FP8 templates' one
     prologue);
  3. an op that only rearranges or maps elements (elementwise math, casts, layout ops, rope,
     kv_write) joins the group of one of its operands as an epilogue, provided each of its other
     operands is computed before that group starts (so no group ever waits on a later one);
  4. anything else starts a group of its own, which later ops may join by rule 3.
Every rule looks only at use-def structure and types, so it holds for every value of the
symbolic dims. The kernels it makes are unbound (``template`` is empty): bind-families, which
runs next, binds each to the kernel family that implements it. Runs after merge-gemms, before
plan-memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp

# Ops that need a launch of their own: each starts a group.
ANCHORS: tuple[type[Operation], ...] = (
    nn.LinearOp, nn.QLinearOp, nn.Fp8LinearOp, nn.MatmulOp, nn.AttentionOp, nn.EmbeddingOp, nn.LastTokenOp,
    nn.SoftmaxOp, nn.RMSNormOp, nn.LayerNormOp, t.ReduceSumOp, t.ReduceMeanOp, t.ReduceMaxOp,
)
PROLOGUES = (nn.RMSNormOp, nn.LayerNormOp)
ELEMENTWISE = (
    t.AddOp, t.SubOp, t.MulOp, t.DivOp, t.MaxOp, t.MinOp, t.PowOp, t.NegOp, t.ExpOp, t.RsqrtOp,
    t.SqrtOp, t.SiluOp, t.SigmoidOp, t.TanhOp, t.GeluOp, t.CastOp,
)
EPILOGUES = (
    *ELEMENTWISE, t.ReshapeOp, t.TransposeOp, t.ConcatOp, t.SplitOp, t.SliceOp, t.BroadcastToOp, nn.RopeOp,
    nn.KVWriteOp,
)
CONSTANT_SOURCES = (t.WeightOp, t.ConstantOp)


@dataclass
class _Group:
    start: int  # program index of the op that started the group
    ops: list[Operation] = field(default_factory=list)


@dataclass(frozen=True)
class Fuse(ModulePass):
    name = "fuse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [o for o in op.ops if isinstance(o, FuncOp)]:
            _fuse_block(func.body.block)


def _is_const(op: Operation, const: set[Operation]) -> bool:
    if isinstance(op, CONSTANT_SOURCES):
        return True
    return bool(op.operands) and all(
        isinstance(v.owner, Operation) and v.owner in const for v in op.operands
    ) and not isinstance(op, KernelOp)


def _fuse_block(block: Block) -> None:
    ops = [o for o in block.ops if not isinstance(o, ReturnOp)]
    if any(isinstance(o, KernelOp) for o in ops):
        return  # already fused
    index = {o: i for i, o in enumerate(ops)}
    const: set[Operation] = set()
    for o in ops:
        if _is_const(o, const):
            const.add(o)
    group_of: dict[Operation, _Group] = {}
    groups: list[_Group] = []

    def producer_index(v: SSAValue) -> int:
        owner = v.owner
        return index[owner] if isinstance(owner, Operation) and owner in index else -1

    def available_before(v: SSAValue, g: _Group) -> bool:
        owner = v.owner
        if not isinstance(owner, Operation) or owner in const:
            return True
        return (owner in group_of and group_of[owner] is g) or producer_index(v) < g.start

    prologue_of: dict[Operation, Operation] = {}
    for o in ops:
        if isinstance(o, nn.LinearOp | nn.QLinearOp | nn.Fp8LinearOp) and o.input.owner in index:
            norm = o.input.owner
            kinds = PROLOGUES if isinstance(o, nn.LinearOp) else (nn.RMSNormOp,)
            if isinstance(norm, kinds) and len({u.operation for u in norm.results[0].uses}) == 1:
                prologue_of[norm] = o

    for o in ops:
        if o in const or o in group_of:
            continue
        if o in prologue_of:
            continue  # joins its linear below
        if isinstance(o, ANCHORS):
            g = _Group(index[o])
            for norm, lin in prologue_of.items():
                if lin is o:
                    g.start = index[norm]
                    g.ops.append(norm)
                    group_of[norm] = g
            g.ops.append(o)
            group_of[o] = g
            groups.append(g)
            continue
        joined = False
        if isinstance(o, EPILOGUES):
            for v in o.operands:
                owner = v.owner
                if isinstance(owner, Operation) and owner in group_of:
                    g = group_of[owner]
                    if all(available_before(w, g) for w in o.operands):
                        g.ops.append(o)
                        group_of[o] = g
                        joined = True
                        break
        if not joined:
            g = _Group(index[o], [o])
            group_of[o] = g
            groups.append(g)

    _materialize(block, ops, const, groups)


def _materialize(block: Block, ops: list[Operation], const: set[Operation], groups: list[_Group]) -> None:
    """Replaces each group by one ix.kernel; orders consts, then kernels, then the return."""
    ret = block.last_op
    assert isinstance(ret, ReturnOp)
    for o in ops:
        o.detach()
    ret.detach()
    for o in ops:
        if o in const:
            block.add_op(o)
    for n, g in enumerate(groups):
        members = set(g.ops)
        inputs: list[SSAValue] = []
        outputs: list[SSAValue] = []
        for o in g.ops:
            for v in o.operands:
                if not (isinstance(v.owner, Operation) and v.owner in members) and v not in inputs:
                    inputs.append(v)
            for r in o.results:
                if any(u.operation not in members for u in r.uses) and r not in outputs:
                    outputs.append(r)
        body = Block(arg_types=[v.type for v in inputs])
        for v, a in zip(inputs, body.args, strict=True):
            a.name_hint = v.name_hint
            for o in g.ops:
                for i, operand in enumerate(o.operands):
                    if operand == v:
                        o.operands[i] = a
        for o in g.ops:
            body.add_op(o)
        body.add_op(YieldOp.build(operands=[outputs]))
        kernel = KernelOp.build(
            operands=[inputs], result_types=[[v.type for v in outputs]],
            attributes={"template": StringAttr(""), "name": StringAttr(f"k{n}")},
            regions=[Region(body)],
        )
        block.add_op(kernel)
        for v, r in zip(outputs, kernel.results, strict=True):
            r.name_hint = v.name_hint
            for use in list(v.uses):
                if use.operation.parent_block() is not body:
                    use.operation.operands[use.index] = r
    block.add_op(ret)
