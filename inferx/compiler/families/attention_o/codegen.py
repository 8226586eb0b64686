"""The fused decode attention and output projection: ``y = epilogue(attention(q, K, V) @ W_o)`` as
one launch, for decode steps of up to 8 sequences (``common.rows.GEMV_MAX_ROWS``).

A program owns one (sequence, KV head) and one chunk of the projection's output columns: it runs
that KV head's attention for the query heads that share it (GQA packing) over the whole context,
with the online softmax of the attention template's decode loop, then multiplies the heads'
outputs by their columns of W_o for its chunk of output rows and adds the products into the
output's fp32 sums; the last of the KV heads to arrive at an output tile runs the epilogue (the
residual add; ``partials.py``). The chunks of one KV head each compute its attention again:
the K/V they read is the first chunk's, from the L2, so the redundancy costs L2 traffic and
FLOPs, not DRAM bytes; in exchange W_o streams over every SM in the same launch. There is no
split of the context: a program's key loop is the whole context, so this pays at short
contexts.

Applies to a kernel whose body is ``attention (one query per sequence) -> transpose(0, 2, 1, 3)
-> reshape to [batch, 1, heads * head_dim] -> linear (no bias, W stored [N, K]) -> elementwise
epilogue`` (the ``fuse-decode-attention-o`` pass builds such kernels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import BlockArgument, Operation

from inferx.compiler.families.common import partials
from inferx.compiler.families.common.attention_loop import (
    _kv_loop,
    _Loop,
    _padded,
    context,
    decode_queries,
    kv_scales,
    q_dtype,
)
from inferx.compiler.families.common.hardware import HOPPER_SMS
from inferx.compiler.families.common.partials import add_partial, finish_tiles
from inferx.compiler.families.common.source import module_source as _module
from inferx.compiler.families.common.tile import TL_DTYPE, Emitter, attr_str
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir.ops_base import get_flag, get_float, get_int, get_ints, get_opt_float
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import DType, TensorType
from inferx.runtime.kernel_source import KernelSource


@dataclass(frozen=True)
class AttentionOSchedule:
    bn: int  # keys per step of the attention loop
    bno: int  # output columns per tile of the projection
    tiles: int  # output tiles per program (a power of two): cdiv(N / BNO, TILES) chunks
    num_warps: int = 4
    num_stages: int = 2

    def to_dict(self) -> dict[str, int]:
        return {"bn": self.bn, "bno": self.bno, "tiles": self.tiles, "num_warps": self.num_warps,
                "num_stages": self.num_stages}


@dataclass(frozen=True)
class AttentionOParts:
    attention: nn.AttentionOp
    proj: nn.LinearOp
    epilogue: list[Operation]  # after the projection, ending with the yield
    hq: int
    hkv: int
    d: int
    dv: int
    n: int


def parts(kernel: KernelOp) -> AttentionOParts | str:
    """The body's pieces, or the reason the template does not implement it."""
    ops = list(kernel.body.block.ops)
    att = ops[0]
    if not isinstance(att, nn.AttentionOp):
        return "the body does not start with attention"
    if not all(isinstance(v, BlockArgument) for v in att.operands):
        return "attention's operands must be kernel inputs"
    q_t, k_t, v_t = (v.type for v in (att.q, att.k, att.v))
    assert isinstance(q_t, TensorType) and isinstance(k_t, TensorType) and isinstance(v_t, TensorType)
    if q_t.shape[2] != 1:
        return "not decode attention (one query per sequence)"
    hq, hkv, d, dv = q_t.shape[1], k_t.shape[1], q_t.shape[3], v_t.shape[3]
    if not (isinstance(hq, int) and isinstance(hkv, int) and isinstance(d, int) and isinstance(dv, int)):
        return "heads and head dims must be static"
    if len(ops) < 4 or not isinstance(ops[1], t.TransposeOp) or not isinstance(ops[2], t.ReshapeOp):
        return "attention's output does not reach the projection through transpose and reshape"
    tr, rs, proj = ops[1], ops[2], ops[3]
    if tr.operands[0] != att.result or tuple(get_ints(tr.attributes, "perm")) != (0, 2, 1, 3):
        return "the transpose after attention is not (0, 2, 1, 3)"
    rs_t = rs.results[0].type
    assert isinstance(rs_t, TensorType)
    if rs.operands[0] != tr.results[0] or rs_t.rank != 3 or tuple(rs_t.shape[1:]) != (1, hq * dv):
        return "the reshape after attention does not join the heads into [batch, 1, heads * head_dim]"
    if not isinstance(proj, nn.LinearOp) or proj.input != rs.results[0]:
        return "the heads' output does not feed a linear"
    if proj.bias is not None:
        return "a projection with a bias is not fused"
    if attr_str(proj, "w_layout", "nk") != "nk" or not isinstance(proj.weight, BlockArgument):
        return "the projection's weight must be a kernel input stored [N, K]"
    n = proj.result.type.shape[-1]  # type: ignore[attr-defined]
    if not isinstance(n, int):
        return "the projection's N must be static"
    return AttentionOParts(att, proj, ops[4:], hq, hkv, d, dv, n)


def applies(kernel: KernelOp) -> str | None:
    """None if this template implements the kernel, else the reason it does not."""
    p = parts(kernel)
    return p if isinstance(p, str) else None


