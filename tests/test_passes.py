"""The cleanup passes on modules built in Python, through the pass manager of `inferx opt`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import FloatAttr, FunctionType, ModuleOp, f32
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from inferx.compiler.ir.ops_base import ints_attr
from inferx.compiler.ir.ops_tensor import AddOp, ConstantOp, ExpOp, MulOp, NegOp, ReshapeOp, TransposeOp
from inferx.compiler.ir.symbolic import sym
from inferx.compiler.ir.textio import IRError, parse_module, verify_module
from inferx.compiler.pipeline import registry
from inferx.passes.canonicalize import Canonicalize
from inferx.passes.pipeline import PassManager, parse

BATCH, SEQ = sym("batch"), sym("seq")
X = ("f32", (BATCH, SEQ, 64))


def build_module() -> ModuleOp:
    """f(x) = exp(x * 1) + exp(-(-x)) with a transpose pair, a reshape to its own type and a
    dead op: canonicalize, cse and dce leave ``exp(x) + exp(x)``."""
    from inferx.compiler.ir.types import TensorType

    xt = TensorType((BATCH, SEQ, 64), "f32")
    block = Block(arg_types=[xt])
    x = block.args[0]
    ops: list[Operation] = []

    def add(op: Operation) -> SSAValue:
        ops.append(op)
        return op.results[0]

    one = add(ConstantOp.make(result_types=[TensorType((64,), "f32")], value=FloatAttr(1.0, f32)))
    x1 = add(MulOp.make(x, one))
    nx = add(NegOp.make(add(NegOp.make(x))))
    t = add(TransposeOp.make(nx, perm=ints_attr([1, 0, 2])))
    tt = add(TransposeOp.make(t, perm=ints_attr([1, 0, 2])))
    same = add(ReshapeOp.make(tt, result_types=[xt]))
    add(ExpOp.make(one))  # dead
    s = add(AddOp.make(add(ExpOp.make(x1)), add(ExpOp.make(same))))
    block.add_ops([*ops, ReturnOp(s)])
    func = FuncOp("f", FunctionType.from_lists([xt], [xt]), Region(block))
    return ModuleOp([func])


def op_counts(module: ModuleOp) -> Counter[str]:
    return Counter(op.name for op in module.walk() if op.name.startswith("ix."))


def test_cleanup_pipeline_op_counts() -> None:
    module = build_module()
    verify_module(module)
    assert op_counts(module) == Counter(
        {
            "ix.exp": 3,
            "ix.neg": 2,
            "ix.transpose": 2,
            "ix.constant": 1,
            "ix.mul": 1,
            "ix.reshape": 1,
            "ix.add": 1,
        }
    )
    PassManager(parse("canonicalize,cse,dce", registry())).run(module)
    assert op_counts(module) == Counter({"ix.exp": 1, "ix.add": 1})
    (add,) = [op for op in module.walk() if isinstance(op, AddOp)]
    assert add.lhs is add.rhs


def test_each_pass_alone() -> None:
    """canonicalize leaves dead ops for dce; cse merges the exps canonicalize made equal."""
    module = build_module()
    PassManager([Canonicalize()]).run(module)
    counts = op_counts(module)
    assert counts["ix.mul"] == 0 and counts["ix.transpose"] == 1 and counts["ix.reshape"] == 0
    assert counts["ix.neg"] == 1  # the inner neg of neg(neg(x)) is dead but stays for dce
    assert counts["ix.exp"] == 2 and counts["ix.constant"] == 2  # exp(1) folded to a constant
    PassManager(parse("cse", registry())).run(module)
    assert op_counts(module)["ix.exp"] == 1  # exp(x * 1) and exp(-(-x)) are both exp(x) now
    PassManager(parse("dce", registry())).run(module)
    assert op_counts(module) == Counter({"ix.exp": 1, "ix.add": 1})


def test_canonicalize_options() -> None:
    (p,) = parse("canonicalize{max-iterations=3}", registry())
    assert p == Canonicalize(max_iterations=3)
    with pytest.raises(ValueError, match="max-iterations must be >= 1"):
        Canonicalize(max_iterations=0)


def test_round_trip_after_pipeline() -> None:
    module = build_module()
    PassManager(parse("canonicalize,cse,dce", registry())).run(module)
    text = str(module)
    reparsed, source = parse_module(text)
    verify_module(reparsed, source)
    assert str(reparsed) == text


@dataclass(frozen=True)
class BreakShapes(ModulePass):
    """Test-only: inserts an ix.add whose stated result shape contradicts its operands."""

    name = "break-shapes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from inferx.compiler.ir.types import TensorType

        ret = next(o for o in op.walk() if isinstance(o, ReturnOp))
        x = ret.operands[0]
        bad = AddOp.build(operands=[x, x], result_types=[TensorType((5,), "f32")])
        Rewriter.insert_op(bad, InsertPoint.before(ret))


def test_pass_that_breaks_the_ir_is_named() -> None:
    module = build_module()
    with pytest.raises(IRError) as info:
        PassManager([*parse("canonicalize", registry()), BreakShapes()]).run(module)
    message = str(info.value)
    assert "after pass 'break-shapes'" in message
    assert "ix.add: result type is [5] f32" in message
