"""quantize-fp8: the linears the options name become ``ix.fp8_linear`` over FP8 (E4M3) weights.

    %w = ix.weight {name = "W"} : [N, K] bf16         %c = ix.weight {name = "W.fp8.codes"} : [N, K] f8e4m3
    %y = ix.linear %x, %w                       ->    %s = ix.weight {name = "W.fp8.scales"} : [N] f32
                                                      %y = ix.fp8_linear %x, %c, %s

W8A8 with a scale per output channel and activations quantized per token in the linear
(``inferx.compiler.ir.fp8``). The new weights are named by ``fp8_names``; the program's store
serves them (``inferx.compiler.quant.fp8``). A linear's bias stays in float, the op's ``bias``.

Applies to an ``ix.linear`` whose weight is an ``ix.weight``, named as the ``quantize`` pass names
linears (``include``, ``exclude``, the LM head only with ``head``). A weight stored [K, N] (GPT-2's
Conv1D, the "kn" layout) is quantized as its transpose, as ``quantize`` does: its codes are
[N, K] like every other's, and the store serves them so (``quantize.kn_weights``). Runs where
``quantize`` runs: on the imported program, before cleanup.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir.types import DType, TensorType
from inferx.passes.quantize import candidates, embedding_tables, is_kn, selects

PARTS = ("codes", "scales")
X_SCALE = "x_scale"  # a static activation scale: named by the first weight of the linears sharing the input


def fp8_names(weight: str) -> dict[str, str]:
    """{part: store name} of ``weight``'s FP8 parts (and the name of a static activation scale
    where ``weight`` is the first linear of its input)."""
    return {part: f"{weight}.fp8.{part}" for part in (*PARTS, X_SCALE)}


def parse_fp8_name(name: str) -> tuple[str, str] | None:
    """(weight, part) of a name ``fp8_names`` made, else None."""
    head, _, part = name.rpartition(".")
    weight, _, tag = head.rpartition(".")
    return (weight, part) if tag == "fp8" and part in (*PARTS, X_SCALE) and weight else None


@dataclass(frozen=True)
class QuantizeFp8(ModulePass):
    name = "quantize-fp8"

    include: str = "*"
    exclude: str = ""
    head: bool = False
    # Static activation scales (calibrated): each fp8_linear reads an ``x_scale`` weight, one for
    # the linears of one input, named by the first of them (``fp8_names(first)["x_scale"]``).
    static: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        tables = embedding_tables(op)
        first: dict[object, str] = {}  # an input value: the first selected weight that reads it
        for lin in candidates(op):
            name = lin.weight.owner.attributes["name"].data  # type: ignore[union-attr]
            if not selects(name, tables, self.include, self.exclude, self.head):
                continue
            _rewrite(lin, name, first.setdefault(lin.input, name) if self.static else None)


def _rewrite(lin: nn.LinearOp, name: str, scale_of: str | None) -> None:
    wt = lin.weight.type
    assert isinstance(wt, TensorType)
    n, k = wt.shape[::-1] if is_kn(lin) else wt.shape
    names = fp8_names(name)
    types = {"codes": TensorType((n, k), DType.f8e4m3), "scales": TensorType((n,), DType.f32)}
    parts = {p: t.WeightOp.make(result_types=[types[p]], name=StringAttr(names[p])) for p in PARTS}
    for w in parts.values():
        Rewriter.insert_op(w, InsertPoint.before(lin))
    xs = None
    if scale_of is not None:
        xs = t.WeightOp.make(result_types=[TensorType((1,), DType.f32)],
                             name=StringAttr(fp8_names(scale_of)[X_SCALE]))
        Rewriter.insert_op(xs, InsertPoint.before(lin))
    Rewriter.replace_op(lin, nn.Fp8LinearOp.make(lin.input, parts["codes"].results[0], parts["scales"].results[0],
                                                 lin.bias, None if xs is None else xs.results[0]))
