"""The attention family's tuning task (see ``common.keys`` for what a task is)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from inferx.compiler.families.attention import codegen as attention
from inferx.compiler.families.common.keys import LAYOUT_OPS, cost_tag, pow2_at_least, rows_bucket
from inferx.compiler.families.interface import TaskError
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_base import get_flag, get_opt_float
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import TensorType

ATTENTION_VERSION = 1  # the attention key's own version


@dataclass(frozen=True)
class AttentionTask:
    """One tuning task of the attention template.

    ``shape`` is "decode" (one query per sequence: the split-KV kernel) or "prefill". ``rows`` is
    the bucket (``rows_bucket``) of the batch for decode, of the prompt length (one sequence) for
    prefill. ``ctx`` is the context the kernel is measured at: the smallest power of two >= the
    compile's ``max_seq_len`` (the longest context the artifact serves; a decode step's cost
    grows with its live context, and the schedule is chosen for the longest). ``window`` and
    ``softcap`` say whether the kernel masks a sliding window or caps its scores, not their
    values; ``epilogue`` holds the cost tags of ops after the attention ("plain" when only the
    layout moves); ``block_size`` is a paged cache's (0: a contiguous cache, and no key field)."""

    template: str
    dtype: str  # of q
    kv_dtype: str
    out_dtype: str
    q_heads: int
    kv_heads: int
    head_dim: int
    head_dim_v: int
    causal: bool
    window: bool
    softcap: bool
    epilogue: str
    shape: str  # "decode" | "prefill"
    rows: int
    ctx: int
    block_size: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "v": ATTENTION_VERSION,
            "template": self.template,
            "dtypes": {"q": self.dtype, "kv": self.kv_dtype, "out": self.out_dtype},
            "heads": {"q": self.q_heads, "kv": self.kv_heads},
            "head_dim": {"qk": self.head_dim, "v": self.head_dim_v},
            "causal": self.causal,
            "window": self.window,
            "softcap": self.softcap,
            "epilogue": self.epilogue,
            "shape": self.shape,
            "rows": self.rows,
            "ctx": self.ctx,
            **({"block_size": self.block_size} if self.block_size else {}),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> AttentionTask:
        """The task a record names; TaskError (naming the missing field) if it is not one."""
        try:
            if d["v"] != ATTENTION_VERSION:
                raise TaskError(f"attention task version {d['v']} (this compiler keys them as "
                                f"version {ATTENTION_VERSION})")
            dt, heads, hd = d["dtypes"], d["heads"], d["head_dim"]
            return AttentionTask(
                d["template"], dt["q"], dt["kv"], dt["out"], int(heads["q"]), int(heads["kv"]), int(hd["qk"]),
                int(hd["v"]), bool(d["causal"]), bool(d["window"]), bool(d["softcap"]), d["epilogue"], d["shape"],
                int(d["rows"]), int(d["ctx"]), int(d.get("block_size", 0)),
            )
        except (KeyError, TypeError) as e:
            raise TaskError(f"not an attention task: missing or malformed field {e}") from None

    @property
    def key(self) -> str:
        """The canonical JSON text of the task: equal keys if and only if equal tasks."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    def __str__(self) -> str:
        dt = self.dtype if self.dtype == self.kv_dtype == self.out_dtype else (
            f"{self.dtype}x{self.kv_dtype}->{self.out_dtype}")
        d = f"d={self.head_dim}" + (f"/{self.head_dim_v}" if self.head_dim_v != self.head_dim else "")
        flags = "".join(f" {f}" for f, on in (("causal", self.causal), ("window", self.window),
                                               ("softcap", self.softcap)) if on)
        rows = "batch" if self.shape == "decode" else "seq"
        paged = f" paged/{self.block_size}" if self.block_size else ""
        return (f"{self.template} {dt} heads={self.q_heads}/{self.kv_heads} {d}{flags} >{self.epilogue} "
                f"{self.shape} {rows}<={self.rows} ctx<={self.ctx}{paged}")



def attention_task(kernel: KernelOp, rows: int, max_seq_len: int) -> AttentionTask:
    """The task of an attention-template kernel run with ``rows`` (the batch for decode, the
    prompt length for prefill) in an artifact compiled for ``max_seq_len``. TaskError if the
    kernel is not one the template implements or its heads or head dims are not static."""
    if kernel.template.data != "attention":
        raise TaskError(f"no attention task for template {kernel.template.data!r}")
    reason = attention.applies(kernel)
    if reason is not None:
        raise TaskError(f"the attention template does not apply: {reason}")
    ops = [o for o in kernel.body.block.ops if o.name != "ix.yield"]
    op = ops[0]
    assert isinstance(op, nn.AttentionOp)
    q_t, k_t, v_t = (v.type for v in (op.q, op.k, op.v))
    assert isinstance(q_t, TensorType) and isinstance(k_t, TensorType) and isinstance(v_t, TensorType)
    dims = (q_t.shape[1], k_t.shape[1], q_t.shape[3], v_t.shape[3])
    if not all(isinstance(x, int) for x in dims):
        raise TaskError("heads and head dims must be static")
    hq, hkv, d, dv = (int(x) for x in dims)  # type: ignore[arg-type]
    tags = {cost_tag(o) for o in ops[1:] if not isinstance(o, LAYOUT_OPS)}
    outs = sorted({r.type.dtype.value for r in kernel.results if isinstance(r.type, TensorType)})
    attrs = op.attributes
    return AttentionTask(
        template="attention",
        dtype=q_t.dtype.value,
        kv_dtype=k_t.dtype.value,
        out_dtype="+".join(outs),
        q_heads=hq,
        kv_heads=hkv,
        head_dim=d,
        head_dim_v=dv,
        causal=get_flag(attrs, "causal"),
        window=attrs.get("window") is not None,
        softcap=get_opt_float(attrs, "softcap") is not None,
        epilogue="+".join(sorted(tags)) or "plain",
        shape="decode" if attention.is_decode(kernel) else "prefill",
        rows=rows_bucket(rows),
        ctx=pow2_at_least(max_seq_len),
        block_size=int(k_t.shape[2]) if op.block_table is not None else 0,  # type: ignore[arg-type]
    )

