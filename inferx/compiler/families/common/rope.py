"""RoPE after a GEMM: which output columns each rope of an epilogue rotates, and where each
column's partner is, and how tiles are laid out so that partners share a tile (the partner accumulator a
swap of the accumulator's halves, no second pass over W), and the rotation applied once to the
accumulator (``hoisted_rope``). Shared by the GEMM templates (``gemm``, ``qgemm``)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import BlockArgument, Operation, SSAValue

from inferx.compiler.families.common.tile import Emitter
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import get_int, get_ints, get_str
from inferx.compiler.ir.types import TensorType


@dataclass(frozen=True)
class RopeRegion:
    """Columns ``[off, off + n_cols)`` of a GEMM output that one rope rotates, head by head."""

    off: int
    n_cols: int
    head_dim: int
    rot: int
    style: str


def rope_regions(em: Emitter, lin: Operation, epilogue: list[Operation]) -> list[RopeRegion]:
    """The GEMM output columns each rope of the epilogue rotates (``lin``: the GEMM op).

    Every rope in the epilogue must reach the linear through split (last dim), reshape (that
    splits the last dim into heads) and transpose (that keeps the last dim last); then its
    head_dim axis is a contiguous, aligned run of the linear's columns."""
    regions: list[RopeRegion] = []
    for op in epilogue:
        if not isinstance(op, nn.RopeOp):
            continue
        off, value = 0, op.input
        head_dim = op.input.type.shape[-1]  # type: ignore[attr-defined]
        while value != lin.results[0]:
            owner = value.owner
            if isinstance(owner, t.TransposeOp):
                perm = get_ints(owner.attributes, "perm")
                if perm[-1] != len(perm) - 1:
                    raise em.error(op, "RoPE input's transpose moves the head_dim axis")
            elif isinstance(owner, t.ReshapeOp):
                src, dst = owner.input.type, owner.result.type
                assert isinstance(src, TensorType) and isinstance(dst, TensorType)
                if tuple(src.shape[:-1]) != tuple(dst.shape[:-2]) or dst.shape[-1] != head_dim:
                    raise em.error(op, "RoPE input's reshape must split only the last dim into heads")
            elif isinstance(owner, t.SplitOp):
                dim = get_int(owner.attributes, "dim")
                if dim not in (-1, owner.input.type.rank - 1):  # type: ignore[attr-defined]
                    raise em.error(op, "RoPE input's split must cut the last dim")
                for r in owner.results:
                    if r == value:
                        break
                    off += r.type.shape[-1]  # type: ignore[attr-defined]
            else:
                raise em.error(
                    op, f"RoPE must follow its GEMM through layout ops only, found {getattr(owner, 'name', owner)}"
                )
            value = owner.operands[0]  # type: ignore[union-attr]
        size = op.input.type  # type: ignore[attr-defined]
        assert isinstance(size, TensorType)
        n_cols = int(size.shape[1]) * head_dim if isinstance(size.shape[1], int) else None
        if n_cols is None:
            raise em.error(op, "RoPE heads must be static")
        rot = get_int(op.attributes, "rotary_dim", head_dim)
        style = get_str(op.attributes, "style", ("rotate_half", "interleaved"), "rotate_half")
        regions.append(RopeRegion(off, n_cols, head_dim, rot, style))
    return regions


def partner_expr(regions: list[RopeRegion]) -> str | None:
    """The offset from each column ``c`` to its RoPE partner, as a Triton expression."""
    terms = []
    for g in regions:
        d = f"((c - {g.off}) % {g.head_dim})"
        inside = f"((c >= {g.off}) & (c < {g.off + g.n_cols}))"
        if g.style == "rotate_half":
            delta = f"tl.where({d} < {g.rot // 2}, {g.rot // 2}, tl.where({d} < {g.rot}, -{g.rot // 2}, 0))"
        else:
            delta = f"tl.where({d} < {g.rot}, tl.where({d} % 2 == 0, 1, -1), 0)"
        terms.append(f"tl.where({inside}, {delta}, 0)")
    return " + ".join(terms) if terms else None

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


def rope_row_inputs(epilogue: list[Operation], rows_shape: list[sy.Dim]) -> list[SSAValue]:
    """Kernel inputs of the epilogue with one value per row (the positions RoPE and kv_write
    read, when shaped like the rows): loaded once per row, ``[BM]``, not once per element."""
    out: list[SSAValue] = []
    for op in epilogue:
        if isinstance(op, (nn.RopeOp, nn.KVWriteOp)):
            v = op.positions
            ty = v.type
            if (isinstance(v, BlockArgument) and isinstance(ty, TensorType) and list(ty.shape) == rows_shape
                    and v not in out):
                out.append(v)
    return out


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
