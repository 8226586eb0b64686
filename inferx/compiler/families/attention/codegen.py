"""The attention template: one flash-style kernel for prefill and decode, GQA-aware.

Applies to a kernel whose body is ``attention -> epilogue`` (the epilogue is usually the
transpose and reshape back to ``[batch, seq, heads * head_dim]``). A program owns BM queries of
one (sequence, query head) and streams that sequence's keys in blocks of BN up to its
``kv_lens`` entry, with an online softmax in fp32. Masks (causal, sliding window) use each
query's absolute position from ``positions``, so the same code serves any step. A query with
no visible key writes zeros.

Decode (one query per sequence) runs split-KV instead: a program owns the query heads that share
one KV head (GQA packing: the K/V block is read once for all of them) and one of ``SPLITS``
slices of the context; it writes its partial softmax state to scratch, and the last program to
arrive for a (sequence, KV head) merges the slices and runs the epilogue. So a step has enough
programs to fill the chip even at batch 1, and still one launch.

Schedules (``AttentionSchedule``): prefill takes BM (queries per program), BN (keys per step),
warps and pipeline stages; decode takes SPLITS (context slices), BN, warps and stages (its BM is
the GQA group padded to 16, not a choice). ``heuristic_schedule`` is what a kernel gets when the
tuning database has no record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import BlockArgument

from inferx.compiler.families.common.attention_loop import (
    _kv_loop,
    _Loop,
    _padded,
    context,
    decode_queries,
    kv_scales,
    q_dtype,
)
from inferx.compiler.families.common.errors import CodegenError
from inferx.compiler.families.common.source import module_source as _module
from inferx.compiler.families.common.tile import TL_DTYPE, Emitter, Tile, release_writes
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_base import get_flag, get_float, get_int, get_opt_float
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import DType, TensorType
from inferx.runtime.kernel_source import KernelSource, Param, Scratch


def applies(kernel: KernelOp) -> str | None:
    first = kernel.body.block.first_op
    if not isinstance(first, nn.AttentionOp):
        return "the body does not start with attention"
    if not all(isinstance(v, BlockArgument) for v in first.operands):
        return "attention's operands must be kernel inputs"
    return None


@dataclass(frozen=True)
class AttentionSchedule:
    """How one attention kernel is tiled. A decode schedule has ``splits`` > 0 and ``bm`` 0 (the
    GQA group sets BM); a prefill schedule has ``bm`` > 0 and ``splits`` 0. SPLITS is a power of
    two: the last-arrival test masks the ever-growing counter with SPLITS - 1. ``kv_f16`` (decode,
    an FP8 cache under a bf16 query): keys and values decoded to f16 and the query rounded to
    f16 for the dots, where the GPU's conversion from E4M3 gives f16 in one instruction a pair
    and bf16 only through f16 (one more a value); every E4M3 value is an f16, and a bf16 query
    is one unless its magnitude is past f16's range (65504) or under 2^-24."""

    bn: int = 32
    num_warps: int = 4
    num_stages: int = 2
    bm: int = 0
    splits: int = 0
    kv_f16: int = 0

    @property
    def decode(self) -> bool:
        return self.splits > 0

    def to_dict(self) -> dict[str, int]:
        """The schedule as the tuning database stores it: the four fields of its shape, and
        ``kv_f16`` where on."""
        d = {"bn": self.bn, "num_warps": self.num_warps, "num_stages": self.num_stages}
        d.update({"splits": self.splits} if self.decode else {"bm": self.bm})
        return d | ({"kv_f16": 1} if self.kv_f16 else {})


# Context slices per (sequence, KV head) in decode: as many as keep about DECODE_PROGRAMS programs
# in flight (two an SM of an H200), at most DECODE_SPLITS. On the CPU (Triton's interpreter runs
# programs one by one) two slices still exercise the merge at a fraction of the cost.
DECODE_SPLITS = 16  # powers of two (the arrival test masks with SPLITS - 1)
DECODE_PROGRAMS = 256
CPU_SPLITS = 2
# An FP8 cache's decode takes at least this many slices of 128-key blocks, and under a bf16 query
# decodes keys and values to f16 (``kv_f16``): decoding E4M3 adds work per byte, which more
# programs in flight and longer blocks pay for (the 8B shape's heads at context 8192: batches 16
# and 64 fastest at 8 slices of 128 keys with kv_f16, batch 1 at 16 slices in 3 stages; the 1-2
# slices of 64 keys a bf16 cache's rule gives are 1.2-1.3x slower; docs/performance.md, "FP8 KV
# cache")
FP8_CACHE_SPLITS = 8
FP8_CACHE_BN = 128


