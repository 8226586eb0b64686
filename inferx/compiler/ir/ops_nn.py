"""`ix` ops a decoder LLM is made of: embedding, the last token's rows, linear and matmul, softmax,
the norms, RoPE, attention over a KV cache and the KV-cache write.

Layouts: activations are ``[..., hidden]``; attention tensors are ``[batch, heads, seq, head_dim]``;
a KV cache is ``[batch, kv_heads, max_ctx, head_dim]``. Positions and context lengths are tensors
(data), never attributes, so one compiled kernel serves every decode step.
"""

from __future__ import annotations

from typing import Any

from xdsl.irdl import (
    AttrSizedOperandSegments,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from inferx.compiler.ir import shapes as sh
from inferx.compiler.ir.ops_base import (
    IxOp,
    get_flag,
    get_float,
    get_int,
    get_opt_float,
    get_str,
    need_float,
    need_index,
    need_rank,
    nonempty,
    positive,
    present_operands,
    same_dtype,
)
from inferx.compiler.ir.ops_tensor import FUNCTIONAL
from inferx.compiler.ir.quant import GROUPS
from inferx.compiler.ir.shapes import ShapeError
from inferx.compiler.ir.types import DimAttr, DType, TensorType

BHSD = "[batch, heads, seq, head_dim]"


@irdl_op_definition
class EmbeddingOp(IxOp):
    """Gathers rows of ``table[vocab, hidden]`` by integer ``ids[...]`` into ``[..., hidden]``."""

    name = "ix.embedding"
    table = operand_def(TensorType)
    ids = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        table, ids = ins
        need_rank(table, 2, "table", "[vocab, hidden]")
        need_index(ids, "ids")
        nonempty(table.shape[0], "the table's vocab (dim 0)")
        return [TensorType((*ids.shape, table.shape[1]), table.dtype)]


@irdl_op_definition
class LinearOp(IxOp):
    """``x[..., K] @ W + bias``. ``w_layout = "nk"`` (default, HF's [out, in]) or ``"kn"``."""

    name = "ix.linear"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$input `,` $weight (`bias` $bias^)? attr-dict `:` type($input) `,` type($weight)"
        " (`bias` type($bias)^)? `->` type($result)"
    )

    @classmethod
    def infer(cls, ins, attrs, outs):
        x, w = ins[0], ins[1]
        need_float(x, "input")
        same_dtype(x, w, "input and weight")
        need_rank(w, 2, "weight", "([N, K] for w_layout nk, [K, N] for kn)")
        if x.rank < 1:
            raise ShapeError("input must have rank >= 1")
        layout = get_str(attrs, "w_layout", ("nk", "kn"), default="nk")
        n, k = (w.shape[0], w.shape[1]) if layout == "nk" else (w.shape[1], w.shape[0])
        sh.same(x.shape[-1], k, f"input's last dim must equal the weight's K ({layout} layout)")
        if len(ins) == 3:
            bias = ins[2]
            same_dtype(x, bias, "input and bias")
            if bias.rank != 1:
                raise ShapeError(f"bias must have rank 1 [N], got {bias}")
            sh.same(bias.shape[0], n, "bias length must equal the weight's N")
        return [x.with_shape((*x.shape[:-1], n))]


def _codes_nk(x: TensorType, codes: TensorType, dtype: DType) -> tuple[Any, Any]:
    """(N, K) of a quantized linear's ``codes`` [N, K] of ``dtype``, its float input checked."""
    need_float(x, "input")
    if x.rank < 1:
        raise ShapeError("input must have rank >= 1")
    need_rank(codes, 2, "codes", "[N, K]")
    if codes.dtype is not dtype:
        raise ShapeError(f"codes must be {dtype.value}, got {codes.dtype.value}")
    n, k = codes.shape
    return n, k


def _check_bias(b: TensorType, n: Any) -> None:
    need_float(b, "bias")
    need_rank(b, 1, "bias", "[N]")
    sh.same(b.shape[0], n, "bias's length must equal the codes' N")


