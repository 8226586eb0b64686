"""RoPE in a GEMM's epilogue: the head dim the ropes rotate, and the rotation applied once to
the accumulator. Used by the GEMM template (``codegen.py``); the columns, partners and tiles
that hold partners are ``common/rope.py``'s."""

from __future__ import annotations

from xdsl.ir import BlockArgument, Operation, SSAValue

from inferx.compiler.families.common.errors import CodegenError
from inferx.compiler.families.common.rope import RopeRegion, rope_regions
from inferx.compiler.families.common.tile import Emitter
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_base import get_str
from inferx.compiler.ir.ops_kernel import KernelOp


def rope_head_dim(kernel: KernelOp, lin: nn.LinearOp, epilogue: list[Operation]) -> int:
    """The one head dim the RoPEs of ``epilogue`` rotate; 0 where there is no RoPE, they differ,
    or their columns cannot be read (``generate`` reports that kernel)."""
    try:
        dims = {g.head_dim for g in rope_regions(Emitter(kernel, "rope"), lin, epilogue)}
    except CodegenError:
        return 0
    return dims.pop() if len(dims) == 1 else 0


def hoisted_rope(em: Emitter, epilogue: list[Operation], regions: list[RopeRegion],
                  row_inputs: list[SSAValue], fast: bool = False) -> list[Operation] | None:
    """Rotates ``acc`` for every RoPE of the epilogue at once, before the epilogue runs, and returns
    the ropes (which then pass their tile through); None where they differ in anything but the
    columns they cover or read positions not loaded per row. One cos and one sin per element
    (instead of one pair per rope); ``fast``: by the GPU's approximations (``Emitter.sincos``)."""
    ropes = [o for o in epilogue if isinstance(o, nn.RopeOp)]
    if not ropes or len(ropes) != len(regions):
        return None
    first = ropes[0]
    same = dict(first.attributes)
    if any(o.positions != first.positions or dict(o.attributes) != same for o in ropes):
        return None
    if first.positions not in row_inputs or len({(g.rot, g.head_dim) for g in regions}) != 1:
        return None
    if get_str(first.attributes, "scaling", ("none", "linear", "dynamic", "llama3"), "none") == "dynamic":
        return None  # the emitter's rope says why it is not generated
    rot = regions[0].rot
    d = "-1"
    for g in regions:
        d = f"tl.where((c >= {g.off}) & (c < {g.off + g.n_cols}), (c - {g.off}) % {g.head_dim}, {d})"
    em.emit(f"rd = {d}")
    positions = first.positions
    assert isinstance(positions, BlockArgument)  # row_inputs holds only kernel inputs
    pos = f"row{positions.index}"
    inv, sign = em.rope_frequencies(first, "rd", rot)
    em.emit(f"ang = {pos}.to(tl.float32)[:, None] * ({inv})[None, :]")
    cos, sin = em.sincos("ang", fast)
    em.emit(f"acc = tl.where(((rd >= 0) & (rd < {rot}))[None, :], "
            f"acc * {cos} + ({sign})[None, :] * accp * {sin}, acc)")
    return list(ropes)