def is_decode(kernel: KernelOp) -> bool:
    """One query per sequence: the split-KV decode kernel."""
    op = kernel.body.block.first_op
    assert isinstance(op, nn.AttentionOp)
    q_t = op.q.type
    assert isinstance(q_t, TensorType)
    return q_t.shape[2] == 1


def decode_splits(kernel: KernelOp, rows: int | None) -> int:
    """Context slices per (sequence, KV head) for ``rows`` sequences: the largest power of two,
    at most ``DECODE_SPLITS``, that keeps rows x KV heads x slices within ``DECODE_PROGRAMS``
    (one slice when the sequences and KV heads alone fill it); at least ``FP8_CACHE_SPLITS`` for
    an FP8 cache."""
    op = kernel.body.block.first_op
    assert isinstance(op, nn.AttentionOp)
    k_t = op.k.type
    assert isinstance(k_t, TensorType)
    hkv = k_t.shape[1]
    per_split = (rows or 1) * (hkv if isinstance(hkv, int) else 1)
    splits = 1
    while splits < DECODE_SPLITS and per_split * splits * 2 <= DECODE_PROGRAMS:
        splits *= 2
    return max(splits, FP8_CACHE_SPLITS) if op.k_scale is not None else splits


def heuristic_schedule(kernel: KernelOp, target: str = "sm_90", rows: int | None = None) -> AttentionSchedule:
    """The schedule when the tuning database has none. ``rows``: the decode batch bucket the
    kernel is generated for (None: batch 1).

    Decode on sm_90 cuts each (sequence, KV head)'s context into ``decode_splits`` slices (the
    fewer, the more sequences and KV heads there are) of 64-key blocks on 4 warps, 2 stages: the
    tuned records of the Llama-3.2-1B and Llama-3-8B shapes (tuning_logs/h200/attention.jsonl) take
    8-16 slices at batch 1, 4-8 at 4, 1-4 at 16 and 1-4 at 64. At large batches one slice of
    64-key blocks is much faster than many slices of 32 keys, and tuning finds it best there too,
    at its bytes' roofline (docs/performance.md). An FP8 cache: ``FP8_CACHE_SPLITS`` slices at
    least, of ``FP8_CACHE_BN``-key blocks (3 stages at 16 slices), kv_f16 under a bf16 query. On
    the CPU ``CPU_SPLITS``
    slices of 32 keys. Prefill: 64 queries per program when the query length is symbolic (16 for a
    static one) and 32-key blocks; 4 warps, 2 stages. On sm_90 a symbolic-length prefill takes
    64-key blocks in 3 stages: for long prompts it is the best or near the best of the usual
    tiles on Llama-3-8B and Llama-3.2-1B shapes (docs/performance.md)."""
    if is_decode(kernel):
        if target == "cpu":
            return AttentionSchedule(bn=32, splits=CPU_SPLITS)
        splits = decode_splits(kernel, rows)
        op = kernel.body.block.first_op
        assert isinstance(op, nn.AttentionOp)
        if op.k_scale is not None:  # an FP8 cache
            return AttentionSchedule(bn=FP8_CACHE_BN, splits=splits, num_stages=3 if splits >= 16 else 2,
                                     kv_f16=int(q_dtype(op) == DType.bf16))
        return AttentionSchedule(bn=64, splits=splits)
    op = kernel.body.block.first_op
    assert isinstance(op, nn.AttentionOp)
    q_t = op.q.type
    assert isinstance(q_t, TensorType)
    if "seq" not in q_t.symbols():
        return AttentionSchedule(bn=32, bm=16)
    if target == "cpu":
        return AttentionSchedule(bn=32, bm=64)
    return AttentionSchedule(bn=64, bm=64, num_warps=4, num_stages=3)