@irdl_op_definition
class Fp8LinearOp(IxOp):
    """``x[..., K] @ W^T`` in FP8 W8A8 (``inferx.compiler.ir.fp8``): ``codes[N, K]`` of f8e4m3 and
    one f32 ``scales[N]`` per output channel; x is quantized to E4M3 per token (its own maximum
    over K to 448) as it is read, or, with ``x_scale`` (f32 [1], a static scale from
    calibration), every token by that one scale, clamped to +-448; the E4M3 products are summed
    in fp32 and scaled by both scales; an optional ``bias[N]`` is added. The result has x's dtype.

    x already quantized: ``input`` f8e4m3 (E4M3 values) with ``row_scales[...]`` (f32, one per
    row of x: x = input * row_scales) and the result's dtype in ``out_dtype`` (f32, f16 or
    bf16); what a kernel that quantizes x once for every GEMM reading it hands on.

    x also given quantized: optional ``given`` (f8e4m3, x's shape) and ``given_scales`` (f32,
    x's rows) hold x quantized once by an ``ix.fp8_quantize`` of the same input, which a decode
    kernel reads instead of quantizing x itself where its rows reach ``given_min_rows`` (below,
    the quantizing kernel is an empty launch). They change nothing the op computes; the reference
    quantizes ``input``."""

    name = "ix.fp8_linear"
    input = operand_def(TensorType)
    codes = operand_def(TensorType)
    scales = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    x_scale = opt_operand_def(TensorType)
    row_scales = opt_operand_def(TensorType)
    given = opt_operand_def(TensorType)
    given_scales = opt_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$input `,` $codes `,` $scales (`bias` $bias^)? (`x_scale` $x_scale^)? (`row_scales` $row_scales^)?"
        " (`given` $given^)? (`given_scales` $given_scales^)?"
        " attr-dict `:` type($input) `,` type($codes) `,` type($scales) (`bias` type($bias)^)?"
        " (`x_scale` type($x_scale)^)? (`row_scales` type($row_scales)^)? (`given` type($given)^)?"
        " (`given_scales` type($given_scales)^)? `->` type($result)"
    )

    @classmethod
    def infer(cls, ins, attrs, outs):
        x, codes, scales = ins[:3]
        n, k = _codes_nk(x, codes, DType.f8e4m3)
        sh.same(x.shape[-1], k, "input's last dim must equal the codes' K")
        need_rank(scales, 1, "scales", "[N]")
        if scales.dtype is not DType.f32:
            raise ShapeError(f"scales must be f32, got {scales.dtype.value}")
        sh.same(scales.shape[0], n, "scales' length must equal the codes' N")
        extra = dict(zip(present_operands(attrs, 3, ("bias", "x_scale", "row_scales", "given", "given_scales")),
                         ins[3:], strict=True))
        if "bias" in extra:
            _check_bias(extra["bias"], n)
        if "x_scale" in extra:
            xs = extra["x_scale"]
            if xs.dtype is not DType.f32 or tuple(xs.shape) != (1,):
                raise ShapeError(f"x_scale must be f32 [1], got {xs}")
        out = x.dtype
        if x.dtype == DType.f8e4m3 or "row_scales" in extra:
            if x.dtype != DType.f8e4m3 or "row_scales" not in extra or "x_scale" in extra:
                raise ShapeError("a quantized input (f8e4m3) comes with row_scales and without x_scale")
            rs = extra["row_scales"]
            if rs.dtype is not DType.f32 or rs.rank != x.rank - 1:
                raise ShapeError(f"row_scales must be f32 of x's rows {list(x.shape[:-1])}, got {rs}")
            for i, (a, b) in enumerate(zip(rs.shape, x.shape[:-1], strict=True)):
                sh.same(a, b, f"row_scales' dim {i} must equal the input's")
            out = DType(get_str(attrs, "out_dtype", ("f32", "f16", "bf16")))
        if "given" in extra or "given_scales" in extra:
            _check_given(x, extra, attrs)
        return [TensorType((*x.shape[:-1], n), out)]


def _check_given(x: TensorType, extra: dict[str, TensorType], attrs: Any) -> None:
    """``ix.fp8_linear``'s ``given`` and ``given_scales``: both, x quantized as the op would."""
    if "given" not in extra or "given_scales" not in extra or "row_scales" in extra:
        raise ShapeError("given and given_scales come together, on an input that is not already quantized")
    g, gs = extra["given"], extra["given_scales"]
    if g.dtype is not DType.f8e4m3 or g.rank != x.rank:
        raise ShapeError(f"given must be f8e4m3 of the input's shape {list(x.shape)}, got {g}")
    for i, (a, b) in enumerate(zip(g.shape, x.shape, strict=True)):
        sh.same(a, b, f"given's dim {i} must equal the input's")
    if gs.dtype is not DType.f32 or gs.rank != x.rank - 1:
        raise ShapeError(f"given_scales must be f32 of the input's rows {list(x.shape[:-1])}, got {gs}")
    for i, (a, b) in enumerate(zip(gs.shape, x.shape[:-1], strict=True)):
        sh.same(a, b, f"given_scales' dim {i} must equal the input's")
    if get_int(attrs, "given_min_rows") < 1:
        raise ShapeError(f"given_min_rows must be at least 1, got {get_int(attrs, 'given_min_rows')}")


