"""One NumPy function per `ix` op: the reference semantics every compiled kernel is tested against.

A kernel is ``kernel(op, ins, ctx) -> list of arrays``: ``ins`` are the operand values in operand
order (optional operands that are absent are simply missing; the kernel asks ``op`` which are
present), in the storage of ``numerics.STORAGE``. A kernel returns one array per result, in any
precision: the interpreter rounds each to its result type and checks its shape. Float math runs
in float64, GEMMs in float32 (BLAS, as PyTorch on CPU). ``KERNELS`` maps each op class to its
kernel; it is the only registry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.ir import Operation

from inferx.compiler.interpreter.attention import attention, kv_write, rope
from inferx.compiler.interpreter.context import InterpreterError, Kernel, KernelContext
from inferx.compiler.interpreter.numerics import STORAGE, compute, round_to
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as ts
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import get_dim, get_flag, get_float, get_int, get_ints, get_str, present_operands
from inferx.compiler.ir.quant import dequantize
from inferx.compiler.ir.types import DType, TensorType


def _result_type(op: Operation, i: int = 0) -> TensorType:
    t = op.results[i].type
    assert isinstance(t, TensorType)
    return t


def _in_dtype(op: Operation, i: int = 0) -> DType:
    t = op.operands[i].type
    assert isinstance(t, TensorType)
    return t.dtype


# sources ---------------------------------------------------------------------------------------


def weight(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    name = op.attributes["name"].data  # type: ignore[attr-defined]
    t = _result_type(op)
    if name not in ctx.weights:
        raise InterpreterError(f"ix.weight: weight '{name}' ({t}) is not in the weight store")
    w = np.asarray(ctx.weights[name])
    want = ctx.shape(t)
    if w.shape != want:
        raise InterpreterError(f"ix.weight: weight '{name}' has shape {list(w.shape)}, the IR says {t}")
    if w.dtype != STORAGE[t.dtype]:
        raise InterpreterError(
            f"ix.weight: weight '{name}' has dtype {w.dtype}, the IR says {t.dtype.value} "
            f"(stored as numpy {STORAGE[t.dtype]})"
        )
    return [w]


def constant(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    assert isinstance(op, ts.ConstantOp)
    return [np.full(ctx.shape(_result_type(op)), op.scalar)]


# elementwise -----------------------------------------------------------------------------------


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.any(b == 0):
        raise InterpreterError("ix.div: integer division by zero")
    q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
    return np.where((a < 0) != (b < 0), -q, q)  # truncates toward zero, like C and Triton


_FLOAT_BINARY: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ts.AddOp: np.add, ts.SubOp: np.subtract, ts.MulOp: np.multiply, ts.DivOp: np.divide,
    ts.MaxOp: np.maximum, ts.MinOp: np.minimum, ts.PowOp: np.power,
}
_INT_BINARY: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ts.AddOp: np.add, ts.SubOp: np.subtract, ts.MulOp: np.multiply, ts.DivOp: _int_div,
    ts.MaxOp: np.maximum, ts.MinOp: np.minimum,
}


def binary(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    """Floats in float64; integers in their storage type, wrapping (i4 saturates on rounding)."""
    a, b = ins
    if _in_dtype(op).is_float:
        with np.errstate(all="ignore"):
            return [_FLOAT_BINARY[type(op)](compute(a), compute(b))]
    if _in_dtype(op) is DType.i4:
        a, b = a.astype(np.int64), b.astype(np.int64)
    return [_INT_BINARY[type(op)](a, b)]


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x) if x.size else x


def _gelu(op: Operation, x: np.ndarray) -> np.ndarray:
    if get_str(op.attributes, "approximate", ("none", "tanh"), default="none") == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


_UNARY: dict[type, Callable[[Operation, np.ndarray], np.ndarray]] = {
    ts.ExpOp: lambda op, x: np.exp(x),
    ts.RsqrtOp: lambda op, x: 1.0 / np.sqrt(x),
    ts.SqrtOp: lambda op, x: np.sqrt(x),
    ts.SiluOp: lambda op, x: x / (1.0 + np.exp(-x)),
    ts.SigmoidOp: lambda op, x: 1.0 / (1.0 + np.exp(-x)),
    ts.TanhOp: lambda op, x: np.tanh(x),
    ts.GeluOp: _gelu,
}


def unary(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return [_UNARY[type(op)](op, compute(ins[0]))]


def neg(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    (x,) = ins
    return [-compute(x) if _in_dtype(op).is_float else -x.astype(np.int64)]


def cast(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    return [ins[0]]  # the conversion is exactly numerics.round_to into the result type


# reductions ------------------------------------------------------------------------------------


def reduce(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    (x,) = ins
    axes = tuple(sorted({d % x.ndim for d in get_ints(op.attributes, "dims")}))
    keep = get_flag(op.attributes, "keepdim")
    if _in_dtype(op).is_float:
        x = compute(x)
    if isinstance(op, ts.ReduceSumOp):
        return [np.asarray(np.sum(x, axis=axes, keepdims=keep, dtype=None if x.dtype.kind == "f" else np.int64))]
    if isinstance(op, ts.ReduceMeanOp):
        return [np.mean(x, axis=axes, keepdims=keep)]
    return [np.max(x, axis=axes, keepdims=keep)]


# shape ops -------------------------------------------------------------------------------------


def reshape(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    return [np.reshape(ins[0], ctx.shape(_result_type(op)))]


def transpose(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    return [np.transpose(ins[0], get_ints(op.attributes, "perm"))]


def concat(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    return [np.concatenate(list(ins), axis=get_int(op.attributes, "dim"))]


def split(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    (x,) = ins
    dim = get_int(op.attributes, "dim") % x.ndim
    sizes = [ctx.shape(_result_type(op, i))[dim] for i in range(len(op.results))]
    if sum(sizes) != x.shape[dim]:
        raise InterpreterError(f"ix.split: piece sizes {sizes} do not add up to {x.shape[dim]}")
    return list(np.split(x, np.cumsum(sizes)[:-1], axis=dim))


def slice_(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    (x,) = ins
    dim = get_int(op.attributes, "dim") % x.ndim
    start = sy.evaluate(get_dim(op.attributes, "start"), ctx.env)
    end = sy.evaluate(get_dim(op.attributes, "end"), ctx.env)
    step = get_int(op.attributes, "step", 1)
    if not 0 <= start <= end <= x.shape[dim]:
        raise InterpreterError(
            f"ix.slice: bounds [{start}, {end}) do not fit dim {dim} of size {x.shape[dim]}"
        )
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, end, step)
    return [x[tuple(index)]]


def broadcast_to(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    return [np.broadcast_to(ins[0], ctx.shape(_result_type(op))).copy()]


# nn --------------------------------------------------------------------------------------------


def embedding(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    table, ids = ins
    if ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
        bad = ids[(ids < 0) | (ids >= table.shape[0])].ravel()[0]
        raise InterpreterError(f"ix.embedding: id {bad} is out of range for a table of {table.shape[0]} rows")
    return [table[ids]]


def last_token(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    x, pos = ins
    idx = np.where(pos >= 0, np.arange(pos.shape[1])[None, :], 0).max(axis=1, initial=0)
    return [x[np.arange(x.shape[0]), idx][:, None]]


def _gemm_in(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def linear(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    x, w = _gemm_in(ins[0]), _gemm_in(ins[1])
    if get_str(op.attributes, "w_layout", ("nk", "kn"), default="nk") == "nk":
        w = w.T
    y = np.matmul(x, w)
    if len(ins) == 3:
        y = y + _gemm_in(ins[2])
    return [y]


def qlinear(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    """The weight dequantized in fp32 (``quant.dequantize``, codes stored as ``q - 8``), then the
    fp32 GEMM of ``linear`` (and its bias)."""
    assert isinstance(op, nn.QLinearOp)
    x, codes, scales = _gemm_in(ins[0]), ins[1], ins[2]
    extra = dict(zip(present_operands(op.properties, 3, nn.QLINEAR_OPTIONAL), ins[3:], strict=True))
    w = _dequantized(codes, scales, extra, get_int(op.attributes, "group"))
    y = np.matmul(x, w.T)
    return [y + _gemm_in(extra["bias"]) if "bias" in extra else y]


def _dequantized(codes: np.ndarray, scales: np.ndarray, extra: dict[str, np.ndarray], group: int) -> np.ndarray:
    """The fp32 weight [N, K] of int4 ``codes`` (stored as ``q - 8``), with the minimums and column
    scale ``extra`` holds."""
    mins = extra.get("mins")
    return dequantize(
        (codes.astype(np.int16) + 8).astype(np.uint8),
        _gemm_in(scales),
        None if mins is None else _gemm_in(mins),
        group,
        None if "col_scale" not in extra else _gemm_in(extra["col_scale"]),
    )


def dequantize_op(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    """The weight as ``qlinear`` makes it, times the norm's weight, rounded to the result's dtype
    and written over the start of ``into`` (or zeros)."""
    assert isinstance(op, nn.DequantizeOp)
    extra = dict(zip(present_operands(op.properties, 2, nn.DEQUANTIZE_OPTIONAL), ins[2:], strict=True))
    w = _dequantized(ins[0], ins[1], extra, get_int(op.attributes, "group"))
    if "norm_weight" in extra:
        w = w * _gemm_in(extra["norm_weight"])[None, :]
    out_t = op.result.type
    assert isinstance(out_t, TensorType)
    (size,) = out_t.shape
    assert isinstance(size, int)
    out = np.array(extra["into"]) if "into" in extra else np.zeros(size, dtype=w.dtype)
    out = out.astype(np.float32)
    out[: w.size] = w.reshape(-1)
    return [round_to(out, out_t.dtype)]


def fp8_linear(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    """x quantized to E4M3 per token, the E4M3 products summed in fp32 and scaled
    (``fp8.fp8_matmul``), then the bias."""
    from inferx.compiler.ir.fp8 import fp8_matmul  # ir.fp8 rounds with this package's numerics

    assert isinstance(op, nn.Fp8LinearOp)
    present = (("bias", op.bias), ("x_scale", op.x_scale), ("row_scales", op.row_scales), ("given", op.given),
               ("given_scales", op.given_scales))
    extra = dict(zip([n for n, v in present if v is not None], ins[3:], strict=True))  # given: x's own values
    x_scale = float(np.asarray(extra["x_scale"]).reshape(-1)[0]) if "x_scale" in extra else None
    if "row_scales" in extra:  # x already E4M3 values, a scale a row
        acc = np.matmul(np.asarray(ins[0], dtype=np.float32), np.asarray(ins[1], dtype=np.float32).T)
        rs = np.asarray(extra["row_scales"], dtype=np.float32)[..., None]
        y = (acc * rs * np.asarray(ins[2], dtype=np.float32)).astype(np.float32)
    else:
        y = fp8_matmul(_gemm_in(ins[0]), ins[1], ins[2], x_scale)
    return [y + _gemm_in(extra["bias"]) if "bias" in extra else y]


def fp8_quantize(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    """x's rows as E4M3 values and their scales (``fp8.quantize_rows``; static: ``quantize_static``)."""
    from inferx.compiler.ir.fp8 import quantize_rows, quantize_static

    x = np.asarray(_gemm_in(ins[0]), dtype=np.float32)
    if len(ins) > 1:
        xs = float(np.asarray(ins[1]).reshape(-1)[0])
        return [quantize_static(x, xs), np.full(x.shape[:-1], xs, dtype=np.float32)]
    return list(quantize_rows(x))


