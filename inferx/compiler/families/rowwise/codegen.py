"""Templates over rows and elements: gather (embedding), reduction (RMSNorm, LayerNorm, softmax
over the last dim) and pointwise (generated for any elementwise/layout chain).

Each computes its first op as a register tile and hands it to the tile emitter for the rest of
the body, exactly like the GEMM and attention templates.
"""

from __future__ import annotations

from xdsl.ir import BlockArgument, SSAValue

from inferx.compiler.families.common.source import module_source as _module
from inferx.compiler.families.common.tile import Emitter, Tile
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import get_float, get_int
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import TensorType
from inferx.runtime.kernel_source import KernelSource


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def gather_applies(kernel: KernelOp) -> str | None:
    first = kernel.body.block.first_op
    if not isinstance(first, (nn.EmbeddingOp, nn.LastTokenOp)) or \
            not all(isinstance(v, BlockArgument) for v in first.operands):
        return "the body does not start with an embedding or a last-token gather of kernel inputs"
    return None


def gather(kernel: KernelOp, name: str) -> KernelSource:
    """Rows of the table at the ids (or each sequence's last-token row), each program whole rows
    (up to 8192 values per program), so that an ``ix.sum_squares`` of them in the epilogue
    (norm-stats: the first norm's statistics) is a sum in registers."""
    em = Emitter(kernel, name)
    ops = list(kernel.body.block.ops)
    op = ops[0]
    assert isinstance(op, (nn.EmbeddingOp, nn.LastTokenOp))
    out_t = op.result.type
    assert isinstance(out_t, TensorType)
    hidden = out_t.shape[-1]
    assert isinstance(hidden, int)
    bh = _pow2(hidden)
    bm = max(1, min(16, 8192 // bh))
    lead_shape = out_t.shape[:-1]
    rows = em.dim(sy.product(lead_shape))
    em.emit("r = tl.program_id(0) * BM + tl.arange(0, BM)")
    em.emit("c = tl.arange(0, BH)")
    em.emit(f"mask = (r < {rows})[:, None] & (c < {hidden})[None, :]")
    if isinstance(op, nn.EmbeddingOp):
        em.emit(f"ids = tl.load(in{op.ids.index} + r, mask=r < {rows}, other=0)")  # type: ignore[attr-defined]
        table, extra = op.table.index, {}  # type: ignore[attr-defined]
    else:
        _last_token_rows(em, op, rows)
        table, extra = op.input.index, {"BS": LAST_TOKEN_BS}  # type: ignore[attr-defined]
    em.emit(
        f"e = tl.load(in{table} + ids[:, None] * {hidden} + c[None, :], mask=mask, other=0)"
        ".to(tl.float32)"
    )
    lead = em.unravel("r[:, None]", lead_shape)
    em.values[op.result] = Tile("e", [*lead, "c[None, :]"], "mask", out_t)
    sums = [o for o in ops if isinstance(o, nn.SumSquaresOp)]
    yields = list(ops[-1].operands)
    em.deferred.update(yields.index(o.results[0]) for o in sums if o.results[0] in yields)
    em.run_epilogue([o for o in ops[1:] if o not in sums])
    for o in sums:
        _row_sum_squares(em, o, yields, lead)
    return _finish(em, name, "gather", ("BM", "BH", *extra), (f"cdiv({rows}, {bm})",),
                   {"BM": bm, "BH": bh, **extra})


LAST_TOKEN_BS = 256  # positions scanned per step of a last-token gather


def _last_token_rows(em: Emitter, op: nn.LastTokenOp, batch: str) -> None:
    """``ids``: the flat row of x (``b * seq + i``) holding each sequence's last real token, the
    last ``i`` whose position is not negative, found by scanning the sequence's positions."""
    pos_t = op.positions.type
    assert isinstance(pos_t, TensorType)
    seq = em.dim(pos_t.shape[1])
    pos = f"in{op.positions.index}"  # type: ignore[attr-defined]
    em.emit("last = tl.zeros([BM], dtype=tl.int32)")
    em.emit(f"for s0 in range(0, {seq}, BS):")
    em.emit("    s = s0 + tl.arange(0, BS)")
    em.emit(f"    p = tl.load({pos} + r[:, None] * {seq} + s[None, :], "
            f"mask=(r < {batch})[:, None] & (s < {seq})[None, :], other=-1)")
    em.emit("    last = tl.maximum(last, tl.max(tl.where(p >= 0, s[None, :], 0), 1))")
    em.emit(f"ids = tl.where(r < {batch}, r.to(tl.int64) * {seq} + last, 0)")


def _row_sum_squares(em: Emitter, op: nn.SumSquaresOp, yields: list[SSAValue], lead: list[str]) -> None:
    """Stores ``sum(x^2, -1)`` of a whole-row tile (x as stored) as the kernel output it yields."""
    j = em.squares_of_rows(op, yields, "the gathered row")
    out_t = em.kernel.outputs[j].type
    assert isinstance(out_t, TensorType)
    em.emit(f"tl.store(out{j} + {em.offset(lead, out_t.shape)}, tl.sum(xs * xs, 1)[:, None], "
            f"mask=(r < {em.dim(sy.product(out_t.shape))})[:, None])")


def reduction_applies(kernel: KernelOp) -> str | None:
    first = kernel.body.block.first_op
    if isinstance(first, (nn.RMSNormOp, nn.LayerNormOp)):
        return None
    if isinstance(first, nn.SoftmaxOp):
        x_t = first.input.type
        assert isinstance(x_t, TensorType)
        if get_int(first.attributes, "dim") % x_t.rank == x_t.rank - 1:
            return None
        return "softmax over a dim other than the last"
    return "the body does not start with a norm or a last-dim softmax"


def reduction(kernel: KernelOp, name: str) -> KernelSource:
    em = Emitter(kernel, name)
    op = kernel.body.block.first_op
    assert op is not None
    x = op.operands[0]
    x_t = x.type
    assert isinstance(x_t, TensorType)
    length = x_t.shape[-1]
    if not isinstance(length, int):
        raise em.error(op, "the reduced (last) dim must be static")
    bl = _pow2(length)
    rows = em.dim(sy.product(x_t.shape[:-1]))
    em.emit("r = tl.program_id(0) * BM + tl.arange(0, BM)")
    em.emit("c = tl.arange(0, BL)")
    em.emit(f"mask = (r < {rows})[:, None] & (c < {length})[None, :]")
    em.emit(
        f"x = tl.load(in{em.input_index(x)} + r[:, None] * {length} + c[None, :], mask=mask, other=0).to(tl.float32)"
    )
    if isinstance(op, nn.RMSNormOp):
        eps = get_float(op.attributes, "eps")
        em.emit(f"y = x * tl.rsqrt(tl.sum(x * x, 1) / {length} + {eps!r})[:, None]")
        em.emit(
            f"y = y * tl.load(in{em.input_index(op.weight)} + c, mask=c < {length}, other=0).to(tl.float32)[None, :]"
        )
    elif isinstance(op, nn.LayerNormOp):
        eps = get_float(op.attributes, "eps")
        em.emit(f"mu = tl.sum(x, 1) / {length}")
        em.emit("xc = tl.where(mask, x - mu[:, None], 0.0)")
        em.emit(f"y = xc * tl.rsqrt(tl.sum(xc * xc, 1) / {length} + {eps!r})[:, None]")
        if op.weight is not None:
            em.emit(
                f"y = y * tl.load(in{em.input_index(op.weight)} + c, mask=c < {length}, other=0)"
                ".to(tl.float32)[None, :]"
            )
        if op.bias is not None:
            em.emit(
                f"y = y + tl.load(in{em.input_index(op.bias)} + c, mask=c < {length}, other=0).to(tl.float32)[None, :]"
            )
    else:
        em.emit("xs = tl.where(mask, x, float('-inf'))")
        em.emit("ex = tl.exp(xs - tl.max(xs, 1)[:, None])")
        em.emit("y = ex / tl.sum(ex, 1)[:, None]")
    out_t = op.results[0].type
    assert isinstance(out_t, TensorType)
    lead = em.unravel("r[:, None]", x_t.shape[:-1])
    em.values[op.results[0]] = Tile("y", [*lead, "c[None, :]"], "mask", out_t)
    em.run_epilogue(list(kernel.body.block.ops)[1:])
    bm = 4 if bl >= 1024 else 16
    return _finish(em, name, "reduction", ("BM", "BL"), (f"cdiv({rows}, {bm})",), {"BM": bm, "BL": bl})


def pointwise(kernel: KernelOp, name: str) -> KernelSource:
    """Iterates over the elements of the first op's first operand (a kernel input)."""
    em = Emitter(kernel, name)
    op = kernel.body.block.first_op
    assert op is not None and op.operands
    x = op.operands[0]
    x_t = x.type
    assert isinstance(x_t, TensorType)
    if not isinstance(x, BlockArgument):
        raise em.error(op, "a pointwise kernel must start from a kernel input")
    n = em.dim(x_t.numel())
    em.emit("idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    em.emit(f"mask = idx < {n}")
    coords = em.unravel("idx", x_t.shape)
    cast = ".to(tl.float32)" if x_t.dtype.is_float else ""
    em.emit(f"x = tl.load(in{x.index} + idx, mask=mask, other=0){cast}")
    em.values[x] = Tile("x", coords, "mask", x_t)
    em.run_epilogue(list(kernel.body.block.ops))
    return _finish(em, name, "pointwise", ("BLOCK",), (f"cdiv({n}, 256)",), {"BLOCK": 256})


def _finish(
    em: Emitter, name: str, template: str, consts: tuple[str, ...], grid: tuple[str, ...], constexprs: dict[str, int]
) -> KernelSource:
    params = em.params()
    args = ", ".join([p.name for p in params] + [f"{c}: tl.constexpr" for c in consts])
    return KernelSource(
        name=name,
        template=template,
        source=_module(name, args, em.lines),
        params=tuple(params),
        grid=grid,
        constexprs=constexprs,
        aliases=em.aliases,
    )