@irdl_op_definition
class Fp8QuantizeOp(IxOp):
    """x[..., K] quantized to E4M3 a row at a time, as ``ix.fp8_linear`` quantizes its input:
    ``codes`` (f8e4m3, E4M3 values) and ``row_scales[...]`` (f32) with x = codes * row_scales;
    each row's scale its largest magnitude over 448 (1 for a row of zeros), or with ``x_scale``
    (f32 [1], static) that scale for every row, values clamped to +-448 first. Made for FP8
    GEMMs, so x is quantized once for all the column tiles that read it. An optional
    ``min_rows``: a kernel may skip the work below that many rows of x, where every GEMM reading
    the result reads its ``given`` only from those rows (``ix.fp8_linear``'s ``given_min_rows``)."""

    name = "ix.fp8_quantize"
    input = operand_def(TensorType)
    x_scale = opt_operand_def(TensorType)
    codes = result_def(TensorType)
    row_scales = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$input (`x_scale` $x_scale^)? attr-dict `:` type($input) (`x_scale` type($x_scale)^)?"
        " `->` type($codes) `,` type($row_scales)"
    )

    @classmethod
    def infer(cls, ins, attrs, outs):
        x = ins[0]
        need_float(x, "input")
        if x.dtype == DType.f8e4m3 or x.rank < 1:
            raise ShapeError(f"input must be a float tensor [..., K] of f32, f16 or bf16, got {x}")
        if len(ins) > 1 and (ins[1].dtype is not DType.f32 or tuple(ins[1].shape) != (1,)):
            raise ShapeError(f"x_scale must be f32 [1], got {ins[1]}")
        if get_int(attrs, "min_rows", 1) < 1:
            raise ShapeError(f"min_rows must be at least 1, got {get_int(attrs, 'min_rows')}")
        return [x.with_dtype(DType.f8e4m3), TensorType(x.shape[:-1], DType.f32)]


@irdl_op_definition
class QLinearOp(IxOp):
    """``x[..., K] @ W^T`` with ``W[N, K]`` quantized (``inferx.compiler.ir.quant``): ``codes[N, K]``
    of i4, each the signed value ``q - 8`` of a 4-bit code ``q``; ``scales[N, K / group]``; with
    ``mins`` (same shape and dtype as the scales) ``w = q * s + m``, without ``w = (q - 8) * s``;
    an optional ``col_scale[K]`` multiplies column k of W, an optional ``bias[N]`` is added to the
    product. ``group`` (32, 64 or 128) divides K. The weight is dequantized in fp32 and the product
    accumulated in fp32.

    An optional ``dense`` operand (1-D, x's dtype) holds the same weight already dequantized by an
    ``ix.dequantize`` of these codes, which a prompt's kernel may read instead of the codes (see
    there); it changes nothing the op computes, and the reference reads the codes."""

    name = "ix.qlinear"
    input = operand_def(TensorType)
    codes = operand_def(TensorType)
    scales = operand_def(TensorType)
    mins = opt_operand_def(TensorType)
    col_scale = opt_operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    dense = opt_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$input `,` $codes `,` $scales (`mins` $mins^)? (`col_scale` $col_scale^)? (`bias` $bias^)?"
        " (`dense` $dense^)? attr-dict"
        " `:` type($input) `,` type($codes) `,` type($scales) (`mins` type($mins)^)?"
        " (`col_scale` type($col_scale)^)? (`bias` type($bias)^)? (`dense` type($dense)^)? `->` type($result)"
    )

    @classmethod
    def infer(cls, ins, attrs, outs):
        x, codes, scales = ins[:3]
        n, k = _int4_weight(x, codes, scales, attrs)
        sh.same(x.shape[-1], k, "input's last dim must equal the codes' K")
        extra = dict(zip(present_operands(attrs, 3, QLINEAR_OPTIONAL), ins[3:], strict=True))
        _check_quant_extras(extra, scales, k)
        if "bias" in extra:
            _check_bias(extra["bias"], n)
        if "dense" in extra:
            _check_dense(extra["dense"], x.dtype, n, k)
        return [x.with_shape((*x.shape[:-1], n))]


QLINEAR_OPTIONAL = ("mins", "col_scale", "bias", "dense")


