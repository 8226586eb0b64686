"""The one table from ATen op overloads to ix lowerings: ``LOWERINGS``.

A lowering is ``fn(cx, a) -> ix value | tuple of values | None``: ``a`` holds the node's arguments
bound by name to the op's schema (defaults filled in), ``cx`` is the ``LowerCtx`` of the graph.
It emits ix ops through ``cx.emit`` and returns the node's value; ``None`` means the node has no
value (assertions). A lowering that meets a case it does not cover raises ``cx.error(..., True)``
(an ``UnsupportedOpError``); the driver checks every returned type against torch's own.

The table holds both the ops torch.export keeps (``linear``, ``layer_norm``,
``scaled_dot_product_attention``) and their core-ATen forms (``addmm``, ``native_layer_norm``,
``_softmax``), so it lowers graphs before or after ``run_decompositions``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from xdsl.dialects.builtin import StringAttr, UnitAttr
from xdsl.ir import SSAValue

from inferx.compiler.frontend.aten_context import LowerCtx, Lowered
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as ts
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import float_attr, int_attr, ints_attr
from inferx.compiler.ir.types import DimAttr, TensorType

aten = torch.ops.aten
Args = Mapping[str, Any]
Lowering = Callable[[LowerCtx, Args], Lowered]
BIG = 2**62  # slice bounds at or past this mean "to the end" (torch uses INT64_MAX)


def _t(v: SSAValue) -> TensorType:
    assert isinstance(v.type, TensorType)
    return v.type


def _axis(d: int, rank: int) -> int:
    return d % rank if rank else 0


def _reshape_to(cx: LowerCtx, x: SSAValue, t: TensorType) -> SSAValue:
    if _t(x).shape == t.shape:
        return x
    return cx.emit(ts.ReshapeOp, x, result_types=[t.with_dtype(_t(x).dtype)])


# elementwise ---------------------------------------------------------------------------------


def _binary(cls: type[ts.BinaryOp], lhs: str = "self", rhs: str = "other", scaled: bool = False,
            swap: bool = False) -> Lowering:
    """``lhs <op> rhs`` in torch's result dtype; ``scaled`` multiplies rhs by ``alpha`` first."""

    def lower(cx: LowerCtx, a: Args) -> Lowered:
        dtype = cx.out_type().dtype
        x, y = cx.value(a[lhs], dtype), cx.value(a[rhs], dtype)
        if scaled and a.get("alpha", 1) != 1:
            y = cx.emit(ts.MulOp, y, cx.value(a["alpha"], dtype))
        return cx.emit(cls, *((y, x) if swap else (x, y)))

    return lower


def _unary(cls: type[ts.UnaryOp], **attrs: Any) -> Lowering:
    def lower(cx: LowerCtx, a: Args) -> Lowered:
        return cx.emit(cls, cx.value(a["self"], cx.out_type().dtype), **attrs)

    return lower


def _gelu(cx: LowerCtx, a: Args) -> Lowered:
    return cx.emit(ts.GeluOp, cx.value(a["self"]), approximate=StringAttr(a["approximate"]))


def _relu(cx: LowerCtx, a: Args) -> Lowered:
    x = cx.value(a["self"])
    return cx.emit(ts.MaxOp, x, cx.value(0, _t(x).dtype))


def _reciprocal(cx: LowerCtx, a: Args) -> Lowered:
    x = cx.value(a["self"], cx.out_type().dtype)
    return cx.emit(ts.DivOp, cx.value(1.0, _t(x).dtype), x)


def _clamp(cx: LowerCtx, a: Args) -> Lowered:
    dtype = cx.out_type().dtype
    x = cx.value(a["self"], dtype)
    if a["min"] is not None:
        x = cx.emit(ts.MaxOp, x, cx.value(a["min"], dtype))
    if a["max"] is not None:
        x = cx.emit(ts.MinOp, x, cx.value(a["max"], dtype))
    return x


def _pow(cx: LowerCtx, a: Args) -> Lowered:
    dtype = cx.out_type().dtype
    return cx.emit(ts.PowOp, cx.value(a["self"], dtype), cx.value(a["exponent"], dtype))


