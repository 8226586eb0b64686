"""dce: erases ops whose results are never used. ``func.return`` keeps what it returns alive.

Expects verified IR; leaves no unused pure op behind. Runs last in the cleanup group.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import dce


@dataclass(frozen=True)
class DCE(ModulePass):
    name = "dce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        dce(op)
