"""The qgemm schedules used without a tuning record, by the shape of the kernel's rows and their
bucket.

- Decode rows (no ``seq`` in the rows: a batch of single tokens) on sm_90, batch 1: GEMV mode
  with deferred sums, BN = 16 W rows by BK = 512 columns (whole groups dividing K) a step, 4
  warps, its loads a step ahead where its programs number at most two a SM; for an N of at most
  2048 (few programs) BN 8 by BK 1024 on 8 warps, loads a step ahead; for a K from 8192 (the
  down projection) BN 16 by BK 1024 on 8 warps. Each the fastest, or within a few percent of it,
  of ``benchmarks/qgemm_probe.py``'s sweep on the 8B projections at one row. Larger batch
  buckets: the dot path, 16 x 64 tiles, BK = the group up to 128, 3 stages, split-K until the
  programs fill four waves (one GEMV row per program would read the weight once per row): the
  sweep's best at 16 rows, 1.3-2.9x the tiles without split-K, whose programs left most SMs idle
  (docs/performance.md).
- Prefill rows on sm_90, by row bucket (``PREFILL_ROW_BUCKETS``, then any longer prompt): up to
  16 rows as a decode batch of 16; up to 128, 64 x 64 tiles on one warpgroup (enough programs to
  fill the SMs); up to 512, 128 x 128 on two; beyond, 256 x 128, which spreads each code's
  dequantization over the most rows (the fastest of ``benchmarks/qgemm_probe.py``'s sweep at
  2048 rows on the q/o and gate/up shapes). A gate|up tile (two accumulators) at BN 64 from 128
  rows, which holds the same accumulators without spilling; a q|k|v tile (RoPE and KV writes in
  its epilogue, which spills more at 256 rows) at 128 rows. BK = the group up to 64, 3 stages.
- A prompt kernel given a dense weight (``ix.qlinear``'s ``dense``, the dense-prompt-weights
  pass), in the row buckets from its ``dense_min_rows`` (the longest prompts' bucket included):
  the dense weight, as a bf16 GEMM reads its weight: 128 x 256 tiles where one accumulator has no
  RoPE, 128 x 128 under RoPE (whole heads a tile) and gated (two accumulators, the gate's and
  the up's rows), BK 64, 8 warps, 3 stages, TMA loads on sm_90 where each tile's W rows are runs
  (RoPE heads in their natural order; the gate's and the up's rows as two boxes): the tiles and
  loads of the bf16 GEMMs' best records at 4096 rows.
- The cpu target (Triton's interpreter, where each program and each K step is a Python-level
  step): the dot path with BM = 16 for decode and 64 for prefill, BN = 64 (narrower for narrow
  weights), BK = the group: few programs, few steps, the same results (its programs are not
  given dense weights).
"""

from __future__ import annotations

from inferx.compiler.families.common.errors import CodegenError
from inferx.compiler.families.common.hardware import HOPPER_SMS
from inferx.compiler.families.common.rope import pairing, rope_regions
from inferx.compiler.families.common.rows import gated_split
from inferx.compiler.families.common.tile import Emitter
from inferx.compiler.families.qgemm.codegen import qlinear_of
from inferx.compiler.families.qgemm.schedule import QGemmSchedule
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import get_int
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import TensorType

# Prompt lengths below max_seq_len's bucket that get kernels of their own (``row_buckets``).
PREFILL_ROW_BUCKETS = (16, 128, 512)


def _natural_heads(kernel: KernelOp, bn: int) -> bool:
    """Tiles of ``bn`` columns hold whole RoPE heads in their natural order (``pairing``'s "t"), so
    each tile's W rows are a run (a TMA box)."""
    q = qlinear_of(kernel)
    ops = list(kernel.body.block.ops)
    try:
        regions = rope_regions(Emitter(kernel, "heuristic"), q, ops[ops.index(q) + 1:])
    except CodegenError:
        return False
    return pairing(regions, bn) == "t"


def decode_rows(kernel: KernelOp) -> bool:
    """The kernel's rows are a batch of single tokens (no ``seq`` among them)."""
    x_t = qlinear_of(kernel).input.type
    assert isinstance(x_t, TensorType)
    return "seq" not in sy.symbols_of(sy.product(x_t.shape[:-1]))


