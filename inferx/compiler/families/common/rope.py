"""RoPE after a GEMM: which output columns each rope of an epilogue rotates, and where each
column's partner is. Shared by the templates whose K loop keeps a second accumulator over the
partner rows of W (``gemm``, ``qgemm``)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation

from inferx.compiler.families.common.tile import Emitter
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
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