def generate(kernel: KernelOp, name: str, target: str = "sm_90",
             schedule: AttentionSchedule | None = None) -> KernelSource:
    """Triton source of an attention kernel under ``schedule`` (default: ``heuristic_schedule``);
    CodegenError when the schedule is of the other shape (a prefill schedule for a decode kernel)."""
    em = Emitter(kernel, name)
    sched = schedule if schedule is not None else heuristic_schedule(kernel, target)
    op = kernel.body.block.first_op
    assert isinstance(op, nn.AttentionOp)
    q_t, k_t, v_t = (v.type for v in (op.q, op.k, op.v))
    assert isinstance(q_t, TensorType) and isinstance(k_t, TensorType) and isinstance(v_t, TensorType)
    hq, hkv, d, dv = q_t.shape[1], k_t.shape[1], q_t.shape[3], v_t.shape[3]
    if not all(isinstance(x, int) for x in (hq, hkv, d, dv)):
        raise em.error(op, "heads and head_dim must be static")
    assert isinstance(hq, int) and isinstance(hkv, int) and isinstance(d, int) and isinstance(dv, int)
    attrs = op.attributes
    scale = get_float(attrs, "scale", 1.0 / math.sqrt(d))
    causal = get_flag(attrs, "causal")
    window = get_int(attrs, "window") if attrs.get("window") is not None else None
    cap = get_opt_float(attrs, "softcap")
    if sched.decode != is_decode(kernel):
        kind, want = ("decode", "prefill") if sched.decode else ("prefill", "decode")
        raise CodegenError(f"kernel {name}: a {kind} attention schedule {sched.to_dict()} for a {want} kernel")
    if sched.decode:
        return _decode(kernel, name, em, op, sched)
    bm, bn = sched.bm, sched.bn
    bd, bdv = _padded(d), _padded(dv)
    low = q_t.dtype in (DType.f16, DType.bf16)
    (T, paged), S, B = context(em, op), em.dim(q_t.shape[2]), em.dim(q_t.shape[0])
    qi = f"in{op.q.index}"  # type: ignore[attr-defined]

    # Heads vary fastest over the grid; under a causal mask the query blocks go from the last (the
    # most keys) to the first, so the longest programs start first and the short ones fill the tail
    em.emit("pid_bh = tl.program_id(0)")
    em.emit("pid_m = tl.num_programs(1) - 1 - tl.program_id(1)" if causal else "pid_m = tl.program_id(1)")
    em.emit(f"b = pid_bh // {hq}")
    em.emit(f"h = pid_bh % {hq}")
    em.emit(f"hk = h // {hq // hkv}")
    em.emit("i = pid_m * BM + tl.arange(0, BM)")
    em.emit(f"im = i < {S}")
    em.emit("dd = tl.arange(0, BD)")
    em.emit("de = tl.arange(0, BDV)")
    em.emit(
        f"q = tl.load({qi} + ((b * {hq} + h) * {S} + i[:, None]) * {d} + dd[None, :], "
        f"mask=im[:, None] & (dd[None, :] < {d}), other=0)"
    )
    if not low:
        em.emit("q = q.to(tl.float32)")
    if op.positions is not None:
        em.emit(f"pos = tl.load(in{op.positions.index} + b * {S} + i, mask=im, other=0)")  # type: ignore[attr-defined]
    else:
        em.emit(f"pos = {T} - {S} + i")
    if op.kv_lens is not None:
        em.emit(f"kvl = tl.load(in{op.kv_lens.index} + b)")  # type: ignore[attr-defined]
    else:
        em.emit(f"kvl = {T}")
    em.emit("m_i = tl.zeros((BM,), dtype=tl.float32) - 1.0e30")
    em.emit("l_i = tl.zeros((BM,), dtype=tl.float32)")
    em.emit("acc = tl.zeros((BM, BDV), dtype=tl.float32)")
    fp8 = kv_scales(em, op)
    # Only the key blocks some query of this block may see: up to the block's last position when
    # causal (half the blocks of a prompt), from its first position's window start with a window
    lo, hi = "0", "kvl"
    if causal:
        em.emit("hi = tl.minimum(kvl, tl.max(tl.where(im, pos, 0), 0) + 1)")
        hi = "hi"
    if window is not None:
        em.emit(f"lo = tl.maximum(tl.min(tl.where(im, pos, kvl), 0) - {window - 1}, 0) // BN * BN")
        lo = "lo"
    # Key blocks that every query of the block sees (causal, no window: keys up to the block's
    # first position) run without masks; the rest (the diagonal) masked. Softmax in base 2: the
    # scale carries log2(e), so exp2 replaces exp (both make prefill attention markedly faster;
    # docs/performance.md).
    loop = _Loop(causal, window, cap, scale, low, d, dv, hkv, T, pos="pos[:, None]", base2=True, pad_masks=True,
                 kv_fp8=fp8, qdt=TL_DTYPE[q_t.dtype], paged=paged)
    if causal and window is None:
        em.emit("mid = (tl.minimum(kvl, tl.min(tl.where(im, pos, kvl), 0) + 1) // BN) * BN")
        _kv_loop(em, op, "0", "mid", "kvl", False, loop)
        lo = "mid"
    _kv_loop(em, op, lo, hi, "kvl", True, loop)
    em.emit(f"o = acc{' * vsc' if fp8 else ''} / tl.where(l_i > 0, l_i, 1.0)[:, None]")
    out_t = op.result.type
    assert isinstance(out_t, TensorType)
    coords = ["b", "h", "i[:, None]", "de[None, :]"]
    em.values[op.result] = Tile("o", coords, f"(im[:, None] & (de[None, :] < {dv}))", out_t)
    ops = list(kernel.body.block.ops)[1:]
    em.run_epilogue(ops)
    params = em.params()
    args = ", ".join([p.name for p in params] + [f"{c}: tl.constexpr" for c in ("BM", "BN", "BD", "BDV")])
    grid = (f"{B} * {hq}", f"cdiv({S}, {bm})")
    return KernelSource(
        name=name,
        template="attention",
        source=_module(name, args, em.lines),
        params=tuple(params),
        grid=grid,
        constexprs={"BM": bm, "BN": bn, "BD": bd, "BDV": bdv},
        aliases=em.aliases,
        num_warps=sched.num_warps,
        num_stages=sched.num_stages,
    )