def _int4_weight(x: TensorType, codes: TensorType, scales: TensorType, attrs: Any) -> tuple[Any, int]:
    """(N, K) of int4 ``codes`` [N, K] with ``scales`` [N, K / group] (``group`` from ``attrs``)."""
    n, k = _codes_nk(x, codes, DType.i4)
    group = get_int(attrs, "group")
    if group not in GROUPS:
        raise ShapeError(f"group must be one of {', '.join(map(str, GROUPS))}, got {group}")
    if not isinstance(k, int) or k % group:
        raise ShapeError(f"the group {group} must divide the codes' K, got {k}")
    need_float(scales, "scales")
    need_rank(scales, 2, "scales", "[N, K / group]")
    sh.same(scales.shape[0], n, "scales' N must equal the codes' N")
    sh.same(scales.shape[1], k // group, f"scales must have K / group = {k // group} columns")
    return n, k


def _check_quant_extras(extra: dict[str, TensorType], scales: TensorType, k: Any) -> None:
    """The minimums (the scales' type) and the column scale ([K]) of an int4 weight."""
    if "mins" in extra:
        if extra["mins"] != scales:
            raise ShapeError(f"mins must have the scales' type {scales}, got {extra['mins']}")
    if "col_scale" in extra:
        col = extra["col_scale"]
        need_float(col, "col_scale")
        need_rank(col, 1, "col_scale", "[K]")
        sh.same(col.shape[0], k, "col_scale's length must equal K")


def _check_dense(t: TensorType, dtype: DType, n: Any, k: Any) -> None:
    """A dequantized weight: 1-D of ``dtype``, at least N x K elements."""
    need_rank(t, 1, "dense", "[size]")
    if t.dtype is not dtype:
        raise ShapeError(f"dense must be {dtype.value}, got {t.dtype.value}")
    if isinstance(t.shape[0], int) and isinstance(n, int) and isinstance(k, int) and t.shape[0] < n * k:
        raise ShapeError(f"dense must hold N x K = {n * k} elements, got {t.shape[0]}")


@irdl_op_definition
class DequantizeOp(IxOp):
    """The weight of an ``ix.qlinear`` (``codes``, ``scales``, optional ``mins``, ``group``: its
    operands) dequantized in fp32 as the qlinear does, times the optional ``col_scale[K]`` and
    ``norm_weight[K]`` (an RMSNorm's weight the reading kernel applies to x; fp32 products),
    rounded to the result's dtype and written row-major into the first N x K elements of the 1-D
    result; the rest of it is ``into``'s (zeros without ``into``). A prompt's int4 GEMM reads its
    weight from it (``ix.qlinear``'s ``dense``) rather than unpacking every code in every row
    block; consecutive ones write into one buffer (``into``: the previous one's result).

    ``rows`` (the reading GEMM's rows, a dim) and ``min_rows``: the kernel may skip the work at
    fewer rows, where the reading kernel reads the codes instead."""

    name = "ix.dequantize"
    codes = operand_def(TensorType)
    scales = operand_def(TensorType)
    mins = opt_operand_def(TensorType)
    col_scale = opt_operand_def(TensorType)
    norm_weight = opt_operand_def(TensorType)
    into = opt_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$codes `,` $scales (`mins` $mins^)? (`col_scale` $col_scale^)? (`norm_weight` $norm_weight^)?"
        " (`into` $into^)? attr-dict `:` type($codes) `,` type($scales) (`mins` type($mins)^)?"
        " (`col_scale` type($col_scale)^)? (`norm_weight` type($norm_weight)^)? (`into` type($into)^)?"
        " `->` type($result)"
    )

    @classmethod
    def infer(cls, ins, attrs, outs):
        if outs is None or len(outs) != 1:
            raise ShapeError("needs its result type stated")
        (out,) = outs
        codes, scales = ins[:2]
        need_float(out, "result")
        n, k = _int4_weight(out.with_shape((1,)), codes, scales, attrs)
        extra = dict(zip(present_operands(attrs, 2, DEQUANTIZE_OPTIONAL), ins[2:], strict=True))
        _check_quant_extras(extra, scales, k)
        if "norm_weight" in extra:
            g = extra["norm_weight"]
            need_float(g, "norm_weight")
            need_rank(g, 1, "norm_weight", "[K]")
            sh.same(g.shape[0], k, "norm_weight's length must equal K")
        _check_dense(out, out.dtype, n, k)
        if "into" in extra and extra["into"] != out:
            raise ShapeError(f"into must have the result's type {out}, got {extra['into']}")
        if get_int(attrs, "min_rows") < 1:
            raise ShapeError(f"min_rows must be at least 1, got {get_int(attrs, 'min_rows')}")
        if not isinstance(attrs.get("rows"), DimAttr):
            raise ShapeError("rows must be a dim (#ix.dim<...>): the reading GEMM's rows")
        return [out]


