"""The GEMM template's own schedules, where the tuning database has no record: GEMV mode for one
decode row, the dot path with split-K for decode batch buckets, wgmma-sized tiles for prefill (64
x 64 for short prompts). Each rule says why it holds on Hopper (figures: docs/performance.md). Used by
``gemm.generate`` when given no schedule, by the compiler driver for fallbacks, and by the tuner,
which measures a task's heuristic schedule first."""

from __future__ import annotations

from inferx.compiler.families.common.hardware import HOPPER_SMS
from inferx.compiler.families.gemm.codegen import PREFILL_ROW_BUCKETS, GemmSchedule, gated_split
from inferx.compiler.families.gemm.rope import rope_head_dim
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import TensorType


def heuristic_schedule(kernel: KernelOp, target: str = "sm_90", rows: int | None = None) -> GemmSchedule:
    """The schedule when the tuning database has none. ``rows``: the row bucket the kernel is
    generated for: a decode GEMM's batch bucket (None: batch 1), a prefill GEMM's bucket of
    batch x seq (None: any number of rows).

    A decode GEMM for more than one row on sm_90 takes the dot path (GEMV mode would stream the
    weights once per row, so a step's time grows with the batch), with split-K where its tiles
    leave SMs idle
    (``_decode_dot_schedule``).

    Decode-shaped GEMMs (rows = batch, no ``seq``) run in GEMV mode: one row per program, BN=8
    weight rows by BK=512 (or all of a shorter K), 2 stages: close to the best GEMV schedule for
    each Llama-3-8B decode GEMM at batch 1, and it streams the lm_head near the copy rate
    (docs/performance.md). Larger decode batches want the dot path (above). On the CPU (Triton's
    interpreter, where each program costs a Python-level step) decode takes the dot path with
    BM=16, BN=64: far fewer programs, the same results.
    Prefill-shaped GEMMs (rows include ``seq``): BM=64 so that the dot runs on wgmma (128 x 128
    tiles on 8 warps for sm_90, below); narrow or shallow weights shrink BN/BK to 32. A short
    prompt (``rows`` <= max(PREFILL_ROW_BUCKETS)) on sm_90 takes 64 x 64 tiles (BN = head_dim under
    RoPE) on one warpgroup, 4 stages, where the large tiles would leave most SMs idle at its rows
    (fewer programs than half the 132 SMs): at 128 rows they leave 16-48 programs for the
    Llama-3-8B o/down/qkv, where 64 x 64 gives 128-192 and runs about twice as fast. Where they
    come near filling the SMs (the 8B gate/up: 112 programs at 128 rows; the lm_head) the large
    tiles stay, being faster there than 64 x 64 (docs/performance.md)."""
    lin = next(o for o in kernel.body.block.ops if isinstance(o, nn.LinearOp))
    x = lin.input.type
    assert isinstance(x, TensorType)
    row_dims = sy.product(x.shape[:-1])
    n = lin.result.type.shape[-1]  # type: ignore[attr-defined]
    k = x.shape[-1]
    if "seq" in sy.symbols_of(row_dims):
        bn = 64 if isinstance(n, int) and n >= 64 else 32
        bk = 64 if isinstance(k, int) and k >= 64 else 32
        if target == "cpu" or not isinstance(n, int) or n < 128:
            return GemmSchedule(64, bn, bk)
        # sm_90: 128 x 128 tiles on 8 warps (two warpgroups of wgmma), 3 stages, also with a
        # second accumulator (gated split): faster than BN=64 for long prompts.
        # One accumulator and no RoPE: 128 x 256, faster still where N is wide (docs/performance.md).
        ops = list(kernel.body.block.ops)
        epilogue = ops[ops.index(lin) + 1 :]
        short = rows is not None and rows <= max(PREFILL_ROW_BUCKETS)
        if not any(isinstance(o, nn.RopeOp) for o in epilogue):
            gated = gated_split(lin, epilogue) is not None
            wide = not gated and n >= 256
            large = GemmSchedule(128, 256 if wide else 128, bk, num_warps=8, num_stages=3)
            tiles = -(-(rows or 0) // large.bm) * -(-(n // 2 if gated else n) // large.bn)
            if short and 2 * tiles < HOPPER_SMS:  # the large tiles would leave most SMs idle
                return GemmSchedule(64, 64, bk, num_warps=4, num_stages=4)
            return large
        # A RoPE GEMM tiles one head per program (BN = head_dim, 64 or 128), so partners are a
        # swap of halves, not a second dot. Tiles of two 64-wide heads (natural order, each
        # head's halves swapped: ``gemm_rope.partner_swap``) are the tuner's to measure.
        head = rope_head_dim(kernel, lin, epilogue)
        bn = head if head in (64, 128) else 128
        if short:
            return GemmSchedule(64, bn, bk, num_warps=4, num_stages=4)
        return GemmSchedule(128, bn, bk, num_warps=8, num_stages=3)
    if target == "cpu":
        return GemmSchedule(16, 64 if isinstance(n, int) and n >= 64 else 32, 32)
    if rows is not None and rows > 1:
        return _decode_dot_schedule(kernel, lin, rows)
    bk = min(512, 1 << max(4, (k - 1).bit_length())) if isinstance(k, int) else 512
    return GemmSchedule(1, 8, bk, num_warps=4, num_stages=2)


def _decode_dot_schedule(kernel: KernelOp, lin: nn.LinearOp, rows: int) -> GemmSchedule:
    """A decode GEMM's schedule on the dot path (batch buckets of 2-64 rows on sm_90): BM = 16
    rows (64 from 17 up); BN = the head dim under RoPE (whole-head tiles, the records' best at 16
    and 64 rows), 128 for a vocabulary-wide N, else 64; split-K doubled (up to 8, K
    a multiple of SPLIT_K x BK) until the programs fill the 132 SMs once; 8 warps on 128-wide
    tiles and on 64-row tiles of a gated or RoPE GEMM, else 4; 4 stages.

    Drawn from the tuning records of the Llama-3.2-1B and Llama-3-8B decode GEMMs at 4, 16 and
    64 rows (tuning_logs/h200/gemm.jsonl): where those records hold this rule's tiles and split,
    it is close to the best schedule of nearly every task. Where a task's N alone fills the SMs
    (gate|up, lm_head) there is no split. At 64 rows the gated and RoPE tiles are slow on 4 warps,
    hence the 8 warps there (docs/performance.md)."""
    x, n = lin.input.type, lin.result.type.shape[-1]  # type: ignore[attr-defined]
    assert isinstance(x, TensorType)
    k = x.shape[-1]
    bm = 16 if rows <= 16 else 64
    bk = 128 if isinstance(k, int) and k >= 128 else 32
    if not isinstance(n, int) or not isinstance(k, int):
        return GemmSchedule(bm, 32, bk, num_warps=4, num_stages=4)
    ops = list(kernel.body.block.ops)
    epilogue = ops[ops.index(lin) + 1 :]
    gated = gated_split(lin, epilogue) is not None
    rope = any(isinstance(o, nn.RopeOp) for o in epilogue)
    out_n = n // 2 if gated else n
    bn = 64 if out_n >= 64 else 32
    if rope:
        head = rope_head_dim(kernel, lin, epilogue)
        bn = head if head in (64, 128) else bn
    elif out_n >= 8 * HOPPER_SMS * 64:  # a vocabulary: 128-wide tiles still fill eight waves
        bn = 128
    tiles = -(-rows // bm) * -(-out_n // bn)
    split = 1
    layernorm = isinstance(ops[0], nn.LayerNormOp)  # split-K is not generated under a LayerNorm
    # double while the programs number under 128 (a wave on 132 SMs, within 3%); a RoPE GEMM's
    # 64-row tiles at most 2 (its last program rotates after the sum of the partials, which a
    # deeper split makes slower)
    most = 2 if rope and bm == 64 else 8
    while not layernorm and split < most and tiles * split < 128 and k % (2 * split * bk) == 0:
        split *= 2
    wide = bn >= 128 or (bm == 64 and (gated or rope))  # two accumulators, or a long epilogue
    return GemmSchedule(bm, bn, bk, num_warps=8 if wide else 4, num_stages=4, split_k=split)