def _decode(kernel: KernelOp, name: str, em: Emitter, op: nn.AttentionOp, sched: AttentionSchedule) -> KernelSource:
    splits = sched.splits
    q_t, k_t, v_t = (v.type for v in (op.q, op.k, op.v))
    assert isinstance(q_t, TensorType) and isinstance(k_t, TensorType) and isinstance(v_t, TensorType)
    hq, hkv, d, dv = (int(x) for x in (q_t.shape[1], k_t.shape[1], q_t.shape[3], v_t.shape[3]))  # type: ignore[arg-type]
    group = hq // hkv
    attrs = op.attributes
    scale = get_float(attrs, "scale", 1.0 / math.sqrt(d))
    causal = get_flag(attrs, "causal")
    window = get_int(attrs, "window") if attrs.get("window") is not None else None
    cap = get_opt_float(attrs, "softcap")
    bm = max(16, 1 << (group - 1).bit_length())
    bd, bdv = _padded(d), _padded(dv)
    low = q_t.dtype in (DType.f16, DType.bf16)
    (T, paged), B = context(em, op), em.dim(q_t.shape[0])
    e = em.emit
    e("sp = tl.program_id(0)")
    e("bh = tl.program_id(1)")
    decode_queries(em, op, low, T)
    fp8 = kv_scales(em, op)
    qdt = TL_DTYPE[q_t.dtype]
    if sched.kv_f16:
        if not (fp8 and q_t.dtype is DType.bf16):
            raise em.error(op, f"kv_f16 is for an FP8 cache under a bf16 query: {sched}")
        e("q = q.to(tl.float16)")
        qdt = "tl.float16"
    e("chunk = tl.cdiv(tl.cdiv(kvl, SPLITS), BN) * BN")
    e("start = sp * chunk")
    e("end = tl.minimum(start + chunk, kvl)")
    loop = _Loop(causal, window, cap, scale, low, d, dv, hkv, T, pos="pos", base2=False, pad_masks=False,
                 kv_fp8=fp8, qdt=qdt, paged=paged)
    _kv_loop(em, op, "start", "end", "end", True, loop)
    # Partials to scratch, then the last program of this (sequence, KV head) merges them. Only
    # the group's rows (BM pads them to 16) of the slices that hold keys are written and read:
    # a Llama-3-8B step at context 512 under its tuned SPLITS 16 and BN 64 has 8 such slices of
    # 16, and the merge read 128 KB per KV head where 16 KB carry the result.
    e("base = bh * SPLITS + sp")
    e("live = gm & (start < end)")
    e("tl.store(ws_acc + (base * BM + g[:, None]) * BDV + de[None, :], acc, mask=live[:, None])")
    e("tl.store(ws_ml + (base * 2) * BM + g, m_i, mask=live)")
    e("tl.store(ws_ml + (base * 2 + 1) * BM + g, l_i, mask=live)")
    release_writes(em)
    e("tl.debug_barrier()")
    # The counter only grows: the last arrival of every step sees arrived = SPLITS - 1 modulo
    # SPLITS (a power of two, so the test survives int32 wrap-around). Nothing resets it, so a
    # graph replays correctly from any state.
    e("arrived = tl.atomic_add(ws_count + bh, 1)")
    e("if (arrived & (SPLITS - 1)) == SPLITS - 1:")
    em.indent += 1
    e("tl.debug_barrier()")
    e("mm = tl.zeros((BM,), dtype=tl.float32) - 1.0e30")
    e("ll = tl.zeros((BM,), dtype=tl.float32)")
    e("oo = tl.zeros((BM, BDV), dtype=tl.float32)")
    e("for s2 in tl.static_range(SPLITS):  # unrolled: every slice's loads issue at once")
    em.indent += 1
    e("b2 = bh * SPLITS + s2")
    e("held = gm & (s2 * chunk < kvl)  # what that slice's program wrote")
    e("m_s = tl.load(ws_ml + (b2 * 2) * BM + g, mask=held, other=-1.0e30, cache_modifier='.cg')")
    e("l_s = tl.load(ws_ml + (b2 * 2 + 1) * BM + g, mask=held, other=0, cache_modifier='.cg')")
    e("a_s = tl.load(ws_acc + (b2 * BM + g[:, None]) * BDV + de[None, :], mask=held[:, None], other=0, "
      "cache_modifier='.cg')")
    e("m2 = tl.maximum(mm, m_s)")
    e("x1 = tl.exp(mm - m2)")
    e("x2 = tl.exp(m_s - m2)")
    e("ll = ll * x1 + l_s * x2")
    e("oo = oo * x1[:, None] + a_s * x2[:, None]")
    e("mm = m2")
    em.indent -= 1
    e(f"o = oo{' * vsc' if fp8 else ''} / tl.where(ll > 0, ll, 1.0)[:, None]")
    out_t = op.result.type
    assert isinstance(out_t, TensorType)
    em.values[op.result] = Tile(
        "o", ["b", "h[:, None]", "0", "de[None, :]"], f"(gm[:, None] & (de[None, :] < {dv}))", out_t
    )
    em.run_epilogue(list(kernel.body.block.ops)[1:])
    em.indent -= 1
    params = em.params()
    n_bh = f"{B} * {hkv}"
    scratch = (
        Scratch((f"{n_bh} * {splits} * {bm} * {bdv}",), "f32"),
        Scratch((f"{n_bh} * {splits} * 2 * {bm}",), "f32"),
        Scratch((n_bh,), "i32"),
    )
    params += [
        Param("ws_acc", "scratch", index=0, dtype="f32"),
        Param("ws_ml", "scratch", index=1, dtype="f32"),
        Param("ws_count", "scratch", index=2, dtype="i32"),
    ]
    consts = ("BM", "BN", "BD", "BDV", "SPLITS")
    args = ", ".join([p.name for p in params] + [f"{c}: tl.constexpr" for c in consts])
    return KernelSource(
        name=name,
        template="attention",
        source=_module(name, args, em.lines),
        params=tuple(params),
        grid=(str(splits), n_bh),
        aliases=em.aliases,
        scratch=scratch,
        constexprs={"BM": bm, "BN": sched.bn, "BD": bd, "BDV": bdv, "SPLITS": splits},
        num_warps=sched.num_warps,
        num_stages=sched.num_stages,
    )