def _div(cx: LowerCtx, a: Args) -> Lowered:
    if a.get("rounding_mode") is not None:
        raise cx.error(f"rounding_mode={a['rounding_mode']!r} is not supported", True)
    dtype = cx.out_type().dtype
    return cx.emit(ts.DivOp, cx.value(a["self"], dtype), cx.value(a["other"], dtype))


def _cast(cx: LowerCtx, a: Args) -> Lowered:
    return cx.value(a["self"], cx.out_type().dtype)


def _identity(key: str = "self") -> Lowering:
    def lower(cx: LowerCtx, a: Args) -> Lowered:
        return cx.value(a[key])

    return lower


def _dropout(cx: LowerCtx, a: Args) -> Lowered:
    if a["train"] and a["p"] != 0:
        raise cx.error("dropout in training mode has no ix equivalent; export the module in eval()", True)
    return cx.value(a["input"])


def _nothing(cx: LowerCtx, a: Args) -> Lowered:
    return None


# reductions ------------------------------------------------------------------------------------


def _reduce(cls: type[ts.ReduceOp]) -> Lowering:
    def lower(cx: LowerCtx, a: Args) -> Lowered:
        out = cx.out_type()
        x = cx.value(a["self"], out.dtype)
        dims = a.get("dim") or list(range(_t(x).rank))
        if _t(x).rank == 0:
            return x
        keep = UnitAttr() if a.get("keepdim", False) else None
        return cx.emit(cls, x, dims=ints_attr([_axis(d, _t(x).rank) for d in dims]), keepdim=keep)

    return lower


def _softmax(cx: LowerCtx, a: Args) -> Lowered:
    x = cx.value(a["self"], cx.out_type().dtype)
    return cx.emit(nn.SoftmaxOp, x, dim=int_attr(_axis(a["dim"], _t(x).rank)))


# nn --------------------------------------------------------------------------------------------


def _layer_norm(cx: LowerCtx, a: Args) -> Lowered:
    if len(a["normalized_shape"]) != 1:
        raise cx.error(f"layer_norm over {len(a['normalized_shape'])} dims (ix normalizes the last "
                       "dim only)", True)
    x = cx.value(a["input"])
    w = None if a["weight"] is None else cx.value(a["weight"])
    b = None if a["bias"] is None else cx.value(a["bias"])
    return cx.emit(nn.LayerNormOp, x, w, b, eps=float_attr(a["eps"]))


def _native_layer_norm(cx: LowerCtx, a: Args) -> Lowered:
    return (_layer_norm(cx, a), None, None)  # type: ignore[return-value]


def _rms_norm(cx: LowerCtx, a: Args) -> Lowered:
    x = cx.value(a["input"])
    if len(a["normalized_shape"]) != 1:
        raise cx.error("rms_norm over more than the last dim", True)
    hidden = _t(x).shape[-1]
    w = cx.value(a["weight"]) if a["weight"] is not None else cx.constant(1.0, [hidden], _t(x).dtype)
    eps = a["eps"] if a["eps"] is not None else torch.finfo(torch.float32).eps
    return cx.emit(nn.RMSNormOp, x, w, eps=float_attr(eps))


def _embedding(cx: LowerCtx, a: Args) -> Lowered:
    return cx.emit(nn.EmbeddingOp, cx.value(a["weight"]), cx.value(a["indices"]))


def _linear(cx: LowerCtx, a: Args) -> Lowered:
    x, w = cx.value(a["input"]), cx.value(a["weight"])
    bias = None if a["bias"] is None else cx.value(a["bias"])
    return cx.emit(nn.LinearOp, x, w, bias)


def _addmm(cx: LowerCtx, a: Args) -> Lowered:
    if a["beta"] != 1 or a["alpha"] != 1:
        raise cx.error("addmm with beta or alpha other than 1", True)
    x, w, bias = cx.value(a["mat1"]), cx.value(a["mat2"]), cx.value(a["self"])
    if _t(bias).rank == 1:
        return cx.emit(nn.LinearOp, x, w, bias, w_layout=StringAttr("kn"))
    return cx.emit(ts.AddOp, cx.emit(nn.MatmulOp, x, w), bias)


