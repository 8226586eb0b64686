"""canonicalize: placeholder until the rule table lands."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class Canonicalize(ModulePass):
    name = "canonicalize"
    max_iterations: int = 10

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pass
