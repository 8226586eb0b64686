"""The fused decode MLP's tuning task (see ``common.keys`` for what a task is)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from inferx.compiler.families.common.keys import LAYOUT_OPS, cost_tag, rows_bucket
from inferx.compiler.families.interface import TaskError
from inferx.compiler.families.mlp import codegen as mlp
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp
from inferx.compiler.ir.types import TensorType

MLP_VERSION = 1  # the fused MLP key's own version


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
    tags = lambda ops: "+".join(sorted({cost_tag(o) for o in ops if not isinstance(o, (*LAYOUT_OPS, YieldOp))}))  # noqa: E731
    return MlpTask(
        template="mlp", x_dtype=x_val.type.dtype.value, w_dtype=w_t.dtype.value, out_dtype="+".join(outs),
        k=p.k, i=p.i, n=p.n, gate_rows=p.gate_rows, prologue="rmsnorm" if p.norm is not None else "none",
        middle=tags(p.middle) or "plain", epilogue=tags(p.epilogue) or "plain", rows=rows_bucket(rows),
    )

