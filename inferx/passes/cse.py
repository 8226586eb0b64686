"""cse: merges ops that compute the same value (same op, operands and attributes).

Expects verified IR. Every ix op is pure, so any two identical ops in one block merge; the later
one's uses move to the earlier one. Runs after canonicalize, before dce.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import cse


@dataclass(frozen=True)
class CSE(ModulePass):
    name = "cse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        cse(op)