DEQUANTIZE_OPTIONAL = ("mins", "col_scale", "norm_weight", "into")


@irdl_op_definition
class MatmulOp(IxOp):
    """Batched ``a[..., M, K] @ b[..., K, N]`` with broadcasting over the leading dims."""

    name = "ix.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        a, b = ins
        need_float(a, "lhs")
        same_dtype(a, b, "lhs and rhs")
        if a.rank < 2 or b.rank < 2:
            raise ShapeError(f"both operands need rank >= 2, got {a} and {b}")
        sh.same(a.shape[-1], b.shape[-2], "lhs's K (last dim) must equal rhs's K (dim -2)")
        try:
            batch = sh.broadcast(a.shape[:-2], b.shape[:-2])
        except ShapeError as e:
            raise ShapeError(f"the batch dims (all but the last two) must broadcast: {e}") from None
        return [a.with_shape((*batch, a.shape[-2], b.shape[-1]))]


@irdl_op_definition
class SoftmaxOp(IxOp):
    """Softmax along ``dim``, accumulated in fp32."""

    name = "ix.softmax"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        (x,) = ins
        need_float(x, "input")
        nonempty(x.shape[sh.norm_axis(get_int(attrs, "dim"), x.rank)], "the softmax dim")
        return [x]


@irdl_op_definition
class RMSNormOp(IxOp):
    """``x / sqrt(mean(x^2, -1) + eps) * weight`` over the last dim."""

    name = "ix.rmsnorm"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        x, w = ins
        need_float(x, "input")
        if x.rank < 1:
            raise ShapeError("input must have rank >= 1 (it is normalized over its last dim)")
        same_dtype(x, w, "input and weight")
        if w.rank != 1:
            raise ShapeError(f"weight must have rank 1 [hidden], got {w}")
        sh.same(w.shape[0], x.shape[-1], "weight length must equal the input's last dim")
        positive(get_float(attrs, "eps"), "eps")
        nonempty(x.shape[-1], "the normalized (last) dim")
        return [x]


@irdl_op_definition
class SumSquaresOp(IxOp):
    """``sum(x^2, -1)`` in f32 over the last dim of ``x`` as stored: the statistics an RMSNorm of
    ``x`` needs, computed where ``x`` is produced (the norm-stats pass)."""

    name = "ix.sum_squares"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        (x,) = ins
        need_float(x, "input")
        if x.rank < 1:
            raise ShapeError("input must have rank >= 1 (it is summed over its last dim)")
        return [TensorType(x.shape[:-1], "f32")]


@irdl_op_definition
class RMSNormSumSquaresOp(IxOp):
    """An RMSNorm whose row statistics come precomputed: ``sumsq`` is ``sum(x^2, -1)`` (an
    ``ix.sum_squares`` of ``x``), so ``x / sqrt(sumsq / n + eps) * weight``."""

    name = "ix.rmsnorm_ss"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    sumsq = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        x, w, ss = ins
        out = RMSNormOp.infer([x, w], attrs, outs)
        if ss.dtype.value != "f32":
            raise ShapeError(f"sumsq must be f32, got {ss.dtype.value}")
        if ss.rank != x.rank - 1:
            raise ShapeError(f"sumsq must have the input's shape without its last dim, got {ss}")
        for i, (a, b) in enumerate(zip(ss.shape, x.shape[:-1], strict=True)):
            sh.same(a, b, f"sumsq's dim {i} must equal the input's")
        return out


