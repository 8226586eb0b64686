"""RoPE in a GEMM's epilogue: which output columns each rope rotates, where each column's
partner is, how tiles are laid out so that partners share a tile (a swap of the accumulator's
halves, no second dot), and the rotation applied once to the accumulator. Used by the GEMM
template (``gemm.py``); the columns and partners themselves are ``common/rope.py``'s."""

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


def pairing(regions: list[RopeRegion], bn: int) -> str | None:
    """How tiles hold RoPE partners, so that the partner accumulator is a swap of halves of
    ``acc`` (``partner_swap``): the columns of a tile. Where each tile is one or more whole heads
    in their natural order (head_dim == rot dividing BN, regions aligned to tiles) the columns are
    the natural ``t``; else the permutation of ``paired_columns``. None where neither holds (the
    template then keeps a second accumulator)."""
    if not regions or any(g.style != "rotate_half" for g in regions):
        return None
    if natural_heads(regions, bn):
        return "t"
    return paired_columns(regions, bn)


def natural_heads(regions: list[RopeRegion], bn: int) -> int:
    """Heads per tile where tiles of BN natural columns hold whole heads of one head dim, all of
    each rotated (rotate-half), regions aligned to tiles; else 0."""
    dims = {g.head_dim for g in regions}
    if len(dims) != 1 or any(g.style != "rotate_half" for g in regions):
        return 0
    hd = dims.pop()
    if bn % hd or any(g.rot != hd or g.off % bn or g.n_cols % bn for g in regions):
        return 0
    return bn // hd


def partner_swap(regions: list[RopeRegion], bn: int) -> str:
    """The statement that forms ``accp``, each column's RoPE partner, from ``acc`` in a tile that
    ``pairing`` laid out: the swap of the tile's halves (one head, or the permuted columns), or of
    each head's halves in a tile of several natural heads (the [BM, BN] tile seen as BM x heads
    rows of two halves). With Triton 3.6 a 4-D form of the latter gives other results from the
    AOT cubin than from the JIT on sm_90; the GPU tier checks this 3-D form against HF and the JIT
    (``tests/test_gpu.py -k two_natural_heads``)."""
    heads = natural_heads(regions, bn)
    if heads > 1:
        hd = bn // heads
        return f"accp = tl.reshape(tl.flip(tl.reshape(acc, (BM * {heads}, 2, {hd // 2})), 1), (BM, BN))"
    return "accp = tl.reshape(tl.flip(tl.reshape(acc, (BM, 2, BN // 2)), 1), (BM, BN))"


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


def paired_columns(regions: list[RopeRegion], bn: int) -> str | None:
    """Columns of each tile so that a tile holds BN/2 rotate-half columns and their partners: the
    partner accumulator then re-reads rows this program just read (cache hits), instead of rows
    another program reads, so q/k weights cross DRAM once. A tile within one head (BN divides
    head_dim) takes BN/2 columns of its first half and their partners; a tile of several whole
    heads (head_dim divides BN, all of each head rotated) takes the first halves of its heads,
    then their second halves, in the same order. An expression in the natural index ``t``; None
    where a region is not aligned to the tile (natural order is still correct)."""
    expr = "t"
    half = bn // 2
    for g in regions:
        if g.style != "rotate_half":
            continue
        u = f"(t - {g.off})"
        if not (g.head_dim % bn or g.off % bn or g.rot % bn or (g.rot // 2) % half):
            dt = f"({u} % {g.head_dim})"
            blk, w = f"({dt} // {bn})", f"({dt} % {bn})"
            d = f"tl.where({w} < {half}, {blk} * {half} + {w}, {g.rot // 2} + {blk} * {half} + {w} - {half})"
            inside = f"(t >= {g.off}) & (t < {g.off + g.n_cols}) & ({dt} < {g.rot})"
            expr = f"tl.where({inside}, {g.off} + ({u} // {g.head_dim}) * {g.head_dim} + {d}, {expr})"
        elif not (bn % g.head_dim or g.rot != g.head_dim or g.off % bn or g.n_cols % bn):
            q = g.rot // 2
            w = f"({u} % {bn})"
            hh = f"({w} % {half})"
            head = f"({hh} // {q}) * {g.head_dim}"
            col = f"{g.off} + ({u} // {bn}) * {bn} + {head} + {hh} % {q} + tl.where({w} < {half}, 0, {q})"
            expr = f"tl.where((t >= {g.off}) & (t < {g.off + g.n_cols}), {col}, {expr})"
        else:
            return None
    return None if expr == "t" else expr
