"""The GEMM family's tuning task (see ``common.keys`` for what a task is)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from inferx.compiler.families.common.keys import LAYOUT_OPS, cost_tag, rows_bucket
from inferx.compiler.families.common.tile import attr_str
from inferx.compiler.families.gemm.codegen import NORMS, applies, gated_split
from inferx.compiler.families.gemm.rope import rope_head_dim
from inferx.compiler.families.interface import TaskError
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import TensorType

VERSION = 1


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
    tags = {cost_tag(op) for op in epilogue if op not in halves and not isinstance(op, LAYOUT_OPS)}
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

