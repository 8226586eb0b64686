"""canonicalize: applies the rewrite table of ``canonicalize_rules`` until nothing changes.

Expects verified IR. Each sweep walks the module once, defs before uses, and replaces every op
that a rule matches (first matching rule wins); sweeps repeat until one changes nothing or
``max_iterations`` sweeps have run. Guarantees: the result verifies, every value keeps its type,
and every rule is legal for every value of the symbolic dims. On reaching ``max_iterations`` the
IR is still correct but may hold rewrites not yet done.

It erases only the ops it replaces: operands left unused (a constant ``1`` after ``x * 1 -> x``,
the inner op of ``neg(neg(x))``) stay for dce. First in the cleanup group: canonicalize, cse, dce.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from inferx.passes.canonicalize_rules import RULES, Rule


@dataclass(frozen=True)
class RulePattern(RewritePattern):
    """One row of the rule table as an xDSL pattern."""

    rule: Rule

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, self.rule.op):
            return
        new = self.rule.rewrite(op)
        if isinstance(new, Operation):
            rewriter.replace(op, new)
        elif new is not None:
            rewriter.replace(op, [], [new])


@dataclass(frozen=True)
class Canonicalize(ModulePass):
    name = "canonicalize"

    max_iterations: int = 10

    def __post_init__(self) -> None:
        if self.max_iterations < 1:
            raise ValueError(f"max-iterations must be >= 1, got {self.max_iterations}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        applier = GreedyRewritePatternApplier([RulePattern(r) for r in RULES], dce_enabled=False)
        walker = PatternRewriteWalker(applier, apply_recursively=False)
        for _ in range(self.max_iterations):
            if not walker.rewrite_module(op):
                return
