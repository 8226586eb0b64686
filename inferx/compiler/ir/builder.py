"""Building `ix` functions from Python: append ops to a block with result types inferred.

    b = FuncBuilder("decode", [("x", TensorType([sym("batch"), 64], "f32"))])
    y = b.op(ix.SiluOp, b.arg("x"))
    module = ModuleOp([b.finish([y])])
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, Region, SSAValue

from inferx.compiler.ir.ops_base import IxOp
from inferx.compiler.ir.types import TensorType


class FuncBuilder:
    """Appends ops to the body of one ``func.func``; ``finish`` adds the return."""

    def __init__(self, name: str, args: Sequence[tuple[str, TensorType]]):
        self.name = name
        self.block = Block(arg_types=[t for _, t in args])
        self.args: dict[str, SSAValue] = {}
        for (arg_name, _), value in zip(args, self.block.args, strict=True):
            value.name_hint = arg_name
            self.args[arg_name] = value

    def arg(self, name: str) -> SSAValue:
        return self.args[name]

    def op(self, cls: type[IxOp], *operands: SSAValue | Sequence[SSAValue] | None,
           result_types: Sequence[TensorType] | None = None, hint: str | None = None,
           **attrs: Attribute | None) -> SSAValue:
        """Appends one op and returns its single result."""
        results = self.ops(cls, *operands, result_types=result_types, hint=hint, **attrs)
        assert len(results) == 1, f"{cls.name} has {len(results)} results; use ops()"
        return results[0]

    def ops(self, cls: type[IxOp], *operands: SSAValue | Sequence[SSAValue] | None,
            result_types: Sequence[TensorType] | None = None, hint: str | None = None,
            **attrs: Attribute | None) -> list[SSAValue]:
        """Appends one op and returns all its results."""
        op = cls.make(*operands, result_types=result_types, **attrs)
        self.block.add_op(op)
        if hint:
            for r in op.results:
                r.name_hint = hint
        return list(op.results)

    def finish(self, results: Sequence[SSAValue]) -> FuncOp:
        self.block.add_op(ReturnOp(*results))
        func_type = ([a.type for a in self.block.args], [r.type for r in results])
        return FuncOp(self.name, func_type, Region(self.block))
