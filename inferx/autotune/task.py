"""Tuning tasks: what a measured schedule is a measurement *of*.

A task names everything that changes the cost of a generated kernel apart from its schedule: the
template, the dtypes, the static dims, the prologue and epilogue kinds, and the bucket of each
dynamic dim. Two kernels with the same task are the same kernel for tuning (every decoder layer's
qkv GEMM shares one task), so one record serves all of them. Names, eps values and weights are
not in a task: they change numbers, not cost.

A task prints as its key, a canonical JSON object (sorted keys, no spaces) that is stable across
runs and machines and is what the tuning database matches on. ``VERSION`` is part of the key:
bump it when the derivation changes, so old records stop matching instead of matching wrongly.

Four templates have tasks: ``Task`` (GEMM), ``AttentionTask``, ``MlpTask`` (the fused decode MLP)
and ``AttentionOTask`` (the fused decode attention and o projection); ``AnyTask`` is any of them,
and ``task_from_json`` reads any from a record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from xdsl.ir import BlockArgument, Operation

from inferx.compiler.codegen import attention, attention_o, mlp
from inferx.compiler.codegen.gemm import NORMS, applies, gated_split
from inferx.compiler.codegen.gemm_rope import rope_head_dim
from inferx.compiler.codegen.tile import attr_str
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import get_flag, get_opt_float
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp
from inferx.compiler.ir.types import TensorType

VERSION = 1
ATTENTION_VERSION = 1  # the attention key's own version: bumping it leaves GEMM keys alone
MLP_VERSION = 1  # the fused MLP key's own version
ATTENTION_O_VERSION = 1  # the fused attention and o projection's
# Ops of a GEMM epilogue that only move data between the accumulator and the store: no cost tag.
_LAYOUT_OPS = (t.SplitOp, t.ReshapeOp, t.TransposeOp)
# Rows buckets are powers of two. A short prompt's tiling is a question of its own at 128 rows (1
# or 2 row tiles against 132 SMs); so is a long one's: the largest bucket is keyed at max_seq_len's
# power of two, and a model that takes prompts of up to 2048 tokens wants tiles measured at 2048
# rows, not 4096 (a tile fastest at 4096 rows can be slower at 2048, where it launches half the
# programs and leaves a partial wave on 132 SMs).


class TaskError(ValueError):
    """A kernel that has no tuning task (another template, or a GEMM this module cannot key)."""


@dataclass(frozen=True)
class Task:
    """One tuning task of the GEMM template.

    ``shape`` is "decode" when the rows (all dims of x but the last) hold no ``seq`` and
    "prefill" otherwise; ``rows`` is the bucket of their run-time count (batch for decode,
    batch*seq for prefill): the smallest power of two that holds it. ``tile_n`` is the
    N of the tile space: N/2 for a gated (gate|up) GEMM, N otherwise. ``epilogue`` is the sorted
    set of cost tags of the ops after the linear ("plain" when none)."""

    template: str
    x_dtype: str
    w_dtype: str
    out_dtype: str  # the kernel's result dtypes, sorted and joined by "+"
    k: int
    n: int
    tile_n: int
    w_layout: str
    prologue: str  # "rmsnorm" | "layernorm" | "none"
    epilogue: str  # e.g. "residual", "kv_write+rope", "mul+pairs+silu", "plain"
    shape: str  # "decode" | "prefill"
    rows: int
    # The head dim a RoPE epilogue rotates, as extracted from the kernel (0: no RoPE, or a task
    # read back from a record): what the space prunes prefill tiles by. Not part of the key (the
    # epilogue tag says RoPE; a record of the same kernel matches with or without it).
    rope_head_dim: int = field(default=0, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "v": VERSION,
            "template": self.template,
            "dtypes": {"x": self.x_dtype, "w": self.w_dtype, "out": self.out_dtype},
            "k": self.k,
            "n": self.n,
            "tile_n": self.tile_n,
            "w_layout": self.w_layout,
            "prologue": self.prologue,
            "epilogue": self.epilogue,
            "shape": self.shape,
            "rows": self.rows,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Task:
        """The task a record names; TaskError (naming the missing field) if it is not one."""
        try:
            if d["v"] != VERSION:
                raise TaskError(f"task version {d['v']} (this compiler keys tasks as version {VERSION})")
            dt = d["dtypes"]
            return Task(
                d["template"],
                dt["x"],
                dt["w"],
                dt["out"],
                int(d["k"]),
                int(d["n"]),
                int(d["tile_n"]),
                d["w_layout"],
                d["prologue"],
                d["epilogue"],
                d["shape"],
                int(d["rows"]),
            )
        except (KeyError, TypeError) as e:
            raise TaskError(f"not a task: missing or malformed field {e}") from None

    @property
    def gated(self) -> bool:
        """A gate|up GEMM: each tile holds both halves of its columns (rows [gate; up] of W,
        "gated", or interleaved, "pairs")."""
        return bool({"gated", "pairs"} & set(self.epilogue.split("+")))

    @property
    def key(self) -> str:
        """The canonical JSON text of the task: equal keys if and only if equal tasks."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    def __str__(self) -> str:
        dt = (
            self.x_dtype
            if self.x_dtype == self.w_dtype == self.out_dtype
            else f"{self.x_dtype}x{self.w_dtype}->{self.out_dtype}"
        )
        n = f"N={self.n}" + (f" (tiles over {self.tile_n})" if self.tile_n != self.n else "")
        return (
            f"{self.template} {dt} K={self.k} {n} {self.w_layout} {self.prologue}>linear>{self.epilogue} "
            f"{self.shape} rows<={self.rows}"
        )


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
    layout moves)."""

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
                int(d["rows"]), int(d["ctx"]),
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
        return (f"{self.template} {dt} heads={self.q_heads}/{self.kv_heads} {d}{flags} >{self.epilogue} "
                f"{self.shape} {rows}<={self.rows} ctx<={self.ctx}")


@dataclass(frozen=True)
class MlpTask:
    """One tuning task of the fused decode MLP template (``codegen.mlp``): x's K columns, the
    intermediate width I, the output width N, how W1 holds its gate and up rows ("pairs" or
    "halves"), the cost tags of the ops between the two GEMMs (``middle``) and after the second
    (``epilogue``), and the batch bucket (``rows_bucket``). Always a decode task."""

    template: str
    x_dtype: str
    w_dtype: str
    out_dtype: str
    k: int
    i: int
    n: int
    gate_rows: str
    prologue: str  # "rmsnorm" | "none"
    middle: str  # e.g. "mul+silu"
    epilogue: str  # e.g. "residual"
    rows: int
    shape: str = "decode"

    def to_json(self) -> dict[str, Any]:
        return {
            "v": MLP_VERSION,
            "template": self.template,
            "dtypes": {"x": self.x_dtype, "w": self.w_dtype, "out": self.out_dtype},
            "k": self.k,
            "i": self.i,
            "n": self.n,
            "gate_rows": self.gate_rows,
            "prologue": self.prologue,
            "middle": self.middle,
            "epilogue": self.epilogue,
            "rows": self.rows,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> MlpTask:
        """The task a record names; TaskError (naming the missing field) if it is not one."""
        try:
            if d["v"] != MLP_VERSION:
                raise TaskError(f"mlp task version {d['v']} (this compiler keys them as version {MLP_VERSION})")
            dt = d["dtypes"]
            return MlpTask(d["template"], dt["x"], dt["w"], dt["out"], int(d["k"]), int(d["i"]), int(d["n"]),
                           d["gate_rows"], d["prologue"], d["middle"], d["epilogue"], int(d["rows"]))
        except (KeyError, TypeError) as e:
            raise TaskError(f"not an mlp task: missing or malformed field {e}") from None

    @property
    def key(self) -> str:
        """The canonical JSON text of the task: equal keys if and only if equal tasks."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    def __str__(self) -> str:
        dt = self.x_dtype if self.x_dtype == self.w_dtype == self.out_dtype else (
            f"{self.x_dtype}x{self.w_dtype}->{self.out_dtype}")
        return (f"{self.template} {dt} K={self.k} I={self.i} N={self.n} {self.gate_rows} "
                f"{self.prologue}>linear>{self.middle}>linear>{self.epilogue} {self.shape} rows<={self.rows}")


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


