"""Split-K on the dot path: a tile's K range cut into SPLIT_K slices, one program each (the grid's
third axis), so that a GEMM with few output tiles still fills the SMs (decode batches). Each
program stores its fp32 partials; the last of a tile's programs to arrive sums them and goes on
with the epilogue. Shared by the gemm and qgemm families."""

from __future__ import annotations

from inferx.compiler.families.common.tile import Emitter, release_writes
from inferx.runtime.kernel_source import Scratch


def split_k_scratch(tiles: str, split: int, bm: int, bn: int, second: bool, norm: bool) -> list[tuple[str, Scratch]]:
    """The scratch ``split_k_reduce`` reads, by parameter name: the partial accumulators (and the
    second accumulator's, and the RMSNorm statistics' with ``norm``) of ``tiles`` output tiles
    (an expression), and one arrival counter per tile."""
    named = [("ws_acc", Scratch((f"{tiles} * {split} * {bm} * {bn}",), "f32"))]
    if second:
        named.append(("ws_accp", Scratch((f"{tiles} * {split} * {bm} * {bn}",), "f32")))
    if norm:
        named.append(("ws_ss", Scratch((f"{tiles} * {split} * {bm}",), "f32")))
    named.append(("ws_count", Scratch((tiles,), "i32")))
    return named


def split_k_reduce(em: Emitter, second: bool, norm: bool, n_tiles: int) -> None:
    """Each program stores its fp32 partials (``acc``, ``accp`` with ``second``, the rows' sums of
    squares ``ss`` over its K range with ``norm``); the last of a tile's SPLIT_K programs to
    arrive sums them and goes on with the epilogue, which the caller emits inside the branch this
    opens. The counter only grows (a graph replays from any state): the last arrival of every
    launch sees SPLIT_K - 1 modulo SPLIT_K (a power of two)."""
    e = em.emit
    tile = "(wsb * BM + tl.arange(0, BM)[:, None]) * BN + tl.arange(0, BN)[None, :]"
    # (register, scratch, offsets in it, shape)
    partials = [("acc", "ws_acc", tile, "(BM, BN)")]
    if second:
        partials.append(("accp", "ws_accp", tile, "(BM, BN)"))
    if norm:
        partials.append(("ss", "ws_ss", "wsb * BM + tl.arange(0, BM)", "(BM,)"))
    # 64-bit: SPLIT_K x BM x BN partials per tile pass 2**31 elements on large grids
    e(f"wsb = (pid_m.to(tl.int64) * {n_tiles} + pid_n) * SPLIT_K + pid_k")
    for reg, ws, offsets, _ in partials:
        e(f"tl.store({ws} + {offsets}, {reg})")
    release_writes(em)
    e("tl.debug_barrier()")
    e(f"arrived = tl.atomic_add(ws_count + pid_m * {n_tiles} + pid_n, 1)")
    e("if (arrived & (SPLIT_K - 1)) == SPLIT_K - 1:")
    em.indent += 1
    e("tl.debug_barrier()")
    for reg, _, _, shape in partials:
        e(f"{reg} = tl.zeros({shape}, dtype=tl.float32)")
    e("for s2 in tl.static_range(SPLIT_K):")
    em.indent += 1
    e(f"wsb = (pid_m.to(tl.int64) * {n_tiles} + pid_n) * SPLIT_K + s2")
    for reg, ws, offsets, _ in partials:
        e(f"{reg} += tl.load({ws} + {offsets}, cache_modifier='.cg')")
    em.indent -= 1