def heuristic_schedule(kernel: KernelOp, target: str = "sm_90", rows: int | None = None) -> AttentionOSchedule:
    """64 keys a step (32 on the CPU), output tiles of 64 columns, and per program as many tiles
    (a power of two) as leave about 132 programs at the bucket's rows (the 1B and 8B shapes at
    batch 1: 8 KV heads x 16 chunks of 2 and 4 tiles); 4 warps, 2 stages."""
    p = parts(kernel)
    if isinstance(p, str):
        raise ValueError(p)
    if target == "cpu":
        return AttentionOSchedule(32, 16, 1)
    bno = 64
    n_t = -(-p.n // bno)
    chunks = max(1, HOPPER_SMS // max(1, (rows or 1) * p.hkv))
    tiles = 1 << max(0, (-(-n_t // chunks) - 1).bit_length())
    return AttentionOSchedule(64, bno, tiles)


def generate(kernel: KernelOp, name: str, schedule: AttentionOSchedule | None = None,
             target: str = "sm_90") -> KernelSource:
    """The kernel's Triton source (module docstring for the method)."""
    em = Emitter(kernel, name)
    p = parts(kernel)
    if isinstance(p, str):
        raise em.error(None, p)
    sched = schedule or heuristic_schedule(kernel, target)
    if sched.tiles & (sched.tiles - 1):
        raise em.error(p.proj, f"TILES must be a power of two: {sched}")
    op = p.attention
    q_t, k_t = op.q.type, op.k.type
    assert isinstance(q_t, TensorType) and isinstance(k_t, TensorType)
    group = p.hq // p.hkv
    bm = max(16, 1 << (group - 1).bit_length())
    bd, bdv = _padded(p.d), _padded(p.dv)
    low = q_t.dtype in (DType.f16, DType.bf16)
    (T, paged), B = context(em, op), em.dim(q_t.shape[0])
    attrs = op.attributes
    scale = get_float(attrs, "scale", 1.0 / math.sqrt(p.d))
    window = get_int(attrs, "window") if attrs.get("window") is not None else None
    n_t = -(-p.n // sched.bno)
    n_chunks = -(-n_t // sched.tiles)
    k_dim = p.hq * p.dv
    w_ptr = f"in{em.input_index(p.proj.weight)}"
    e = em.emit

    # 1. this KV head's attention over the whole context, for the query heads that share it
    e("pid_n = tl.program_id(0)")
    e("bh = tl.program_id(1)")
    e(f"M = {B}")
    decode_queries(em, op, low, T)
    fp8 = kv_scales(em, op)
    lo = "0"
    if window is not None:  # only the keys the window shows
        e(f"lo = tl.maximum(pos - {window - 1}, 0) // BN * BN")
        lo = "lo"
    loop = _Loop(get_flag(attrs, "causal"), window, get_opt_float(attrs, "softcap"), scale, low, p.d, p.dv, p.hkv,
                 T, pos="pos", base2=False, pad_masks=False, kv_fp8=fp8, qdt=TL_DTYPE[q_dtype(op)], paged=paged)
    _kv_loop(em, op, lo, "kvl", "kvl", True, loop)
    out_t = op.result.type
    assert isinstance(out_t, TensorType)
    # the heads' outputs as the unfused attention kernel stores them, zero in padded rows
    acc = "acc * vsc" if fp8 else "acc"
    e(f"o = tl.where(gm[:, None], ({acc} / tl.where(l_i > 0, l_i, 1.0)[:, None]).to({TL_DTYPE[out_t.dtype]})"
      ".to(tl.float32), 0.0)")

    # 2. the heads' columns of W_o for this program's output tiles, added into the sums
    e("for t0 in tl.static_range(TILES):")
    em.indent += 1
    e("n = (pid_n * TILES + t0) * BNO + tl.arange(0, BNO)")
    e(f"nm = n < {p.n}")
    e("part = tl.zeros((BNO,), dtype=tl.float32)")
    e(f"for gi in tl.static_range({group}):")
    em.indent += 1
    e("og = tl.sum(tl.where(g[:, None] == gi, o, 0.0), 0)")
    e(f"w = tl.load({w_ptr} + n[:, None] * {k_dim} + (hk * {group} + gi) * {p.dv} + de[None, :], "
      f"mask=nm[:, None] & (de[None, :] < {p.dv}), other=0).to(tl.float32)")
    e("part += tl.sum(w * og[None, :], 1)")
    em.indent -= 1
    add_partial(em, "part", f"b * {p.n} + n", "nm")
    em.indent -= 1

    # 3. if this program is the last KV head to add into its tiles: the epilogue, then sums and counter zeroed
    e("tt = pid_n * TILES + tl.arange(0, TILES)")
    y_t = p.proj.result.type
    assert isinstance(y_t, TensorType)
    finish_tiles(em, counter=f"b * {n_chunks} + pid_n", tiles="tt", live=f"tt < {n_t}", arrivals=p.hkv, n=p.n,
                 first_row="b", rows=1, rows_shape=list(y_t.shape[:-1]), result=p.proj.result, epilogue=p.epilogue,
                 width="BNO")

    ws_params, scratch = partials.scratch(B, p.n, f"{B} * {n_chunks}")
    params = em.params() + ws_params
    constexprs = {"BM": bm, "BN": sched.bn, "BD": bd, "BDV": bdv, "BNO": sched.bno, "TILES": sched.tiles}
    args = ", ".join([q.name for q in params] + [f"{c}: tl.constexpr" for c in constexprs])
    return KernelSource(
        name=name,
        template="attention_o",
        source=_module(name, args, em.lines),
        params=tuple(params),
        grid=(str(n_chunks), f"{B} * {p.hkv}"),
        constexprs=constexprs,
        aliases=em.aliases,
        scratch=scratch,
        num_warps=sched.num_warps,
        num_stages=sched.num_stages,
    )

