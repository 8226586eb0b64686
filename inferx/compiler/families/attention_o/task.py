"""The fused decode attention and o projection's tuning task (see ``common.keys``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from inferx.compiler.families.attention_o import codegen as attention_o
from inferx.compiler.families.common.keys import cost_tag, pow2_at_least, rows_bucket
from inferx.compiler.families.interface import TaskError
from inferx.compiler.ir.ops_base import get_flag, get_opt_float
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp
from inferx.compiler.ir.types import TensorType

ATTENTION_O_VERSION = 1  # the fused attention and o projection's


@dataclass(frozen=True)
class AttentionOTask:
    """One tuning task of the fused decode attention and o projection (``codegen.attention_o``):
    the attention's heads, head dims and masks as ``AttentionTask`` keys them, the projection's
    output width N and the cost tags after it, the batch bucket and the context measured at (the
    smallest power of two >= the compile's ``max_seq_len``). Always a decode task."""

    template: str
    dtype: str  # of q
    kv_dtype: str
    w_dtype: str
    out_dtype: str
    q_heads: int
    kv_heads: int
    head_dim: int
    head_dim_v: int
    n: int
    causal: bool
    window: bool
    softcap: bool
    epilogue: str
    rows: int
    ctx: int
    shape: str = "decode"

    def to_json(self) -> dict[str, Any]:
        return {
            "v": ATTENTION_O_VERSION,
            "template": self.template,
            "dtypes": {"q": self.dtype, "kv": self.kv_dtype, "w": self.w_dtype, "out": self.out_dtype},
            "heads": {"q": self.q_heads, "kv": self.kv_heads},
            "head_dim": {"qk": self.head_dim, "v": self.head_dim_v},
            "n": self.n,
            "causal": self.causal,
            "window": self.window,
            "softcap": self.softcap,
            "epilogue": self.epilogue,
            "rows": self.rows,
            "ctx": self.ctx,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> AttentionOTask:
        """The task a record names; TaskError (naming the missing field) if it is not one."""
        try:
            if d["v"] != ATTENTION_O_VERSION:
                raise TaskError(f"attention_o task version {d['v']} (this compiler keys them as "
                                f"version {ATTENTION_O_VERSION})")
            dt, heads, hd = d["dtypes"], d["heads"], d["head_dim"]
            return AttentionOTask(d["template"], dt["q"], dt["kv"], dt["w"], dt["out"], int(heads["q"]),
                                  int(heads["kv"]), int(hd["qk"]), int(hd["v"]), int(d["n"]), bool(d["causal"]),
                                  bool(d["window"]), bool(d["softcap"]), d["epilogue"], int(d["rows"]), int(d["ctx"]))
        except (KeyError, TypeError) as e:
            raise TaskError(f"not an attention_o task: missing or malformed field {e}") from None

    @property
    def key(self) -> str:
        """The canonical JSON text of the task: equal keys if and only if equal tasks."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    def __str__(self) -> str:
        flags = "".join(f" {f}" for f, on in (("causal", self.causal), ("window", self.window),
                                               ("softcap", self.softcap)) if on)
        return (f"{self.template} {self.dtype} heads={self.q_heads}/{self.kv_heads} d={self.head_dim}{flags} "
                f">linear N={self.n}>{self.epilogue} {self.shape} batch<={self.rows} ctx<={self.ctx}")



def attention_o_task(kernel: KernelOp, rows: int, max_seq_len: int) -> AttentionOTask:
    """The task of a fused attention and o projection kernel run with ``rows`` sequences in an
    artifact compiled for ``max_seq_len``. TaskError if the template does not implement it."""
    if kernel.template.data != "attention_o":
        raise TaskError(f"no attention_o task for template {kernel.template.data!r}")
    p = attention_o.parts(kernel)
    if isinstance(p, str):
        raise TaskError(f"the attention_o template does not apply: {p}")
    op = p.attention
    q_t, k_t, w_t = op.q.type, op.k.type, p.proj.weight.type
    assert isinstance(q_t, TensorType) and isinstance(k_t, TensorType) and isinstance(w_t, TensorType)
    outs = sorted({r.type.dtype.value for r in kernel.results if isinstance(r.type, TensorType)})
    attrs = op.attributes
    return AttentionOTask(
        template="attention_o", dtype=q_t.dtype.value, kv_dtype=k_t.dtype.value, w_dtype=w_t.dtype.value,
        out_dtype="+".join(outs), q_heads=p.hq, kv_heads=p.hkv, head_dim=p.d, head_dim_v=p.dv, n=p.n,
        causal=get_flag(attrs, "causal"), window=attrs.get("window") is not None,
        softcap=get_opt_float(attrs, "softcap") is not None,
        epilogue="+".join(sorted({cost_tag(o) for o in p.epilogue if not isinstance(o, YieldOp)})) or "plain",
        rows=rows_bucket(rows), ctx=pow2_at_least(max_seq_len),
    )

