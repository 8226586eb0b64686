"""Output tiles summed across programs, finished by the last to arrive: how a fused kernel whose
programs each hold part of a GEMM's reduction (the fused MLP's slices of the intermediate
activation, ``mlp.py``; the fused attention and o projection's KV heads, ``attention_o.py``)
produces its output in one launch.

Each program adds its partial products into an fp32 scratch row ``ws_sum`` (one row per output
row, N columns) with relaxed atomics (``add_partial``). The programs that add into the same output
tiles form a group (the fused MLP: a row block's programs; the fused attention and o: a chunk of
output tiles' KV heads). When a program has added all it holds, it counts its arrival at its
group's counter in ``ws_count`` with one scalar atomic (``finish_tiles``); the last to arrive
takes the group's sums, zeroing them, with atomic exchanges, runs the kernel's epilogue on them
(the residual add), stores the result, and zeroes the counter: so every launch starts from zeros,
and a replayed CUDA graph, which reuses its scratch, stays correct. Sums land in arrival order:
two runs may differ in the last bits.

One scalar counter per group, not one per output tile: a vector ``tl.atomic_add`` returns its old
values only to the threads that own each element, and threads holding a replica of it read
something else, so a per-tile arrival test goes wrong on layouts with replicas (e.g. the fused
MLP at 8 warps and 64-column tiles gave wrong sums).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from inferx.compiler.families.common.tile import Emitter, Tile, release_writes
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.types import TensorType
from inferx.runtime.kernel_source import Param, Scratch


def add_partial(em: Emitter, part: str, offsets: str, mask: str) -> None:
    """Adds the fp32 tile ``part`` into ``ws_sum`` at ``offsets`` (row * N + column)."""
    em.emit(f"tl.atomic_add(ws_sum + {offsets}, {part}, mask={mask}, sem='relaxed')")


def finish_tiles(em: Emitter, *, counter: str, tiles: str, live: str, arrivals: int, n: int, first_row: str,
                 rows: int | str, rows_shape: Sequence[sy.Dim], result: SSAValue, epilogue: list[Operation],
                 width: str = "BN") -> None:
    """After the program's last ``add_partial``: its arrival at its group's counter (``counter``,
    the offset in ``ws_count``), and if it is the group's ``arrivals``-th, the epilogue over the
    group's output tiles ``tiles`` (a vector of tile indices, ``live`` its mask; a tile is
    ``width`` columns, a constexpr's name) on rows ``first_row + i``, i < ``rows`` (below ``M``, a
    name the template defines), with the tiles' sums as ``result``."""
    e = em.emit
    release_writes(em)  # every thread's partials are in the L2 before the arrival is counted
    e("tl.debug_barrier()")
    e(f"arrived = tl.atomic_add(ws_count + {counter}, 1)")
    e(f"if arrived == {arrivals - 1}:")
    em.indent += 1
    e("tl.debug_barrier()")
    e(f"col = {tiles}[:, None] * {width} + tl.arange(0, {width})[None, :]")
    e(f"fin = ({live})[:, None] & (col < {n})")
    e(f"for i in tl.static_range({rows}):")
    em.indent += 1
    e(f"ri = {first_row} + i")
    e("mi = fin & (ri < M)")
    # read and zeroed by atomic exchange: plain loads of the sums (even from the L2, '.cg') read
    # stale values on Hopper (wrong sums in some launches; none with the exchange). Triton's interpreter has no
    # float exchange, and runs programs one after another: a load and a store there.
    e("if ON_GPU:")
    e(f"    y = tl.atomic_xchg(ws_sum + ri * {n} + col, tl.zeros(col.shape, dtype=tl.float32), mask=mi)")
    e("else:")
    e(f"    y = tl.load(ws_sum + ri * {n} + col, mask=mi, other=0)")
    e(f"    tl.store(ws_sum + ri * {n} + col, tl.zeros_like(y), mask=mi)")
    y_t = result.type
    assert isinstance(y_t, TensorType)
    em.values[result] = Tile("y", [*em.unravel("ri", list(rows_shape)), "col"], "mi", y_t)
    em.run_epilogue(epilogue)
    em.indent -= 1
    e(f"tl.atomic_xchg(ws_count + {counter}, 0)")
    em.indent -= 1


def scratch(rows: str, n: int, counters: str) -> tuple[list[Param], tuple[Scratch, ...]]:
    """The parameters and buffers: ``rows`` x ``n`` fp32 sums and ``counters`` arrival counters, one
    per group (zeroed when allocated, and by every launch after it)."""
    params = [Param("ws_sum", "scratch", index=0, dtype="f32"), Param("ws_count", "scratch", index=1, dtype="i32")]
    return params, (Scratch((f"{rows} * {n}",), "f32"), Scratch((counters,), "i32"))


def row_sum_squares(em: Emitter, op: nn.SumSquaresOp, yields: list[SSAValue], n_tiles: int, m_code: str,
                     bm: int) -> list[tuple[str, Scratch]]:
    """``sum(x^2, -1)`` of an output row (an ``ix.sum_squares`` in a GEMM's epilogue, for the
    norm-stats pass) across the programs of its row block: ``n_tiles`` programs of ``bm`` rows; each stores its
    tile's sums (of x as stored), the last of the row block to arrive adds them in tile order
    (the same sum every run) and stores them, then resets the block's counter for the next launch.
    Returns the scratch it uses: the partial sums and the counters."""
    j = em.squares_of_rows(op, yields, "the GEMM's columns")
    e = em.emit
    e(f"tl.store(ws_rs + (pid_m * {n_tiles} + pid_n) * BM + tl.arange(0, BM), tl.sum(xs * xs, 1))")
    release_writes(em)
    e("tl.debug_barrier()")
    e("rs_arrived = tl.atomic_add(ws_rs_count + pid_m, 1)")
    e(f"if rs_arrived == {n_tiles - 1}:")
    em.indent += 1
    e("tl.debug_barrier()")
    e("rs = tl.zeros((BM,), dtype=tl.float32)")
    e(f"for t3 in range({n_tiles}):")
    e(f"    rs += tl.load(ws_rs + (pid_m * {n_tiles} + t3) * BM + tl.arange(0, BM), cache_modifier='.cg')")
    e(f"tl.store(out{j} + r, rs, mask=rm)")
    e("tl.atomic_xchg(ws_rs_count + pid_m, 0)")
    em.indent -= 1
    blocks = f"((({m_code}) + {bm - 1}) // {bm})"
    return [("ws_rs", Scratch((f"{blocks} * {n_tiles} * {bm}",), "f32")), ("ws_rs_count", Scratch((blocks,), "i32"))]
