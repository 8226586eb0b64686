"""What every family's tuning task is keyed by: row buckets and the cost tags of fused ops.

A task names everything that changes the cost of a generated kernel apart from its schedule: the
template, the dtypes, the static dims, the prologue and epilogue kinds, and the bucket of each
dynamic dim. Two kernels with the same task are the same kernel for tuning (every decoder layer's
qkv GEMM shares one task), so one record serves all of them. Names, eps values and weights are
not in a task: they change numbers, not cost. A task prints as its key, a canonical JSON object
(sorted keys, no spaces) that is stable across runs and machines and is what the tuning database
matches on; each family's key carries its own version, bumped when the derivation changes, so old
records stop matching instead of matching wrongly.
"""

from __future__ import annotations

import json
from typing import Any

from xdsl.ir import BlockArgument, Operation

from inferx.compiler.ir import ops_tensor as t

# Ops of an epilogue that only move data between the accumulator and the store: no cost tag.
LAYOUT_OPS = (t.SplitOp, t.ReshapeOp, t.TransposeOp)
# Rows buckets are powers of two. A short prompt's tiling is a question of its own at 128 rows (1
# or 2 row tiles against 132 SMs); so is a long one's: the largest bucket is keyed at max_seq_len's
# power of two, and a model that takes prompts of up to 2048 tokens wants tiles measured at 2048
# rows, not 4096 (a tile fastest at 4096 rows can be slower at 2048, where it launches half the
# programs and leaves a partial wave on 132 SMs).


def rows_bucket(rows: int) -> int:
    """The smallest bucket that is >= ``rows`` (rows >= 1): the power of two."""
    if rows < 1:
        raise ValueError(f"rows must be positive, got {rows}")
    return 1 << (rows - 1).bit_length()



def pow2_at_least(v: int) -> int:
    """The smallest power of two >= ``v`` (v >= 1)."""
    if v < 1:
        raise ValueError(f"must be positive, got {v}")
    return 1 << (v - 1).bit_length()



def cost_tag(op: Operation) -> str:
    """The cost tag of one epilogue op: "residual" for an add of a kernel input, else the op's
    name without the dialect prefix. (The gate|up halves are tagged "gated", or "pairs" where
    interleave-pairs stored their rows side by side.)"""
    name = op.name.removeprefix("ix.")
    if name == "add" and any(isinstance(v, BlockArgument) for v in op.operands):
        return "residual"
    return name



class LinearTaskKey:
    """What the tasks of the quantized GEMM families derive from their fields: the canonical
    ``key`` (of ``to_json``) and whether the epilogue is a gate|up split."""

    epilogue: str

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def gated(self) -> bool:
        """A gate|up split: each tile reads the W rows of both halves of its columns."""
        return bool({"gated", "pairs"} & set(self.epilogue.split("+")))

    @property
    def key(self) -> str:
        """The canonical JSON text of the task: equal keys if and only if equal tasks."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