def _matmul(lhs: str = "self", rhs: str = "mat2") -> Lowering:
    """Batched matmul; a rank-1 operand becomes a matrix and the extra dim is dropped after."""

    def lower(cx: LowerCtx, a: Args) -> Lowered:
        x, y = cx.value(a[lhs]), cx.value(a[rhs])
        if _t(x).rank == 1:
            x = _reshape_to(cx, x, _t(x).with_shape([1, _t(x).shape[0]]))
        if _t(y).rank == 1:
            y = _reshape_to(cx, y, _t(y).with_shape([_t(y).shape[0], 1]))
        return _reshape_to(cx, cx.emit(nn.MatmulOp, x, y), cx.out_type())

    return lower


def _sdpa(cx: LowerCtx, a: Args) -> Lowered:
    """``ix.attention``: a mask is accepted only when it is known to hide nothing."""
    if a["dropout_p"] != 0:
        raise cx.error("attention dropout (dropout_p != 0)", True)
    mask = a["attn_mask"]
    if mask is not None:
        known = cx.known.get(mask) if isinstance(mask, torch.fx.Node) else None
        hides_nothing = known is not None and bool(
            known.all() if known.dtype == torch.bool else (known == 0).all()
        )
        if not hides_nothing:
            raise cx.error("an attn_mask that depends on the inputs (ix.attention takes no mask "
                           "tensor, only causal / positions / kv_lens)", True)
    q, k, v = (cx.value(a[n]) for n in ("query", "key", "value"))
    if _t(q).rank == 3:
        q, k, v = (_reshape_to(cx, t, _t(t).with_shape([_t(t).shape[0], 1, *_t(t).shape[1:]]))
                   for t in (q, k, v))
    causal = None
    if a["is_causal"]:
        if _t(q).shape[2] != _t(k).shape[2]:
            raise cx.error("is_causal with query and key lengths that differ (torch aligns the "
                           "causal mask top-left, ix.attention bottom-right)", True)
        causal = UnitAttr()
    scale = None if a["scale"] is None else float_attr(a["scale"])
    out = cx.emit(nn.AttentionOp, q, k, v, None, None, causal=causal, scale=scale)
    return _reshape_to(cx, out, cx.out_type())


# shape ops -------------------------------------------------------------------------------------


def _to_out_shape(key: str = "self") -> Lowering:
    """Ops that only regroup elements (view, reshape, squeeze, unsqueeze, flatten)."""

    def lower(cx: LowerCtx, a: Args) -> Lowered:
        return _reshape_to(cx, cx.value(a[key]), cx.out_type())

    return lower


def _expand(cx: LowerCtx, a: Args) -> Lowered:
    x, out = cx.value(a["self"]), cx.out_type()
    if _t(x).shape == out.shape:
        return x
    return cx.emit(ts.BroadcastToOp, x, result_types=[out.with_dtype(_t(x).dtype)])


def _permute(cx: LowerCtx, a: Args) -> Lowered:
    x = cx.value(a["self"])
    perm = [_axis(d, _t(x).rank) for d in a["dims"]]
    if perm == sorted(perm):
        return x
    return cx.emit(ts.TransposeOp, x, perm=ints_attr(perm))


def _transpose(cx: LowerCtx, a: Args) -> Lowered:
    x = cx.value(a["self"])
    rank = _t(x).rank
    perm = list(range(rank))
    if rank >= 2:
        d0, d1 = _axis(a.get("dim0", 0), rank), _axis(a.get("dim1", 1), rank)
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return x if perm == sorted(perm) else cx.emit(ts.TransposeOp, x, perm=ints_attr(perm))


def _bound(cx: LowerCtx, value: object, size: sy.Dim, default: sy.Dim) -> sy.Dim:
    """A slice bound as a dim in [0, size]: None -> default, negative -> from the end, clamped."""
    if value is None:
        return default
    if isinstance(value, int):
        if value >= BIG:
            return size
        if value < 0:
            value = sy.add(size, value)
        if isinstance(value, int) and isinstance(size, int):
            return min(max(value, 0), size)
        return value
    return cx.dim(value)