@irdl_op_definition
class LayerNormOp(IxOp):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last dim; both optional."""

    name = "ix.layernorm"
    input = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$input (`weight` $weight^)? (`bias` $bias^)? attr-dict `:` type($input)"
        " (`weight` type($weight)^)? (`bias` type($bias)^)? `->` type($result)"
    )

    @classmethod
    def infer(cls, ins, attrs, outs):
        x = ins[0]
        need_float(x, "input")
        if x.rank < 1:
            raise ShapeError("input must have rank >= 1 (it is normalized over its last dim)")
        for name, p in zip(present_operands(attrs, 1, ("weight", "bias")), ins[1:], strict=True):
            same_dtype(x, p, f"input and {name}")
            if p.rank != 1:
                raise ShapeError(f"{name} must have rank 1 [hidden], got {p}")
            sh.same(p.shape[0], x.shape[-1], f"{name} length must equal the input's last dim")
        positive(get_float(attrs, "eps"), "eps")
        nonempty(x.shape[-1], "the normalized (last) dim")
        return [x]


ROPE_STYLES = ("rotate_half", "interleaved")
ROPE_SCALINGS = ("none", "linear", "dynamic", "llama3")


@irdl_op_definition
class RopeOp(IxOp):
    """Rotary embedding of ``x[batch, heads, seq, head_dim]`` at ``positions[batch, seq]``.

    Attributes: ``theta``; ``style`` rotate_half (HF Llama) or interleaved (GPT-J); ``rotary_dim``
    (default: all of head_dim); ``scaling`` none, linear (``factor``), dynamic NTK (``factor``,
    ``original_max_position``) or llama3 (``factor``, ``low_freq_factor``, ``high_freq_factor``,
    ``original_max_position``).
    """

    name = "ix.rope"
    input = operand_def(TensorType)
    positions = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        x, pos = ins
        need_float(x, "input")
        need_rank(x, 4, "input", BHSD)
        need_index(pos, "positions")
        need_rank(pos, 2, "positions", "[batch, seq]")
        sh.same(pos.shape[0], x.shape[0], "positions' batch must equal the input's")
        sh.same(pos.shape[1], x.shape[2], "positions' seq must equal the input's")
        head_dim = x.shape[3]
        if not isinstance(head_dim, int):
            raise ShapeError(f"head_dim (dim 3 of the input) must be static, got {sh.fmt(head_dim)}")
        rot = get_int(attrs, "rotary_dim", head_dim)
        if rot <= 0 or rot % 2 or rot > head_dim:
            raise ShapeError(f"rotary_dim {rot} must be even and in 2..head_dim ({head_dim})")
        positive(get_float(attrs, "theta"), "theta")
        get_str(attrs, "style", ROPE_STYLES, default="rotate_half")
        scaling = get_str(attrs, "scaling", ROPE_SCALINGS, default="none")
        needs = {"linear": ("factor",), "dynamic": ("factor", "original_max_position"),
                 "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position")}
        for key in needs.get(scaling, ()):
            if key not in attrs:
                raise ShapeError(f"scaling \"{scaling}\" needs the attribute '{key}'")
        if scaling != "none":
            positive(get_float(attrs, "factor"), "scaling factor")
        if scaling in ("dynamic", "llama3") and get_int(attrs, "original_max_position") <= 0:
            raise ShapeError("original_max_position must be positive")
        if scaling == "llama3":
            low, high = get_float(attrs, "low_freq_factor"), get_float(attrs, "high_freq_factor")
            positive(low, "low_freq_factor")
            positive(high, "high_freq_factor")
            if high <= low:
                raise ShapeError("llama3 scaling needs high_freq_factor > low_freq_factor")
        return [x]


@irdl_op_definition
class AttentionOp(IxOp):
    """Scaled dot-product attention with GQA over ``k``/``v`` that may be a KV cache.

    ``q[b, hq, s, d]``, ``k[b, hkv, t, d]``, ``v[b, hkv, t, dv]``; ``hq`` a multiple of ``hkv``.
    Query i of sequence n sits at ``positions[n, i]`` (default: ``t - s + i``); keys at or past
    ``kv_lens[n]`` (default: ``t``) are ignored. ``causal`` hides keys after the query's position,
    ``window`` keys at or more than ``window`` positions behind it; ``softcap`` caps the logits
    with ``softcap * tanh(logit / softcap)``. ``scale`` defaults to ``1/sqrt(d)``. A query with
    no visible key yields zeros.

    An FP8 KV cache: ``k`` and ``v`` f8e4m3 (E4M3 values) with ``k_scale`` and ``v_scale`` (f32
    [hkv], one per KV head, both or neither): the keys and values are ``k * k_scale[h]`` and
    ``v * v_scale[h]`` (``inferx.compiler.ir.fp8``, "KV cache").

    A paged cache (``block_table``, i32 [batch, blocks a sequence]): ``k`` and ``v`` are pools of
    blocks ``[n, hkv, B, d]`` and key t of sequence b is ``k[block_table[b, t // B], :, t % B]``
    (``ix.kv_write``): ``t`` is the table's blocks times B.
    """

    name = "ix.attention"
    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    positions = opt_operand_def(TensorType)
    kv_lens = opt_operand_def(TensorType)
    k_scale = opt_operand_def(TensorType)
    v_scale = opt_operand_def(TensorType)
    block_table = opt_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$q `,` $k `,` $v (`positions` $positions^)? (`kv_lens` $kv_lens^)? (`k_scale` $k_scale^)?"
        " (`v_scale` $v_scale^)? (`block_table` $block_table^)? attr-dict `:` type($q)"
        " `,` type($k) `,` type($v) (`positions` type($positions)^)? (`kv_lens` type($kv_lens)^)?"
        " (`k_scale` type($k_scale)^)? (`v_scale` type($v_scale)^)? (`block_table` type($block_table)^)?"
        " `->` type($result)"
    )

    @classmethod
    def infer(cls, ins, attrs, outs):
        q, k, v = ins[:3]
        extra = dict(zip(present_operands(attrs, 3, ("positions", "kv_lens", "k_scale", "v_scale", "block_table")),
                         ins[3:], strict=True))
        fp8 = "k_scale" in extra or "v_scale" in extra
        for name, t in (("q", q), ("k", k), ("v", v)):
            need_rank(t, 4, name, BHSD)
            if not (fp8 and name != "q"):
                same_dtype(q, t, f"q and {name}")
        if fp8:
            if "k_scale" not in extra or "v_scale" not in extra:
                raise ShapeError("k_scale and v_scale come together (an FP8 KV cache)")
            for name, t in (("k", k), ("v", v)):
                if t.dtype != DType.f8e4m3:
                    raise ShapeError(f"{name} must be f8e4m3 with {name}_scale, got {t.dtype.value}")
            for name in ("k_scale", "v_scale"):
                st = extra[name]
                if st.dtype != DType.f32 or st.rank != 1:
                    raise ShapeError(f"{name} must be f32 [kv heads], got {st}")
                sh.same(st.shape[0], k.shape[1], f"{name}'s length must equal the kv heads")
        need_float(q, "q")
        if q.dtype == DType.f8e4m3:
            raise ShapeError("q must be f32, f16 or bf16, got f8e4m3")
        if "block_table" in extra:
            _check_block_table(extra["block_table"], k, q.shape[0], "q")
            sh.same(v.shape[0], k.shape[0], "v's blocks must equal k's")
        else:
            sh.same(k.shape[0], q.shape[0], "k's batch must equal q's")
            sh.same(v.shape[0], q.shape[0], "v's batch must equal q's")
        sh.same(v.shape[1], k.shape[1], "v's kv heads must equal k's")
        sh.same(v.shape[2], k.shape[2], "v's context length must equal k's")
        sh.same(k.shape[3], q.shape[3], "k's head_dim must equal q's")
        hq, hkv = q.shape[1], k.shape[1]
        if not isinstance(hkv, int) or hkv <= 0:
            raise ShapeError(f"kv heads must be a static positive int, got {hkv}")
        sh.divides(hkv, hq, "query heads must be a multiple of kv heads (GQA)")
        if "positions" in extra:
            pos = extra["positions"]
            need_index(pos, "positions")
            need_rank(pos, 2, "positions", "[batch, seq]")
            sh.same(pos.shape[0], q.shape[0], "positions' batch must equal q's")
            sh.same(pos.shape[1], q.shape[2], "positions' seq must equal q's")
        if "kv_lens" in extra:
            lens = extra["kv_lens"]
            need_index(lens, "kv_lens")
            need_rank(lens, 1, "kv_lens", "[batch]")
            sh.same(lens.shape[0], q.shape[0], "kv_lens' batch must equal q's")
        window = attrs.get("window")
        if window is not None and get_int(attrs, "window") <= 0:
            raise ShapeError("window must be positive")
        positive(get_opt_float(attrs, "softcap"), "softcap")
        positive(get_opt_float(attrs, "scale"), "scale")
        nonempty(q.shape[3], "head_dim (dim 3 of q)")
        get_flag(attrs, "causal")
        return [q.with_shape((*q.shape[:3], v.shape[3]))]


@irdl_op_definition
class KVWriteOp(IxOp):
    """Returns ``cache[b, h, T, d]`` with ``new[b, h, s, d]`` written at ``positions[b, s]``.

    A negative position skips that token (padding). The result replaces the cache value.

    An FP8 cache (f8e4m3) takes ``scale`` (f32 [h], one per KV head): it holds
    ``e4m3(clamp(new / scale[h], +-448))`` (``inferx.compiler.ir.fp8``, "KV cache").

    A paged cache (``block_table``, i32 [batch, blocks a sequence]) is a pool of blocks
    ``cache[n, h, B, d]`` (B the block size): position p of sequence b lives in block
    ``block_table[b, p // B]`` at slot ``p % B``. Its batch is the table's.
    """

    name = "ix.kv_write"
    cache = operand_def(TensorType)
    new = operand_def(TensorType)
    positions = operand_def(TensorType)
    scale = opt_operand_def(TensorType)
    block_table = opt_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$cache `,` $new `,` $positions (`,` $scale^)? (`block_table` $block_table^)? attr-dict"
        " `:` `(` type($cache) `,` type($new) `,` type($positions) (`,` type($scale)^)? `)`"
        " (`block_table` type($block_table)^)? `->` type($result)"
    )

    @classmethod
    def infer(cls, ins, attrs, outs):
        cache, new, pos = ins[:3]
        extra = dict(zip(present_operands(attrs, 3, ("scale", "block_table")), ins[3:], strict=True))
        need_rank(cache, 4, "cache", "[batch, kv_heads, max_ctx, head_dim]")
        need_rank(new, 4, "new", BHSD)
        if "scale" in extra:
            if cache.dtype != DType.f8e4m3:
                raise ShapeError(f"a scale goes with an f8e4m3 cache, got a {cache.dtype.value} cache")
            need_float(new, "new")
            if new.dtype == DType.f8e4m3:
                raise ShapeError("new must be f32, f16 or bf16, got f8e4m3")
            st = extra["scale"]
            if st.dtype != DType.f32 or st.rank != 1:
                raise ShapeError(f"scale must be f32 [kv heads], got {st}")
            sh.same(st.shape[0], cache.shape[1], "scale's length must equal the cache's kv heads")
        elif cache.dtype == DType.f8e4m3 and new.dtype != DType.f8e4m3:
            raise ShapeError("an f8e4m3 cache written from float values needs its scale")
        else:
            same_dtype(cache, new, "cache and new")
        need_index(pos, "positions")
        need_rank(pos, 2, "positions", "[batch, seq]")
        labels = ((1, "kv heads"), (3, "head_dim"))
        if "block_table" in extra:
            _check_block_table(extra["block_table"], cache, new.shape[0], "new")
        else:
            labels = ((0, "batch"), *labels)
        for i, label in labels:
            sh.same(new.shape[i], cache.shape[i], f"new's {label} (dim {i}) must equal the cache's")
        sh.same(pos.shape[0], new.shape[0], "positions' batch must equal new's")
        sh.same(pos.shape[1], new.shape[2], "positions' seq must equal new's")
        return [cache]


def _check_block_table(table: TensorType, cache: TensorType, batch: Any, who: str) -> None:
    """A paged cache's block table: i32 [batch, blocks a sequence], over a pool of static shape."""
    if table.dtype != DType.i32 or table.rank != 2:
        raise ShapeError(f"block_table must be i32 [batch, blocks a sequence], got {table}")
    sh.same(table.shape[0], batch, f"block_table's batch must equal {who}'s")
    for what, d in (("a paged cache's blocks (dim 0)", cache.shape[0]), ("a paged cache's block size (dim 2)",
                     cache.shape[2]), ("block_table's blocks a sequence", table.shape[1])):
        if not isinstance(d, int) or d <= 0:
            raise ShapeError(f"{what} must be a static positive int, got {d}")


@irdl_op_definition
class LastTokenOp(IxOp):
    """``x[b, i, :]`` at each sequence's last real token, as ``[batch, 1, hidden]``: ``i`` is the
    last index of ``positions[b, :]`` that is not negative (padding is -1; 0 if a row has none).

    What a prompt's next-token logits need: the final norm and LM head then run over ``batch``
    rows, not ``batch x seq``."""

    name = "ix.last_token"
    input = operand_def(TensorType)
    positions = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = FUNCTIONAL

    @classmethod
    def infer(cls, ins, attrs, outs):
        x, pos = ins
        need_rank(x, 3, "input", "[batch, seq, hidden]")
        need_index(pos, "positions")
        need_rank(pos, 2, "positions", "[batch, seq]")
        sh.same(pos.shape[0], x.shape[0], "positions' batch must equal the input's")
        sh.same(pos.shape[1], x.shape[1], "positions' seq must equal the input's")
        return [x.with_shape([x.shape[0], 1, x.shape[2]])]


# Either form of RMSNorm: statistics from the input, or precomputed beside it.
RMS_NORMS = (RMSNormOp, RMSNormSumSquaresOp)

NN_OPS = [EmbeddingOp, LastTokenOp, LinearOp, QLinearOp, DequantizeOp, Fp8LinearOp, Fp8QuantizeOp, MatmulOp,
          SoftmaxOp, RMSNormOp, LayerNormOp, RopeOp, AttentionOp, KVWriteOp, SumSquaresOp, RMSNormSumSquaresOp]
