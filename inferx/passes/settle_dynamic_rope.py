"""settle-dynamic-rope: dynamic NTK RoPE as plain RoPE, for an artifact whose sessions keep every
position below ``max-seq-len``.

Dynamic NTK scaling raises theta only once a position reaches the op's ``original_max_position``;
below it the rotation is plain RoPE. Expects ``max-seq-len`` (the compiled context) at most every
such op's ``original_max_position`` (else ``RopeLengthError`` names both); guarantees no
``ix.rope`` keeps ``scaling = "dynamic"``. Runs in the compile pipeline before plan-memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from inferx.compiler.ir.ops_base import get_int, get_str
from inferx.compiler.ir.ops_nn import ROPE_SCALINGS, RopeOp
from inferx.compiler.ir.textio import IRError


class RopeLengthError(IRError):
    """A compiled context past a dynamic RoPE's original length: generated kernels do not rescale."""


@dataclass(frozen=True)
class SettleDynamicRope(ModulePass):
    name = "settle-dynamic-rope"

    max_seq_len: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for rope in op.walk():
            if isinstance(rope, RopeOp) and get_str(rope.attributes, "scaling", ROPE_SCALINGS, "none") == "dynamic":
                original = get_int(rope.attributes, "original_max_position")
                if self.max_seq_len > original:
                    raise RopeLengthError(
                        f"dynamic NTK RoPE is not generated past original_max_position {original}: "
                        f"use max_seq_len <= {original} (got {self.max_seq_len})"
                    )
                rope.attributes["scaling"] = StringAttr("none")