def _slice_dims(cx: LowerCtx, x: SSAValue, dim: int, start: sy.Dim, end: sy.Dim, step: int) -> SSAValue:
    size = _t(x).shape[dim]
    if start == 0 and end == size and step == 1:
        return x
    return cx.emit(ts.SliceOp, x, dim=int_attr(dim), start=DimAttr(start), end=DimAttr(end),
                   step=int_attr(step))


def _slice(cx: LowerCtx, a: Args) -> Lowered:
    x = cx.value(a["self"])
    dim = _axis(a["dim"], _t(x).rank)
    size = _t(x).shape[dim]
    start, end = _bound(cx, a["start"], size, 0), _bound(cx, a["end"], size, size)
    if isinstance(start, int) and isinstance(end, int):
        end = max(start, end)
    return _slice_dims(cx, x, dim, start, end, a["step"])


def _narrow(cx: LowerCtx, a: Args) -> Lowered:
    x = cx.value(a["self"])
    dim = _axis(a["dim"], _t(x).rank)
    start = _bound(cx, a["start"], _t(x).shape[dim], 0)
    return _slice_dims(cx, x, dim, start, sy.add(start, cx.dim(a["length"])), 1)


def _select(cx: LowerCtx, a: Args) -> Lowered:
    x = cx.value(a["self"])
    dim = _axis(a["dim"], _t(x).rank)
    index = _bound(cx, a["index"], _t(x).shape[dim], 0)
    return _reshape_to(cx, _slice_dims(cx, x, dim, index, sy.add(index, 1), 1), cx.out_type())


def _cat(cx: LowerCtx, a: Args) -> Lowered:
    out = cx.out_type()
    parts = [cx.value(t, out.dtype) for t in a["tensors"]]
    parts = [p for p in parts if not (_t(p).rank == 1 and _t(p).shape[0] == 0)] or parts
    if len(parts) == 1:
        return parts[0]
    return cx.emit(ts.ConcatOp, parts, dim=int_attr(_axis(a["dim"], out.rank)))


def _split(cx: LowerCtx, a: Args) -> Lowered:
    x = cx.value(a["self"])
    pieces = len(cx.node.meta["val"])  # type: ignore[union-attr]
    outs = [cx.out_type(index=i) for i in range(pieces)]
    if pieces == 1:
        return (x,)
    results = cx.emit(ts.SplitOp, x, result_types=outs, dim=int_attr(_axis(a["dim"], _t(x).rank)))
    return tuple(results)


def _unbind(cx: LowerCtx, a: Args) -> Lowered:
    x = cx.value(a["self"])
    dim = _axis(a["dim"], _t(x).rank)
    count = _t(x).shape[dim]
    if not isinstance(count, int):
        raise cx.error("unbind along a symbolic dim", True)
    return tuple(
        _reshape_to(cx, _slice_dims(cx, x, dim, i, i + 1, 1), cx.out_type(index=i)) for i in range(count)
    )


def _getitem(cx: LowerCtx, a: Args) -> Lowered:
    source, index = a["self"], a["index"]
    values = cx.values.get(source)
    if not isinstance(values, tuple):
        raise cx.error(f"'{source.name}' is not a tuple of values")
    v = values[index]
    if v is None:
        raise cx.error(f"result #{index} of '{source.name}' ({source.target}) is not supported", True)
    return v