def heuristic_schedule(kernel: KernelOp, target: str = "sm_90", rows: int | None = None) -> QGemmSchedule:
    q = qlinear_of(kernel)
    x_t, y_t = q.input.type, q.result.type
    assert isinstance(x_t, TensorType) and isinstance(y_t, TensorType)
    n, k = y_t.shape[-1], x_t.shape[-1]
    group = get_int(q.attributes, "group")
    prefill = not decode_rows(kernel)
    bn = 64 if not isinstance(n, int) or n >= 64 else 32 if n >= 32 else 16
    dense = q.dense is not None and (rows is None or rows >= get_int(q.attributes, "dense_min_rows"))
    if target == "cpu":
        return QGemmSchedule(64 if prefill else 16, bn, group)
    if prefill:
        bk = min(group, 64)
        split = gated_split(q, list(kernel.body.block.ops))  # type: ignore[arg-type]
        gated = split is not None
        if dense:
            rope = any(isinstance(o, nn.RopeOp) for o in kernel.body.block.ops)
            wide = 128 if gated or rope else 256
            tma = not (split and split.pairs) and (not rope or _natural_heads(kernel, wide))
            return QGemmSchedule(128, wide, bk, num_warps=8, num_stages=3, dense=True, tma=tma)
        if rows is not None and rows <= 16:
            return QGemmSchedule(16, 32, min(group, 128), num_warps=4, num_stages=4)
        if rows is not None and rows <= 128:
            return QGemmSchedule(64, 64, bk, num_warps=4, num_stages=3)
        rope = any(isinstance(o, nn.RopeOp) for o in kernel.body.block.ops)
        if (rows is not None and rows <= 512) or rope:
            return QGemmSchedule(128, 64 if gated else 128, bk, num_warps=8, num_stages=3)
        return QGemmSchedule(256, 64 if gated else 128, bk, num_warps=8, num_stages=3)
    tile_n = n // 2 if isinstance(n, int) and gated_split(q, list(kernel.body.block.ops)) else n  # type: ignore[arg-type]
    if rows is not None and rows > 1:
        return _decode_dot_schedule(tile_n, k, group)
    if isinstance(n, int) and n <= 2048:  # few programs: narrower still, and loads a step ahead
        return _one_row(k, group, 8, 1024, 8, prefetch=1)
    if isinstance(k, int) and k >= 8192:  # long rows: longer steps on 8 warps
        return _one_row(k, group, 16, 1024, 8)
    programs = -(-tile_n // 16) if isinstance(tile_n, int) else 0
    return _one_row(k, group, 16, 512, 4, prefetch=int(0 < programs <= 2 * HOPPER_SMS))


def _one_row(k: object, group: int, bn: int, bk: int, warps: int, prefetch: int = 0) -> QGemmSchedule:
    """The one-row GEMV at BK ``bk`` (halved until it divides K and is whole groups; else one
    group a step)."""
    while bk > group and not (isinstance(k, int) and k % bk == 0 and bk % group == 0):
        bk //= 2
    if not (isinstance(k, int) and k % bk == 0 and bk % group == 0):
        bk = group
    return QGemmSchedule(1, bn, bk, num_warps=warps, num_stages=2, prefetch=prefetch)


def _decode_dot_schedule(tile_n: object, k: object, group: int) -> QGemmSchedule:
    """A decode batch's tile: 16 x 64 (32 for a narrow N), BK the group up to 128, 4 warps, 3
    stages, split-K doubled (up to 8, K a multiple of the slices' steps) until the programs fill
    four waves of the SMs."""
    bk = min(group, 128)
    bn = 64 if not isinstance(tile_n, int) or tile_n >= 64 else 32
    tiles = -(-tile_n // bn) if isinstance(tile_n, int) else 4 * HOPPER_SMS
    split = 1
    while split < 8 and tiles * split < 4 * HOPPER_SMS and isinstance(k, int) and k % (2 * split * bk) == 0:
        split *= 2
    return QGemmSchedule(16, bn, bk, num_warps=4, num_stages=3, split_k=split)