AnyTask = Task | AttentionTask | MlpTask | AttentionOTask


def task_from_json(d: dict[str, Any]) -> AnyTask:
    """The task of any template a record names; TaskError if it is not one."""
    if not isinstance(d, dict):
        raise TaskError(f"not a task: {d!r}")
    template = d.get("template")
    if template == "attention":
        return AttentionTask.from_json(d)
    if template == "attention_o":
        return AttentionOTask.from_json(d)
    return MlpTask.from_json(d) if template == "mlp" else Task.from_json(d)


def mlp_task(kernel: KernelOp, rows: int) -> MlpTask:
    """The task of a fused-MLP kernel run with ``rows`` rows (the decode batch). TaskError if the
    kernel is not one the mlp template implements."""
    if kernel.template.data != "mlp":
        raise TaskError(f"no mlp task for template {kernel.template.data!r}")
    p = mlp.parts(kernel)
    if isinstance(p, str):
        raise TaskError(f"the mlp template does not apply: {p}")
    x_val = p.norm.operands[0] if p.norm is not None else p.up.input
    w_t = p.up.weight.type
    assert isinstance(x_val.type, TensorType) and isinstance(w_t, TensorType)
    outs = sorted({r.type.dtype.value for r in kernel.results if isinstance(r.type, TensorType)})
    tags = lambda ops: "+".join(sorted({_tag(o) for o in ops if not isinstance(o, (*_LAYOUT_OPS, YieldOp))}))  # noqa: E731
    return MlpTask(
        template="mlp", x_dtype=x_val.type.dtype.value, w_dtype=w_t.dtype.value, out_dtype="+".join(outs),
        k=p.k, i=p.i, n=p.n, gate_rows=p.gate_rows, prologue="rmsnorm" if p.norm is not None else "none",
        middle=tags(p.middle) or "plain", epilogue=tags(p.epilogue) or "plain", rows=rows_bucket(rows),
    )


