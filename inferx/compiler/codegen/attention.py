"""The attention template: one flash-style kernel for prefill and decode, GQA-aware.

Applies to a kernel whose body is ``attention -> epilogue`` (the epilogue is usually the
transpose and reshape back to ``[batch, seq, heads * head_dim]``). A program owns BM queries of
one (sequence, query head) and streams that sequence's keys in blocks of BN up to its
``kv_lens`` entry, with an online softmax in fp32. Masks (causal, sliding window) use each
query's absolute position from ``positions``, so the same code serves any step. A query with
no visible key writes zeros. (Split-KV for long decode contexts is a later schedule.)
"""

from __future__ import annotations

import math

from xdsl.ir import BlockArgument

from inferx.compiler.codegen.gemm import _module
from inferx.compiler.codegen.tile import Emitter, Tile
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_base import get_flag, get_float, get_int, get_opt_float
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import DType, TensorType
from inferx.runtime.kernel_source import KernelSource


def applies(kernel: KernelOp) -> str | None:
    first = kernel.body.block.first_op
    if not isinstance(first, nn.AttentionOp):
        return "the body does not start with attention"
    if not all(isinstance(v, BlockArgument) for v in first.operands):
        return "attention's operands must be kernel inputs"
    return None


def generate(kernel: KernelOp, name: str) -> KernelSource:
    em = Emitter(kernel, name)
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
    bm = 64 if "seq" in q_t.symbols() else 16
    bn = 32
    bd, bdv = max(16, 1 << (d - 1).bit_length()), max(16, 1 << (dv - 1).bit_length())
    low = q_t.dtype in (DType.f16, DType.bf16)
    S, T, B = em.dim(q_t.shape[2]), em.dim(k_t.shape[2]), em.dim(q_t.shape[0])
    qi, ki, vi = (f"in{v.index}" for v in (op.q, op.k, op.v))  # type: ignore[attr-defined]

    em.emit("pid_m = tl.program_id(0)")
    em.emit("pid_bh = tl.program_id(1)")
    em.emit(f"b = pid_bh // {hq}")
    em.emit(f"h = pid_bh % {hq}")
    em.emit(f"hk = h // {hq // hkv}")
    em.emit("i = pid_m * BM + tl.arange(0, BM)")
    em.emit(f"im = i < {S}")
    em.emit("dd = tl.arange(0, BD)")
    em.emit("de = tl.arange(0, BDV)")
    em.emit(f"q = tl.load({qi} + ((b * {hq} + h) * {S} + i[:, None]) * {d} + dd[None, :], "
            f"mask=im[:, None] & (dd[None, :] < {d}), other=0)")
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
    precision = "" if low else ', input_precision="ieee"'
    em.emit("for j0 in range(0, kvl, BN):")
    em.indent += 1
    em.emit("j = j0 + tl.arange(0, BN)")
    em.emit("jm = j < kvl")
    em.emit(f"k = tl.load({ki} + ((b * {hkv} + hk) * {T} + j[None, :]) * {d} + dd[:, None], "
            f"mask=jm[None, :] & (dd[:, None] < {d}), other=0)")
    if not low:
        em.emit("k = k.to(tl.float32)")
    em.emit(f"s = tl.dot(q, k{precision}) * {scale!r}")
    if cap is not None:
        em.emit(f"s = {cap!r} * (2.0 * tl.sigmoid(2.0 * s / {cap!r}) - 1.0)")
    valid = "jm[None, :]"
    if causal:
        valid += " & (j[None, :] <= pos[:, None])"
    if window is not None:
        valid += f" & (pos[:, None] - j[None, :] < {window})"
    em.emit(f"s = tl.where({valid}, s, float('-inf'))")
    em.emit("m_new = tl.maximum(m_i, tl.max(s, 1))")
    em.emit("p = tl.exp(s - m_new[:, None])")
    em.emit("alpha = tl.exp(m_i - m_new)")
    em.emit("l_i = l_i * alpha + tl.sum(p, 1)")
    em.emit(f"v = tl.load({vi} + ((b * {hkv} + hk) * {T} + j[:, None]) * {dv} + de[None, :], "
            f"mask=jm[:, None] & (de[None, :] < {dv}), other=0)")
    if low:
        em.emit("acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)")
    else:
        em.emit(f"acc = acc * alpha[:, None] + tl.dot(p, v.to(tl.float32){precision})")
    em.emit("m_i = m_new")
    em.indent -= 1
    em.emit("o = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]")
    out_t = op.result.type
    assert isinstance(out_t, TensorType)
    coords = ["b", "h", "i[:, None]", "de[None, :]"]
    em.values[op.result] = Tile("o", coords, f"(im[:, None] & (de[None, :] < {dv}))", out_t)
    ops = list(kernel.body.block.ops)[1:]
    em.run_epilogue(ops)
    params = em.params()
    args = ", ".join([p.name for p in params] + [f"{c}: tl.constexpr" for c in ("BM", "BN", "BD", "BDV")])
    grid = (f"cdiv({S}, {bm})", f"{B} * {hq}")
    return KernelSource(name=name, template="attention", source=_module(name, args, em.lines),
                        params=tuple(params), grid=grid,
                        constexprs={"BM": bm, "BN": bn, "BD": bd, "BDV": bdv}, aliases=em.aliases)