LOWERINGS: dict[object, Lowering] = {
    # elementwise arithmetic
    aten.add.Tensor: _binary(ts.AddOp, scaled=True),
    aten.add.Scalar: _binary(ts.AddOp, scaled=True),
    aten.sub.Tensor: _binary(ts.SubOp, scaled=True),
    aten.sub.Scalar: _binary(ts.SubOp, scaled=True),
    aten.rsub.Scalar: _binary(ts.SubOp, scaled=True, swap=True),
    aten.rsub.Tensor: _binary(ts.SubOp, scaled=True, swap=True),
    aten.mul.Tensor: _binary(ts.MulOp),
    aten.mul.Scalar: _binary(ts.MulOp),
    aten.div.Tensor: _div,
    aten.div.Scalar: _div,
    aten.div.Tensor_mode: _div,
    aten.maximum.default: _binary(ts.MaxOp),
    aten.minimum.default: _binary(ts.MinOp),
    aten.pow.Tensor_Scalar: _pow,
    aten.pow.Tensor_Tensor: _pow,
    aten.clamp.default: _clamp,
    aten.neg.default: _unary(ts.NegOp),
    aten.exp.default: _unary(ts.ExpOp),
    aten.sqrt.default: _unary(ts.SqrtOp),
    aten.rsqrt.default: _unary(ts.RsqrtOp),
    aten.tanh.default: _unary(ts.TanhOp),
    aten.sigmoid.default: _unary(ts.SigmoidOp),
    aten.silu.default: _unary(ts.SiluOp),
    aten.gelu.default: _gelu,
    aten.relu.default: _relu,
    aten.reciprocal.default: _reciprocal,
    # type conversions and identities
    aten._to_copy.default: _cast,
    aten.to.dtype: _cast,
    aten.to.dtype_layout: _cast,
    aten.type_as.default: _cast,
    aten.clone.default: _identity(),
    aten.contiguous.default: _identity(),
    aten.alias.default: _identity(),
    aten.detach.default: _identity(),
    aten.lift_fresh_copy.default: _identity(),
    aten.dropout.default: _dropout,
    aten._assert_tensor_metadata.default: _nothing,
    aten._assert_scalar.default: _nothing,
    # reductions and normalizations
    aten.sum.dim_IntList: _reduce(ts.ReduceSumOp),
    aten.sum.default: _reduce(ts.ReduceSumOp),
    aten.mean.dim: _reduce(ts.ReduceMeanOp),
    aten.mean.default: _reduce(ts.ReduceMeanOp),
    aten.amax.default: _reduce(ts.ReduceMaxOp),
    aten.softmax.int: _softmax,
    aten._softmax.default: _softmax,
    aten.layer_norm.default: _layer_norm,
    aten.native_layer_norm.default: _native_layer_norm,
    aten.rms_norm.default: _rms_norm,
    # embeddings, GEMMs, attention
    aten.embedding.default: _embedding,
    aten.linear.default: _linear,
    aten.addmm.default: _addmm,
    aten.mm.default: _matmul(),
    aten.bmm.default: _matmul(),
    aten.matmul.default: _matmul("self", "other"),
    aten.scaled_dot_product_attention.default: _sdpa,
    # shape ops
    aten.view.default: _to_out_shape(),
    aten.reshape.default: _to_out_shape(),
    aten._unsafe_view.default: _to_out_shape(),
    aten.flatten.using_ints: _to_out_shape(),
    aten.unflatten.int: _to_out_shape(),
    aten.unsqueeze.default: _to_out_shape(),
    aten.squeeze.dim: _to_out_shape(),
    aten.squeeze.dims: _to_out_shape(),
    aten.squeeze.default: _to_out_shape(),
    aten.expand.default: _expand,
    aten.permute.default: _permute,
    aten.transpose.int: _transpose,
    aten.t.default: _transpose,
    aten.slice.Tensor: _slice,
    aten.narrow.default: _narrow,
    aten.select.int: _select,
    aten.cat.default: _cat,
    aten.split.Tensor: _split,
    aten.split_with_sizes.default: _split,
    aten.unbind.int: _unbind,
    operator.getitem: _getitem,
}


def bind_args(target: object, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments by schema name, with the schema's defaults filled in."""
    if target is operator.getitem:
        return {"self": args[0], "index": args[1]}
    schema = target._schema  # type: ignore[attr-defined]
    bound: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(args):
            bound[arg.name] = args[i]
        elif arg.name in kwargs:
            bound[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
    return bound


__all__ = ["LOWERINGS", "Lowering", "bind_args"]