def pow2_at_least(v: int) -> int:
    """The smallest power of two >= ``v`` (v >= 1)."""
    if v < 1:
        raise ValueError(f"must be positive, got {v}")
    return 1 << (v - 1).bit_length()


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
    tags = {_tag(o) for o in ops[1:] if not isinstance(o, _LAYOUT_OPS)}
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
    )


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
        epilogue="+".join(sorted({_tag(o) for o in p.epilogue if not isinstance(o, YieldOp)})) or "plain",
        rows=rows_bucket(rows), ctx=pow2_at_least(max_seq_len),
    )


def rows_bucket(rows: int) -> int:
    """The smallest bucket that is >= ``rows`` (rows >= 1): the power of two."""
    if rows < 1:
        raise ValueError(f"rows must be positive, got {rows}")
    return 1 << (rows - 1).bit_length()


def shape_of(kernel: KernelOp) -> str:
    """The kernel's GEMM shape: "decode" if its rows hold no ``seq`` symbol, else "prefill" (the
    same test that picks GEMV mode in the heuristic schedule)."""
    lin = _linear(kernel)
    x = lin.input.type
    assert isinstance(x, TensorType)
    return "prefill" if "seq" in sy.symbols_of(sy.product(x.shape[:-1])) else "decode"


def gemm_task(kernel: KernelOp, rows: int) -> Task:
    """The task of a GEMM-template kernel run with ``rows`` rows (batch for decode, batch*seq
    for prefill). TaskError if the kernel is not a GEMM the template implements, or its K or N
    is not static."""
    if kernel.template.data != "gemm":
        raise TaskError(f"no tuning task for template {kernel.template.data!r}")
    reason = applies(kernel)
    if reason is not None:
        raise TaskError(f"the gemm template does not apply: {reason}")
    ops = [o for o in kernel.body.block.ops if o.name != "ix.yield"]
    norm = ops[0] if isinstance(ops[0], NORMS) else None
    lin = _linear(kernel)
    x_t, w_t, y_t = lin.input.type, lin.weight.type, lin.result.type
    assert isinstance(x_t, TensorType) and isinstance(w_t, TensorType) and isinstance(y_t, TensorType)
    k, n = x_t.shape[-1], y_t.shape[-1]
    if not isinstance(k, int) or not isinstance(n, int):
        raise TaskError("K and N must be static")
    epilogue = ops[(2 if norm else 1) :]
    gated = gated_split(lin, epilogue)
    halves = gated.ops if gated else ()
    tags = {_tag(op) for op in epilogue if op not in halves and not isinstance(op, _LAYOUT_OPS)}
    if gated:
        tags.add("pairs" if gated.pairs else "gated")
    if lin.bias is not None:
        tags.add("bias")
    outs = sorted({r.type.dtype.value for r in kernel.results if isinstance(r.type, TensorType)})
    return Task(
        template="gemm",
        x_dtype=(norm.operands[0].type if norm else x_t).dtype.value,  # type: ignore[attr-defined]
        w_dtype=w_t.dtype.value,
        out_dtype="+".join(outs),
        k=k,
        n=n,
        tile_n=n // 2 if gated else n,
        w_layout=attr_str(lin, "w_layout", "nk"),
        prologue=norm.name.removeprefix("ix.") if norm else "none",
        epilogue="+".join(sorted(tags)) or "plain",
        shape=shape_of(kernel),
        rows=rows_bucket(rows),
        rope_head_dim=rope_head_dim(kernel, lin, epilogue),
    )


def _linear(kernel: KernelOp) -> nn.LinearOp:
    lin = next((o for o in kernel.body.block.ops if isinstance(o, nn.LinearOp)), None)
    if lin is None:
        raise TaskError("the kernel has no linear")
    return lin


def _tag(op: Operation) -> str:
    """The cost tag of one epilogue op: "residual" for an add of a kernel input, else the op's
    name without the dialect prefix. (The gate|up halves are tagged "gated", or "pairs" where
    interleave-pairs stored their rows side by side.)"""
    name = op.name.removeprefix("ix.")
    if name == "add" and any(isinstance(v, BlockArgument) for v in op.operands):
        return "residual"
    return name
