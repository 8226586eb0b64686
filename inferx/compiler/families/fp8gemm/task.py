"""The fp8gemm family's tuning task (see ``common.keys`` for what a task is)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from inferx.compiler.families.common.keys import LAYOUT_OPS, LinearTaskKey, cost_tag, rows_bucket
from inferx.compiler.families.common.rows import gated_split
from inferx.compiler.families.fp8gemm.codegen import TEMPLATE, applies, decode_rows, linear_of, prologue_of, reads_given
from inferx.compiler.families.gemm.rope import rope_head_dim
from inferx.compiler.families.interface import TaskError
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import TensorType

VERSION = 1  # the fp8gemm key's own version

# How x becomes E4M3: each row's largest magnitude found by the kernel (a pass over x), one
# static scale (no pass), or x arriving as E4M3 bytes with its rows' scales (a plain FP8 product)
X_SCALES = ("token", "static", "given")


@dataclass(frozen=True)
class Fp8GemmTask(LinearTaskKey):
    """One tuning task of the fp8gemm template: what changes the best schedule of an FP8 GEMM.

    ``x_dtype`` is the dtype x arrives in (the norm's input where there is one; "f8e4m3" where it
    arrives quantized); ``x_scale`` how it becomes E4M3 (``X_SCALES``). ``k`` and ``n`` are the
    weight's [N, K]; ``tile_n`` the N of the tile space (N/2 for a gate|up split). ``bias``,
    ``prologue`` ("rmsnorm", "rmsnorm_ss" or "none"), ``epilogue`` (sorted cost tags, "gated" or
    "pairs" for a gate|up split, "plain" when none), ``shape`` and ``rows`` as the gemm task's."""

    template: str
    x_dtype: str
    out_dtype: str  # the kernel's result dtypes, sorted and joined by "+"
    k: int
    n: int
    tile_n: int
    x_scale: str
    bias: bool
    prologue: str
    epilogue: str
    shape: str  # "decode" | "prefill"
    rows: int
    # The head dim a RoPE epilogue rotates (0: none, or a task read back from a record): what the
    # space prunes prefill tiles by; not part of the key, as the gemm task's.
    rope_head_dim: int = field(default=0, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "v": VERSION,
            "template": self.template,
            "dtypes": {"x": self.x_dtype, "out": self.out_dtype},
            "k": self.k,
            "n": self.n,
            "tile_n": self.tile_n,
            "x_scale": self.x_scale,
            "bias": self.bias,
            "prologue": self.prologue,
            "epilogue": self.epilogue,
            "shape": self.shape,
            "rows": self.rows,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Fp8GemmTask:
        """The task a record names; TaskError (naming the missing field) if it is not one."""
        try:
            if d["v"] != VERSION:
                raise TaskError(f"fp8gemm task version {d['v']} (this compiler keys them as version {VERSION})")
            if d["x_scale"] not in X_SCALES:
                raise TaskError(f"fp8gemm task x_scale {d['x_scale']!r}: not one of {list(X_SCALES)}")
            dt = d["dtypes"]
            return Fp8GemmTask(d["template"], dt["x"], dt["out"], int(d["k"]), int(d["n"]), int(d["tile_n"]),
                               d["x_scale"], bool(d["bias"]), d["prologue"], d["epilogue"], d["shape"], int(d["rows"]))
        except (KeyError, TypeError) as e:
            raise TaskError(f"not an fp8gemm task: missing or malformed field {e}") from None

    def __str__(self) -> str:
        n = f"N={self.n}" + (f" (tiles over {self.tile_n})" if self.tile_n != self.n else "")
        rows = "batch" if self.shape == "decode" else "rows"
        bias = " bias" if self.bias else ""
        return (f"{self.template} {self.x_dtype}({self.x_scale})xe4m3->{self.out_dtype} K={self.k} {n}{bias} "
                f"{self.prologue}>fp8_linear>{self.epilogue} {self.shape} {rows}<={self.rows}")


def fp8gemm_task(kernel: KernelOp, rows: int) -> Fp8GemmTask:
    """The task of an fp8gemm-template kernel run with ``rows`` rows (the batch for decode, batch x
    seq for prefill). TaskError if the kernel is not one the template implements."""
    if kernel.template.data != TEMPLATE:
        raise TaskError(f"no fp8gemm task for template {kernel.template.data!r}")
    reason = applies(kernel)
    if reason is not None:
        raise TaskError(f"the fp8gemm template does not apply: {reason}")
    norm = prologue_of(kernel)
    f = linear_of(kernel)
    x_t, y_t = f.input.type, f.result.type
    assert isinstance(x_t, TensorType) and isinstance(y_t, TensorType)
    k, n = x_t.shape[-1], y_t.shape[-1]
    assert isinstance(k, int) and isinstance(n, int)  # applies() says so
    ops = [o for o in kernel.body.block.ops if o.name != "ix.yield"]
    epilogue = ops[2 if norm is not None else 1:]
    gated = gated_split(f, epilogue)  # type: ignore[arg-type]
    halves = gated.ops if gated else ()
    tags = {cost_tag(op) for op in epilogue if op not in halves and not isinstance(op, LAYOUT_OPS)}
    if gated:
        tags.add("pairs" if gated.pairs else "gated")
    outs = sorted({r.type.dtype.value for r in kernel.results if isinstance(r.type, TensorType)})
    x_dtype = norm.operands[0].type.dtype.value if norm is not None else x_t.dtype.value  # type: ignore[attr-defined]
    scale = "given" if f.row_scales is not None else "static" if f.x_scale is not None else "token"
    if reads_given(kernel, rows):  # the bucket reads x quantized once: the norm is the quantizer's
        x_dtype, scale, norm = "f8e4m3", "given", None
    return Fp8GemmTask(
        template=TEMPLATE,
        x_dtype=x_dtype,
        out_dtype="+".join(outs),
        k=k,
        n=n,
        tile_n=n // 2 if gated else n,
        x_scale=scale,
        bias=f.bias is not None,
        prologue=norm.name.removeprefix("ix.") if norm is not None else "none",
        epilogue="+".join(sorted(tags)) or "plain",
        shape="decode" if decode_rows(kernel) else "prefill",
        rows=rows_bucket(rows),
        rope_head_dim=rope_head_dim(kernel, f, epilogue),  # type: ignore[arg-type]
    )
