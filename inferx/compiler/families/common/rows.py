"""What the GEMM-shaped families (``gemm``, ``mlp``) share about a kernel's rows and its
linear's neighbours: the GEMV-mode row limit, the norm's scale operand, and the gate|up halves
of a gated linear."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir.ops_base import get_dim, get_int
from inferx.compiler.ir.ops_kernel import KernelOp

# Up to this many rows per program a GEMM runs in GEMV mode: each [BN, BK] weight tile is loaded
# once (K contiguous, 16-byte loads) and applied to every row of the program on CUDA cores; above
# it, the dot path (tensor cores, BM >= 16). The fused decode kernels hold all of a step's rows in
# one program, so they run decode steps of at most this many rows.
GEMV_MAX_ROWS = 8


def norm_scale(kernel: KernelOp, norm: Operation) -> SSAValue | None:
    """The norm's scale operand, or None when it has none or it is a splat of ones from outside
    the kernel (fold-norm-weights moved it into W)."""
    from xdsl.ir import BlockArgument

    from inferx.passes.fold_norm_weights import is_ones

    g = norm_operand(norm, "weight")
    if isinstance(g, BlockArgument) and is_ones(kernel.inputs[g.index]):
        return None
    return g


def norm_operand(norm: Operation, which: str) -> SSAValue | None:
    if isinstance(norm, nn.RMS_NORMS):
        return norm.weight if which == "weight" else None
    assert isinstance(norm, nn.LayerNormOp)
    return norm.weight if which == "weight" else norm.bias


@dataclass(frozen=True)
class GatedHalves:
    """The two equal halves (gate, up) of a GEMM's columns, which its tiles hold side by side so
    that ``act(gate) * up`` pairs elements in registers: a ``split`` of the output's last dim (W
    rows [gate; up]) or, after interleave-pairs, two step-2 ``slice``s (``pairs``: W rows
    interleaved, gate row j at 2j and up row j at 2j + 1)."""

    ops: tuple[Operation, ...]
    results: tuple[SSAValue, SSAValue]
    pairs: bool


# Users that make a half of a split something other than a gate or an up: a tile of the gated
# form holds the two halves as elementwise partners, with no RoPE partner and no head layout
# (k|v merged without q is a split into equal halves too).
_NOT_GATED = (t.ReshapeOp, t.TransposeOp, t.SplitOp, t.SliceOp, nn.RopeOp, nn.KVWriteOp)


def _elementwise_halves(results: tuple[SSAValue, ...]) -> bool:
    return all(not isinstance(u.operation, _NOT_GATED) for r in results for u in r.uses)


def gated_split(lin: nn.LinearOp, epilogue: list[Operation]) -> GatedHalves | None:
    """The gate|up halves of ``lin`` in ``epilogue`` (two equal halves of its last dim, or its
    even and odd columns, each used by elementwise ops only), or None."""
    rank = lin.result.type.rank  # type: ignore[attr-defined]
    n = lin.result.type.shape[-1]  # type: ignore[attr-defined]
    last = (-1, rank - 1)
    for op in epilogue:
        if isinstance(op, t.SplitOp) and op.input == lin.result and len(op.results) == 2:
            a, b = (r.type.shape[-1] for r in op.results)  # type: ignore[attr-defined]
            if a == b and get_int(op.attributes, "dim") in last and _elementwise_halves(tuple(op.results)):
                return GatedHalves((op,), (op.results[0], op.results[1]), pairs=False)
    slices = {get_dim(op.attributes, "start"): op for op in epilogue
              if isinstance(op, t.SliceOp) and op.input == lin.result and get_int(op.attributes, "dim") in last
              and get_int(op.attributes, "step", 1) == 2 and get_dim(op.attributes, "end") == n}
    if (set(slices) == {0, 1} and isinstance(n, int) and n % 2 == 0
            and _elementwise_halves((slices[0].result, slices[1].result))):
        return GatedHalves((slices[0], slices[1]), (slices[0].result, slices[1].result), pairs=True)
    return None


