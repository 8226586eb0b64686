"""The qgemm family's tuning task (see ``common.keys`` for what a task is)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inferx.compiler.families.common.keys import LAYOUT_OPS, LinearTaskKey, cost_tag, rows_bucket
from inferx.compiler.families.common.rows import gated_split
from inferx.compiler.families.interface import TaskError
from inferx.compiler.families.qgemm.codegen import TEMPLATE, applies, prologue_of, qlinear_of
from inferx.compiler.families.qgemm.heuristic import decode_rows
from inferx.compiler.ir.ops_base import get_int
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import TensorType

VERSION = 1  # the qgemm key's own version


@dataclass(frozen=True)
class QGemmTask(LinearTaskKey):
    """One tuning task of the qgemm template: what changes the best schedule of an int4 GEMM.

    ``shape`` is "decode" when the rows (all dims of x but the last) hold no ``seq`` and
    "prefill" otherwise; ``rows`` is the bucket (``rows_bucket``) of their run-time count (the
    batch for decode, batch x seq for prefill). ``k`` and ``n`` are the weight's [N, K]; ``tile_n``
    the N of the tile space: N/2 for a gated (gate|up) split, N otherwise. ``group`` is the
    quantization group (which BK fits: ``schedule.check_fits``); ``mins``, ``col_scale`` and
    ``bias`` say whether the qlinear reads minimums, a per-column scale of x and a bias (bytes and
    work per step), not their values. ``prologue`` is "rmsnorm", "rmsnorm_ss" or "none"; ``epilogue`` the sorted
    cost tags of the ops after the qlinear, "gated" or "pairs" for a gate|up split ("plain" when
    none), as the gemm task's."""

    template: str
    x_dtype: str
    scales_dtype: str
    out_dtype: str  # the kernel's result dtypes, sorted and joined by "+"
    k: int
    n: int
    tile_n: int
    group: int
    mins: bool
    col_scale: bool
    bias: bool
    prologue: str  # "rmsnorm" | "rmsnorm_ss" (statistics as an input) | "none"
    epilogue: str  # e.g. "kv_write+rope", "mul+pairs+silu", "residual", "plain"
    shape: str  # "decode" | "prefill"
    rows: int

    def to_json(self) -> dict[str, Any]:
        return {
            "v": VERSION,
            "template": self.template,
            "dtypes": {"x": self.x_dtype, "scales": self.scales_dtype, "out": self.out_dtype},
            "k": self.k,
            "n": self.n,
            "tile_n": self.tile_n,
            "group": self.group,
            "mins": self.mins,
            "col_scale": self.col_scale,
            "bias": self.bias,
            "prologue": self.prologue,
            "epilogue": self.epilogue,
            "shape": self.shape,
            "rows": self.rows,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> QGemmTask:
        """The task a record names; TaskError (naming the missing field) if it is not one."""
        try:
            if d["v"] != VERSION:
                raise TaskError(f"qgemm task version {d['v']} (this compiler keys them as version {VERSION})")
            dt = d["dtypes"]
            return QGemmTask(
                d["template"], dt["x"], dt["scales"], dt["out"], int(d["k"]), int(d["n"]), int(d["tile_n"]),
                int(d["group"]), bool(d["mins"]), bool(d["col_scale"]), bool(d["bias"]), d["prologue"],
                d["epilogue"], d["shape"], int(d["rows"]),
            )
        except (KeyError, TypeError) as e:
            raise TaskError(f"not a qgemm task: missing or malformed field {e}") from None

    def __str__(self) -> str:
        dt = self.x_dtype if self.x_dtype == self.scales_dtype == self.out_dtype else (
            f"{self.x_dtype}xi4/{self.scales_dtype}->{self.out_dtype}")
        n = f"N={self.n}" + (f" (tiles over {self.tile_n})" if self.tile_n != self.n else "")
        flags = "".join(f" {f}" for f, on in (("mins", self.mins), ("col_scale", self.col_scale),
                                               ("bias", self.bias)) if on)
        rows = "batch" if self.shape == "decode" else "rows"
        return (f"{self.template} {dt} K={self.k} {n} g{self.group}{flags} {self.prologue}>qlinear>{self.epilogue} "
                f"{self.shape} {rows}<={self.rows}")


def qgemm_task(kernel: KernelOp, rows: int) -> QGemmTask:
    """The task of a qgemm-template kernel run with ``rows`` rows (the batch for decode, batch x
    seq for prefill). TaskError if the kernel is not one the template implements (K and N static
    among its rules)."""
    if kernel.template.data != TEMPLATE:
        raise TaskError(f"no qgemm task for template {kernel.template.data!r}")
    reason = applies(kernel)
    if reason is not None:
        raise TaskError(f"the qgemm template does not apply: {reason}")
    norm = prologue_of(kernel)
    q = qlinear_of(kernel)
    x_t, y_t, s_t = q.input.type, q.result.type, q.scales.type
    assert isinstance(x_t, TensorType) and isinstance(y_t, TensorType) and isinstance(s_t, TensorType)
    k, n = x_t.shape[-1], y_t.shape[-1]
    assert isinstance(k, int) and isinstance(n, int)  # applies() says so
    ops = [o for o in kernel.body.block.ops if o.name != "ix.yield"]
    epilogue = ops[2 if norm is not None else 1:]
    gated = gated_split(q, epilogue)  # type: ignore[arg-type]
    halves = gated.ops if gated else ()
    tags = {cost_tag(op) for op in epilogue if op not in halves and not isinstance(op, LAYOUT_OPS)}
    if gated:
        tags.add("pairs" if gated.pairs else "gated")
    outs = sorted({r.type.dtype.value for r in kernel.results if isinstance(r.type, TensorType)})
    x_dtype = norm.operands[0].type.dtype.value if norm is not None else x_t.dtype.value  # type: ignore[attr-defined]
    return QGemmTask(
        template=TEMPLATE,
        x_dtype=x_dtype,
        scales_dtype=s_t.dtype.value,
        out_dtype="+".join(outs),
        k=k,
        n=n,
        tile_n=n // 2 if gated else n,
        group=get_int(q.attributes, "group"),
        mins=q.mins is not None,
        col_scale=q.col_scale is not None,
        bias=q.bias is not None,
        prologue=norm.name.removeprefix("ix.") if norm is not None else "none",
        epilogue="+".join(sorted(tags)) or "plain",
        shape="decode" if decode_rows(kernel) else "prefill",
        rows=rows_bucket(rows),
    )
