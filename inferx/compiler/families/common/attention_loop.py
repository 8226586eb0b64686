"""The key loop attention kernels share (the attention family's and the fused attention and o
projection's): online softmax over key blocks, and the decode form's query loads."""

from __future__ import annotations

from dataclasses import dataclass

from inferx.compiler.families.common.e4m3 import emit_from_bytes
from inferx.compiler.families.common.tile import Emitter
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.types import DType, TensorType

LOG2E = 1.4426950408889634


def _padded(d: int) -> int:
    """The tile width of a head dim: the next power of two, at least 16."""
    return max(16, 1 << (d - 1).bit_length())


@dataclass(frozen=True)
class _Loop:
    """What one online-softmax loop over key blocks needs to know of its kernel."""

    causal: bool
    window: int | None
    cap: float | None
    scale: float
    low: bool  # f16/bf16 operands (else fp32, dots in IEEE precision)
    d: int
    dv: int
    hkv: int
    T: str  # the cache length, as code
    pos: str  # the query positions, shaped to broadcast against key indices ``j[None, :]``
    base2: bool  # softmax in base 2 (the scale carries log2(e)); else base e
    pad_masks: bool  # mask head-dim lanes only where the head dim is not a power of two >= 16
    # An FP8 cache: K and V arrive as E4M3 bytes, decoded to ``qdt`` (q's Triton type, fp32 when
    # q is), and each key's logit is scaled by its head's ``ksc`` too (``kv_scales`` loads both).
    kv_fp8: bool = False
    qdt: str = "tl.float32"
    # A paged cache: (the block table's kernel input, its blocks a sequence, the block size); key
    # j of sequence b is slot j % B of block table[b, j // B] (``ix.attention``)
    paged: tuple[str, int, int] | None = None


def _kv_loop(em: Emitter, op: nn.AttentionOp, lo: str, hi: str, limit: str, masked: bool, c: _Loop) -> None:
    """One online-softmax loop over key blocks ``[lo, hi)`` of keys below ``limit``, updating
    ``m_i``, ``l_i`` and ``acc``; ``masked`` False where every key of those blocks is valid for
    every query (no masks at all)."""
    ki, vi = (f"in{v.index}" for v in (op.k, op.v))  # type: ignore[attr-defined]
    precision = "" if c.low else ', input_precision="ieee"'
    e = em.emit
    e(f"for j0 in range({lo}, {hi}, BN):")
    em.indent += 1
    e("j = j0 + tl.arange(0, BN)")
    if masked:
        e(f"jm = j < {limit}")
    k_mask = ["jm[None, :]"] if masked else []
    v_mask = ["jm[:, None]"] if masked else []
    if not c.pad_masks or c.d != _padded(c.d):
        k_mask.append(f"(dd[:, None] < {c.d})")
    if not c.pad_masks or c.dv != _padded(c.dv):
        v_mask.append(f"(de[None, :] < {c.dv})")
    if c.paged is not None:  # each key's block; keys of masked blocks with no block are not read
        table, per_seq, bs = c.paged
        e(f"kb = tl.load({table} + b * {per_seq} + j // {bs}{', mask=jm, other=-1' if masked else ''})")
        if masked:
            k_mask[0] = "(jm & (kb >= 0))[None, :]"
            v_mask[0] = "(jm & (kb >= 0))[:, None]"
        k_row, v_row = f"(kb[None, :] * {c.hkv} + hk) * {bs} + j[None, :] % {bs}", \
            f"(kb[:, None] * {c.hkv} + hk) * {bs} + j[:, None] % {bs}"
    else:
        k_row, v_row = f"(b * {c.hkv} + hk) * {c.T} + j[None, :]", f"(b * {c.hkv} + hk) * {c.T} + j[:, None]"
    km = f", mask={' & '.join(k_mask)}, other=0" if k_mask else ""
    vm = f", mask={' & '.join(v_mask)}, other=0" if v_mask else ""
    e(f"k = tl.load({ki} + ({k_row}) * {c.d} + dd[:, None]{km})")
    if c.kv_fp8:
        emit_from_bytes(em, "k", "k", c.qdt)
    elif not c.low:
        e("k = k.to(tl.float32)")
    unit = LOG2E if c.base2 else 1.0
    scaled = (lambda f: f"({f!r} * ksc)") if c.kv_fp8 else repr  # noqa: E731
    if c.cap is None:
        e(f"s = tl.dot(q, k{precision}) * {scaled(c.scale * unit)}")
    else:
        e(f"s = tl.dot(q, k{precision}) * {scaled(c.scale)}")
        cap = f"({c.cap * unit!r})" if c.base2 else repr(c.cap)
        e(f"s = {cap} * (2.0 * tl.sigmoid(2.0 * s / {c.cap!r}) - 1.0)")
    if masked:
        valid = "jm[None, :]"
        if c.causal:
            valid += f" & (j[None, :] <= {c.pos})"
        if c.window is not None:
            valid += f" & ({c.pos} - j[None, :] < {c.window})"
        e(f"s = tl.where({valid}, s, float('-inf'))")
    exp = "tl.math.exp2" if c.base2 else "tl.exp"
    e("m_new = tl.maximum(m_i, tl.max(s, 1))")
    e(f"p = {exp}(s - m_new[:, None])")
    e(f"alpha = {exp}(m_i - m_new)")
    e("l_i = l_i * alpha + tl.sum(p, 1)")
    e(f"v = tl.load({vi} + ({v_row}) * {c.dv} + de[None, :]{vm})")
    if c.kv_fp8:
        emit_from_bytes(em, "v", "v", c.qdt)
    if c.low:
        e("acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)")
    else:
        e(f"acc = acc * alpha[:, None] + tl.dot(p, v.to(tl.float32){precision})")
    e("m_i = m_new")
    em.indent -= 1


