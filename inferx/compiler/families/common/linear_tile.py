"""What the templates of quantized-weight GEMMs (``qgemm``, ``fp8gemm``) share around their K
loops: which kernels they take (their linear op, alone or behind an RMSNorm, every operand a
kernel input), the tile's columns (RoPE partners within the tile, a gated split's second set of
W rows), and the tile's results bound for the epilogue (positions loaded once a row, the ropes'
rotation applied once)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import BlockArgument, Operation

from inferx.compiler.families.common.rope import (
    RopeRegion,
    hoisted_rope,
    pairing,
    partner_expr,
    partner_swap,
    rope_regions,
    rope_row_inputs,
)
from inferx.compiler.families.common.rows import GatedHalves, gated_split
from inferx.compiler.families.common.tile import Emitter, Tile
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import TensorType


def linear_prologue(kernel: KernelOp, linear: type[Operation], norms: tuple[type[Operation], ...]) -> Operation | None:
    """The norm (one of ``norms``) the kernel's ``linear`` reads, when the body starts with one."""
    ops = list(kernel.body.block.ops)
    first = ops[0]
    if (isinstance(first, norms) and len(ops) > 1 and isinstance(ops[1], linear)
            and ops[1].operands[0] == first.results[0]):
        return first
    return None


def linear_op(kernel: KernelOp, linear: type[Operation], norms: tuple[type[Operation], ...]) -> Operation:
    """The kernel's ``linear`` op: the first, or the second behind its norm."""
    ops = list(kernel.body.block.ops)
    op = ops[1] if linear_prologue(kernel, linear, norms) is not None else ops[0]
    assert isinstance(op, linear)
    return op


def linear_applies(kernel: KernelOp, linear: type[Operation], norms: tuple[type[Operation], ...], what: str
                   ) -> str | None:
    """None where the body starts with ``linear`` (called ``what`` in the reason), or a norm
    feeding one, whose (and whose norm's) operands are kernel inputs, and K and N are static."""
    norm = linear_prologue(kernel, linear, norms)
    op = kernel.body.block.first_op if norm is None else norm.next_op
    if not isinstance(op, linear):
        return f"the body does not start with {what} (or an rmsnorm feeding one)"
    direct = [v for v in op.operands if norm is None or v != norm.results[0]]
    if norm is not None:
        direct += list(norm.operands)
    if not all(isinstance(v, BlockArgument) for v in direct):
        return f"the {what.split()[-1]}'s (and its norm's) operands are not all kernel inputs"
    x_t, y_t = op.operands[0].type, op.results[0].type
    assert isinstance(x_t, TensorType) and isinstance(y_t, TensorType)
    if not isinstance(x_t.shape[-1], int) or not isinstance(y_t.shape[-1], int):
        return "K and N must be static"
    return None


@dataclass(frozen=True)
class TileLayout:
    """How a tile of ``bn`` columns holds its GEMM's epilogue: the RoPE regions and the partner
    expression, ``paired`` (``pairing``'s layout, or None), the gated split, the output
    columns a tile indexes (``n_tile``: N, or half of it when gated), and the epilogue without
    the gated split's ops (the tile pairs the halves itself)."""

    regions: list[RopeRegion]
    partner: str | None
    paired: str | None
    gated: GatedHalves | None
    n_tile: int
    epilogue: list[Operation]


def tile_layout(em: Emitter, lin: Operation, epilogue: list[Operation], bn: int) -> TileLayout:
    """The layout of ``lin``'s tiles of ``bn`` columns (CodegenError for RoPE on a gated split)."""
    regions = rope_regions(em, lin, epilogue)
    partner = partner_expr(regions)
    paired = pairing(regions, bn) if partner else None
    gated = gated_split(lin, epilogue)  # type: ignore[arg-type]
    if gated and partner:
        raise em.error(lin, "RoPE on a gated split is not generated")
    n = lin.results[0].type.shape[-1]  # type: ignore[attr-defined]
    kept = [o for o in epilogue if not gated or o not in gated.ops]
    return TileLayout(regions, partner, paired, gated, n // 2 if gated else n, kept)


def emit_tile_columns(em: Emitter, layout: TileLayout, rows: str, after_ids: tuple[str, ...] = ()
                      ) -> tuple[tuple[str, str], ...]:
    """Emits the program's rows ``r`` and columns ``c`` (``pid_m``, ``pid_n``, then the lines
    ``after_ids``), ``M``, the masks ``rm`` and ``cn``, and the second set of W rows where the
    tile does not hold them itself (the up half of a gated split, unpaired RoPE partners).
    Returns (W rows, accumulator) of each set: ("c" or "gc", "acc"), and ("pc", "accp")."""
    e = em.emit
    e("pid_m = tl.program_id(0)")
    e("pid_n = tl.program_id(1)")
    for line in after_ids:
        e(line)
    e("r = pid_m * BM + tl.arange(0, BM)")
    if layout.paired and layout.paired != "t":
        e("t = pid_n * BN + tl.arange(0, BN)")
        e(f"c = {layout.paired}")
    else:
        e("c = pid_n * BN + tl.arange(0, BN)")
    e(f"M = {rows}")
    e("rm = r < M")
    e(f"cn = c < {layout.n_tile}")
    gated, partner = layout.gated, layout.partner
    if gated and gated.pairs:  # interleaved rows: gate row j at 2j, up row j at 2j + 1
        e("gc = 2 * c")
        e("pc = gc + 1")
        return ("gc", "acc"), ("pc", "accp")
    if gated:
        e(f"pc = c + {layout.n_tile}")
        return ("c", "acc"), ("pc", "accp")
    if partner and not layout.paired:
        e(f"pc = c + {partner}")
        return ("c", "acc"), ("pc", "accp")
    return (("c", "acc"),)


def bind_tile_results(em: Emitter, lin: Operation, layout: TileLayout, bn: int, fast: bool) -> None:
    """After the K loop (``acc``, and ``accp`` where there is a second row set): the partner
    accumulator of a paired tile (a swap of halves), the epilogue's per-row inputs loaded once
    a row, the tile's ropes as one rotation (cos and sin by the GPU's approximations with
    ``fast``), and the accumulators bound as the linear's (or the gated halves') tiles."""
    e = em.emit
    x_t, y_t = lin.operands[0].type, lin.results[0].type
    assert isinstance(x_t, TensorType) and isinstance(y_t, TensorType)
    if layout.paired:  # each tile is [lo half | hi half] of the same pairs: the partner of one is the other
        e(partner_swap(layout.regions, bn))
    row_inputs = rope_row_inputs(layout.epilogue, list(x_t.shape[:-1]))
    for v in row_inputs:
        assert isinstance(v, BlockArgument)
        e(f"row{v.index} = tl.load(in{v.index} + r, mask=rm, other=0)")
    hoisted = (hoisted_rope(em, layout.epilogue, layout.regions, row_inputs, fast=fast)
               if layout.paired else None)
    lead = em.unravel("r[:, None]", y_t.shape[:-1])
    for v in row_inputs:
        assert isinstance(v, BlockArgument)
        em.row_values[v] = (f"row{v.index}[:, None]", list(lead))
    if hoisted is not None:
        em.applied.update(hoisted)
    mask = "(rm[:, None] & cn[None, :])"
    if layout.gated:
        for acc, res in zip(("acc", "accp"), layout.gated.results, strict=True):
            em.values[res] = Tile(acc, [*lead, "c[None, :]"], mask, res.type)  # type: ignore[arg-type]
    em.values[lin.results[0]] = Tile("acc", [*lead, "c[None, :]"], mask, y_t, "accp" if layout.partner else None)
