"""Reference kernels for the position-dependent ops: RoPE, attention and the KV-cache write.

Each follows its op's docstring in ``ops_nn.py``; RoPE's frequency formulas are HuggingFace
transformers' (``modeling_rope_utils.py``), evaluated in float64.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import Operation

from inferx.compiler.interpreter.context import InterpreterError, KernelContext
from inferx.compiler.interpreter.numerics import compute
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_base import Attrs, get_flag, get_float, get_int, get_opt_float, get_str


def inv_freq(attrs: Attrs, rotary_dim: int, positions: np.ndarray) -> np.ndarray:
    """The inverse frequencies ``theta ** (-2i / rotary_dim)`` after the op's scaling.

    ``linear`` divides them by ``factor`` (positions / factor). ``dynamic`` (NTK) raises the base
    when ``seq_len = max(positions) + 1`` exceeds ``original_max_position``. ``llama3`` divides
    low frequencies by ``factor`` and interpolates the middle band (HF ``_compute_llama3_parameters``).
    """
    theta = get_float(attrs, "theta")
    scaling = get_str(attrs, "scaling", nn.ROPE_SCALINGS, default="none")
    exponents = np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim
    if scaling == "dynamic":
        factor = get_float(attrs, "factor")
        original = get_int(attrs, "original_max_position")
        if rotary_dim <= 2:
            raise InterpreterError("ix.rope: dynamic NTK scaling needs rotary_dim > 2")
        seq_len = max(int(positions.max()) + 1 if positions.size else 0, original)
        theta = theta * ((factor * seq_len / original) - (factor - 1)) ** (rotary_dim / (rotary_dim - 2))
    inv = 1.0 / theta**exponents
    if scaling == "linear":
        inv = inv / get_float(attrs, "factor")
    elif scaling == "llama3":
        factor = get_float(attrs, "factor")
        low, high = get_float(attrs, "low_freq_factor"), get_float(attrs, "high_freq_factor")
        old_context = get_int(attrs, "original_max_position")
        low_wavelen, high_wavelen = old_context / low, old_context / high
        wavelen = 2 * np.pi / inv
        scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old_context / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        inv = np.where(medium, smoothed, scaled)
    return inv


def rope(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    """Rotates the first ``rotary_dim`` dims of ``x[b, h, s, d]``; the rest pass through."""
    x, positions = compute(ins[0]), ins[1]
    head_dim = x.shape[-1]
    rot = get_int(op.attributes, "rotary_dim", head_dim)
    half = rot // 2
    angles = positions.astype(np.float64)[:, None, :, None] * inv_freq(op.attributes, rot, positions)
    cos, sin = np.cos(angles), np.sin(angles)  # [b, 1, s, rot/2]
    out = x.copy()
    if get_str(op.attributes, "style", nn.ROPE_STYLES, default="rotate_half") == "rotate_half":
        x1, x2 = x[..., :half], x[..., half:rot]
        out[..., :half] = x1 * cos - x2 * sin
        out[..., half:rot] = x2 * cos + x1 * sin
    else:
        xe, xo = x[..., 0:rot:2], x[..., 1:rot:2]
        out[..., 0:rot:2] = xe * cos - xo * sin
        out[..., 1:rot:2] = xo * cos + xe * sin
    return [out]


def attention(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    """Masked softmax(q k^T * scale) v per query, with GQA; see ``AttentionOp``."""
    assert isinstance(op, nn.AttentionOp)
    q, k, v = compute(ins[0]), compute(ins[1]), compute(ins[2])
    b, hq, s, d = q.shape
    rest = list(ins[3:])
    if op.block_table is not None:  # a paged cache: each sequence's blocks gathered in order
        table = rest.pop().astype(np.int64)
        k, v = _gather_pages(k, table, "k"), _gather_pages(v, table, "v")
    hkv, t = k.shape[1], k.shape[2]
    if op.k_scale is not None:  # an FP8 cache: E4M3 values times each KV head's scale
        from inferx.compiler.ir.fp8 import kv_dequantize  # ir.fp8 rounds with this package's numerics

        k, v = kv_dequantize(k, rest[-2]), kv_dequantize(v, rest[-1])
        rest = rest[:-2]
    if op.positions is not None:
        positions = rest.pop(0).astype(np.int64)
        if positions.shape != (b, s):
            raise InterpreterError(f"ix.attention: positions must be [batch, seq] = [{b}, {s}], got "
                                   f"{list(positions.shape)}")
    else:
        positions = np.broadcast_to(np.arange(s, dtype=np.int64) + (t - s), (b, s))
    kv_lens = rest.pop(0).astype(np.int64) if op.kv_lens is not None else np.full(b, t, dtype=np.int64)
    if kv_lens.shape != (b,):
        raise InterpreterError(f"ix.attention: kv_lens must be [batch] = [{b}], got {list(kv_lens.shape)}")

    group = hq // hkv
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # query head h reads kv head h // group
    scale = get_opt_float(op.attributes, "scale")
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    logits = np.einsum("bhsd,bhtd->bhst", q, k) * scale
    cap = get_opt_float(op.attributes, "softcap")
    if cap is not None:
        logits = cap * np.tanh(logits / cap)

    j = np.arange(t, dtype=np.int64)[None, None, :]  # [1, 1, t]
    pos = positions[:, :, None]  # [b, s, 1]
    visible = np.broadcast_to(j < kv_lens[:, None, None], (b, s, t))
    if get_flag(op.attributes, "causal"):
        visible = visible & (j <= pos)
    if op.attributes.get("window") is not None:
        visible = visible & (pos - j < get_int(op.attributes, "window"))
    visible = visible[:, None, :, :]  # [b, 1, s, t]

    masked = np.where(visible, logits, -np.inf)
    row_max = np.max(masked, axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    p = np.where(visible, np.exp(masked - row_max), 0.0)
    denom = np.sum(p, axis=-1, keepdims=True)
    out = np.einsum("bhst,bhtd->bhsd", p, v) / np.where(denom > 0, denom, 1.0)
    return [out]


def _gather_pages(pool: np.ndarray, table: np.ndarray, what: str) -> np.ndarray:
    """A paged cache ``pool[n, h, B, d]`` as ``[batch, h, blocks * B, d]`` by ``table[batch,
    blocks]``: entries out of the pool (unallocated: -1) read block 0, past every ``kv_lens``."""
    n, h, bs, d = pool.shape
    if table.ndim != 2 or table.shape[0] == 0:
        raise InterpreterError(f"ix.attention: block_table must be [batch, blocks], got {list(table.shape)}")
    seq = pool[np.where((table >= 0) & (table < n), table, 0)]  # [batch, blocks, h, B, d]
    return seq.transpose(0, 2, 1, 3, 4).reshape(table.shape[0], h, table.shape[1] * bs, d)


def kv_write(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    """Writes ``new[n, :, i]`` into ``cache[n, :, positions[n, i]]`` (a paged cache: into block
    ``block_table[n, p // B]`` at slot ``p % B``); negative positions skip."""
    assert isinstance(op, nn.KVWriteOp)
    cache, new, positions = ins[:3]
    rest = list(ins[3:])
    table = rest.pop().astype(np.int64) if op.block_table is not None else None
    if op.scale is not None:  # an FP8 cache
        from inferx.compiler.ir.fp8 import kv_quantize

        new = kv_quantize(new, rest.pop())
    out = cache.copy()
    n_idx, i_idx = np.nonzero(positions >= 0)
    slots = positions[n_idx, i_idx].astype(np.int64)
    if table is not None:
        bs = cache.shape[2]
        at = slots // bs
        if at.size and at.max() >= table.shape[1]:
            raise InterpreterError(f"ix.kv_write: position {int(slots.max())} is past the block table's "
                                   f"{table.shape[1]} blocks of {bs}")
        blocks = table[n_idx, at]
        if blocks.size and (blocks.min() < 0 or blocks.max() >= cache.shape[0]):
            bad = int(blocks[(blocks < 0) | (blocks >= cache.shape[0])][0])
            raise InterpreterError(f"ix.kv_write: block {bad} of the block table is not in the pool of "
                                   f"{cache.shape[0]} blocks")
        out[blocks, :, slots % bs, :] = new[n_idx, :, i_idx, :]
        return [out]
    if slots.size and slots.max() >= cache.shape[2]:
        raise InterpreterError(f"ix.kv_write: position {int(slots.max())} is past the cache length "
                               f"{cache.shape[2]}")
    out[n_idx, :, slots, :] = new[n_idx, :, i_idx, :]
    return [out]