def context(em: Emitter, op: nn.AttentionOp) -> tuple[str, tuple[str, int, int] | None]:
    """The keys a sequence may hold, as code (the cache's length, or a paged cache's blocks a
    sequence times its block size), and ``_Loop.paged`` for a paged cache (else None)."""
    k_t = op.k.type
    assert isinstance(k_t, TensorType)
    if op.block_table is None:
        return em.dim(k_t.shape[2]), None
    t_t = op.block_table.type
    assert isinstance(t_t, TensorType)
    per_seq, bs = int(t_t.shape[1]), int(k_t.shape[2])  # type: ignore[arg-type]
    return str(per_seq * bs), (f"in{op.block_table.index}", per_seq, bs)  # type: ignore[attr-defined]


def q_dtype(op: nn.AttentionOp) -> DType:
    """The query's element type (the one an FP8 cache's keys and values are decoded to)."""
    q_t = op.q.type
    assert isinstance(q_t, TensorType)
    return q_t.dtype


def kv_scales(em: Emitter, op: nn.AttentionOp) -> bool:
    """With an FP8 cache, loads KV head ``hk``'s scales as ``ksc`` and ``vsc`` (the output is
    multiplied by ``vsc``); returns whether the cache is FP8."""
    if op.k_scale is None or op.v_scale is None:
        return False
    em.emit(f"ksc = tl.load(in{op.k_scale.index} + hk)")  # type: ignore[attr-defined]
    em.emit(f"vsc = tl.load(in{op.v_scale.index} + hk)")  # type: ignore[attr-defined]
    return True


def decode_queries(em: Emitter, op: nn.AttentionOp, low: bool, T: str) -> None:
    """The start of a decode program that owns KV head ``hk`` of sequence ``b`` (``bh``, already
    named): the query heads that share it (``h``, BM rows, ``gm`` the real ones) loaded as ``q``
    ([BM, BD]), the sequence's position ``pos`` and KV length ``kvl``, and an empty softmax state
    (``m_i``, ``l_i``, ``acc``)."""
    q_t, k_t, v_t = (v.type for v in (op.q, op.k, op.v))
    assert isinstance(q_t, TensorType) and isinstance(k_t, TensorType) and isinstance(v_t, TensorType)
    hq, hkv, d = (int(x) for x in (q_t.shape[1], k_t.shape[1], q_t.shape[3]))  # type: ignore[arg-type]
    group = hq // hkv
    e = em.emit
    e(f"b = bh // {hkv}")
    e(f"hk = bh % {hkv}")
    e("g = tl.arange(0, BM)")
    e(f"gm = g < {group}")
    e(f"h = hk * {group} + g")
    e("dd = tl.arange(0, BD)")
    e("de = tl.arange(0, BDV)")
    q_mask = f"gm[:, None] & (dd[None, :] < {d})"
    e(f"q = tl.load(in{op.q.index} + (b * {hq} + h[:, None]) * {d} + dd[None, :], mask={q_mask}, other=0)")  # type: ignore[attr-defined]
    if not low:
        e("q = q.to(tl.float32)")
    e(f"pos = tl.load(in{op.positions.index} + b)" if op.positions is not None else f"pos = {T} - 1")  # type: ignore[attr-defined]
    e(f"kvl = tl.load(in{op.kv_lens.index} + b)" if op.kv_lens is not None else f"kvl = {T}")  # type: ignore[attr-defined]
    e("m_i = tl.zeros((BM,), dtype=tl.float32) - 1.0e30")
    e("l_i = tl.zeros((BM,), dtype=tl.float32)")
    e("acc = tl.zeros((BM, BDV), dtype=tl.float32)")