def matmul(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    return [np.matmul(_gemm_in(ins[0]), _gemm_in(ins[1]))]


def softmax(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    x = compute(ins[0])
    dim = get_int(op.attributes, "dim")
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.max(x, axis=dim, keepdims=True))
        return [e / np.sum(e, axis=dim, keepdims=True)]


def rmsnorm(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    x, w = compute(ins[0]), compute(ins[1])
    eps = get_float(op.attributes, "eps")
    return [x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w]


def sum_squares(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    x = compute(ins[0])
    return [np.sum(x * x, axis=-1)]


def rmsnorm_ss(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    x, w, ss = (compute(v) for v in ins)
    eps = get_float(op.attributes, "eps")
    return [x / np.sqrt(ss[..., None] / x.shape[-1] + eps) * w]


def layernorm(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
    assert isinstance(op, nn.LayerNormOp)
    x = compute(ins[0])
    eps = get_float(op.attributes, "eps")
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    rest = list(ins[1:])
    if op.weight is not None:
        y = y * compute(rest.pop(0))
    if op.bias is not None:
        y = y + compute(rest.pop(0))
    return [y]


KERNELS: dict[type[Operation], Kernel] = {
    ts.WeightOp: weight,
    ts.ConstantOp: constant,
    ts.AddOp: binary,
    ts.SubOp: binary,
    ts.MulOp: binary,
    ts.DivOp: binary,
    ts.MaxOp: binary,
    ts.MinOp: binary,
    ts.PowOp: binary,
    ts.NegOp: neg,
    ts.ExpOp: unary,
    ts.RsqrtOp: unary,
    ts.SqrtOp: unary,
    ts.SiluOp: unary,
    ts.SigmoidOp: unary,
    ts.TanhOp: unary,
    ts.GeluOp: unary,
    ts.CastOp: cast,
    ts.ReduceSumOp: reduce,
    ts.ReduceMeanOp: reduce,
    ts.ReduceMaxOp: reduce,
    ts.ReshapeOp: reshape,
    ts.TransposeOp: transpose,
    ts.ConcatOp: concat,
    ts.SplitOp: split,
    ts.SliceOp: slice_,
    ts.BroadcastToOp: broadcast_to,
    nn.EmbeddingOp: embedding,
    nn.LastTokenOp: last_token,
    nn.LinearOp: linear,
    nn.QLinearOp: qlinear,
    nn.DequantizeOp: dequantize_op,
    nn.Fp8QuantizeOp: fp8_quantize,
    nn.Fp8LinearOp: fp8_linear,
    nn.MatmulOp: matmul,
    nn.SoftmaxOp: softmax,
    nn.RMSNormOp: rmsnorm,
    nn.RMSNormSumSquaresOp: rmsnorm_ss,
    nn.SumSquaresOp: sum_squares,
    nn.LayerNormOp: layernorm,
    nn.RopeOp: rope,
    nn.AttentionOp: attention,
    nn.KVWriteOp: kv_write,
}
