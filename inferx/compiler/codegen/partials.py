"""Output tiles summed across programs, finished by the last to arrive: how a fused kernel whose
programs each hold part of a GEMM's reduction (the fused MLP's slices of the intermediate
activation, ``mlp.py``; the fused attention and o projection's KV heads, ``attention_o.py``)
produces its output in one launch.

Each program adds its partial products into an fp32 scratch row ``ws_sum`` (one row per output
row, N columns) with relaxed atomics (``add_partial``). When it has added all it holds, it counts
its arrival at the counter of each output tile it touched (``finish_tiles``: tiles of BN columns,
one counter per (row block, tile) in ``ws_count``); the program whose arrival completes a tile
loads the tile's sums, runs the kernel's epilogue on them (the residual add) and stores the
result, then zeroes the tile's sums and its counter: so every launch starts from zeros, and a
replayed CUDA graph, which reuses its scratch, stays correct. Sums land in arrival order: two runs
may differ in the last bits.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from inferx.compiler.codegen.tile import Emitter, Tile
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.types import TensorType
from inferx.runtime.kernel_source import Param, Scratch


def add_partial(em: Emitter, part: str, offsets: str, mask: str) -> None:
    """Adds the fp32 tile ``part`` into ``ws_sum`` at ``offsets`` (row * N + column)."""
    em.emit(f"tl.atomic_add(ws_sum + {offsets}, {part}, mask={mask}, sem='relaxed')")


def finish_tiles(em: Emitter, *, counters: str, tiles: str, live: str, arrivals: int, n: int, first_row: str,
                 rows: int | str, rows_shape: Sequence[sy.Dim], result: SSAValue, epilogue: list[Operation],
                 width: str = "BN") -> None:
    """After the program's last ``add_partial``: its arrival at the output tiles ``tiles`` (a vector
    of tile indices, ``live`` its mask; ``counters`` the matching offsets in ``ws_count``; a tile is
    ``width`` columns, a constexpr's name), and for the tiles it completes (the ``arrivals``-th
    arrival) the epilogue on rows ``first_row + i``, i < ``rows`` (below ``M``, a name the
    template defines), with the tile's sums as ``result``."""
    e = em.emit
    e("tl.debug_barrier()")  # every thread's partials are in before the arrival is counted
    e(f"arrived = tl.atomic_add(ws_count + {counters}, 1, mask={live})")
    e(f"done = ({live}) & (arrived == {arrivals - 1})")
    e("if tl.max(done.to(tl.int32), 0) > 0:")
    em.indent += 1
    e("tl.debug_barrier()")
    e(f"col = {tiles}[:, None] * {width} + tl.arange(0, {width})[None, :]")
    e(f"fin = done[:, None] & (col < {n})")
    e(f"for i in tl.static_range({rows}):")
    em.indent += 1
    e(f"ri = {first_row} + i")
    e("mi = fin & (ri < M)")
    e(f"y = tl.load(ws_sum + ri * {n} + col, mask=mi, other=0, cache_modifier='.cg')")
    e(f"tl.store(ws_sum + ri * {n} + col, tl.zeros_like(y), mask=mi)")
    y_t = result.type
    assert isinstance(y_t, TensorType)
    em.values[result] = Tile("y", [*em.unravel("ri", list(rows_shape)), "col"], "mi", y_t)
    em.run_epilogue(epilogue)
    em.indent -= 1
    e(f"tl.store(ws_count + {counters}, tl.zeros_like(arrived), mask=done)")
    em.indent -= 1


def scratch(rows: str, n: int, counters: str) -> tuple[list[Param], tuple[Scratch, ...]]:
    """The parameters and buffers: ``rows`` x ``n`` fp32 sums and ``counters`` arrival counters
    (zeroed when allocated, and by every launch after it)."""
    params = [Param("ws_sum", "scratch", index=0, dtype="f32"), Param("ws_count", "scratch", index=1, dtype="i32")]
    return params, (Scratch((f"{rows} * {n}",), "f32"), Scratch((counters,), "i32"))
