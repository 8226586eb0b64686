"""An OpInfo-style table of samples for every `ix` op, each with an independent PyTorch reference.

A ``Sample`` is a tiny one-func module built programmatically (argument types may use the symbols
``batch``, ``seq``, ``ctx``, bound to different sizes across samples), its seeded random inputs
and weights, and a reference that computes the expected results in fp32 PyTorch from the same
inputs. The harness in ``test_interpreter_ops.py`` rounds the reference to each result's dtype and
compares within the sample's tolerance. The nn ops' samples are in ``opinfo_nn.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from xdsl.dialects.builtin import FunctionType, IntegerAttr, ModuleOp, StringAttr, UnitAttr, i64
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as ts
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import float_attr, int_attr, ints_attr
from inferx.compiler.ir.textio import verify_module
from inferx.compiler.ir.types import DimAttr, DType, TensorType

Spec = Sequence[int | str | sy.Dim]


@dataclass(frozen=True)
class Tol:
    atol: float
    rtol: float


# Tolerances by result dtype: fp32 vs fp32 PyTorch; f16/bf16 allow ~2 ulp of the narrow type
# (the interpreter rounds once from float64, PyTorch from float32); casts and ints are exact.
TOL = {
    DType.f32: Tol(1e-5, 1e-5),
    DType.f16: Tol(2e-3, 2e-3),
    DType.bf16: Tol(1.6e-2, 1.6e-2),
    DType.f8e4m3: Tol(0.0, 0.0),
}
EXACT = Tol(0.0, 0.0)


def T(spec: Spec, dtype: str | DType = "f32") -> TensorType:
    """A tensor type from dims given as ints, symbol names or dim expressions."""
    return TensorType([sy.sym(d) if isinstance(d, str) else d for d in spec], dtype)


class Builder:
    """Collects ops for a func body: ``b(OpClass, *operands, result_types=..., **attrs)``."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def __call__(self, cls, *operands, result_types=None, **attrs):
        op = cls.make(*operands, result_types=result_types, **attrs)
        self.ops.append(op)
        return op.results[0] if len(op.results) == 1 else list(op.results)


@dataclass
class Sample:
    """One op application: args are (type, value); ``reference(*args, *weights)`` -> outputs."""

    id: str
    seed: int
    args: list[tuple[TensorType, np.ndarray]]
    body: Callable[[Builder, list[SSAValue]], list[SSAValue]]
    reference: Callable[..., list[torch.Tensor]]
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    tol: Tol | None = None  # None: by result dtype (TOL)

    def module(self) -> ModuleOp:
        block = Block(arg_types=[t for t, _ in self.args])
        b = Builder()
        results = self.body(b, list(block.args))
        block.add_ops([*b.ops, ReturnOp(*results)])
        ftype = FunctionType.from_lists([t for t, _ in self.args], [r.type for r in results])
        module = ModuleOp([FuncOp("f", ftype, Region(block))])
        verify_module(module)
        return module

    def shapes(self) -> str:
        return ", ".join(f"{t} = {list(x.shape)}" for t, x in self.args)


# random data ------------------------------------------------------------------------------------


def rand(
    rng: np.random.Generator,
    shape: Sequence[int],
    dtype: str = "f32",
    scale: float = 1.0,
    low: float | None = None,
) -> np.ndarray:
    """Seeded values, never all zeros, already representable in ``dtype`` (in its numpy storage)."""
    if dtype in ("i32", "i64", "i8"):
        return np.asarray(rng.integers(-50, 50, size=shape)).astype(
            {"i32": np.int32, "i64": np.int64, "i8": np.int8}[dtype]
        )
    x = np.asarray(rng.standard_normal(shape) * scale)
    if low is not None:
        x = np.abs(x) + low
    t = torch.from_numpy(x.astype(np.float32))
    if dtype == "f16":
        return t.half().numpy()
    if dtype == "bf16":
        return t.bfloat16().float().numpy()
    return t.numpy()


def tt(x: np.ndarray) -> torch.Tensor:
    """The torch reference's view of an input: floats as fp32, integers as they are."""
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32) if x.dtype.kind == "f" else x.copy())


# sizes for (batch, seq): odd and edge sizes, different per sample
BS = [(1, 1), (2, 7), (1, 129), (3, 5), (2, 1), (1, 7), (4, 3), (2, 2), (1, 33), (3, 7), (2, 9), (5, 1)]
HIDDEN = [1, 7, 16, 129, 8, 3, 32, 5, 12, 64, 7, 4]


def unit() -> UnitAttr:
    return UnitAttr()


def s(text: str) -> StringAttr:
    return StringAttr(text)


# elementwise ----------------------------------------------------------------------------------


BINARY_TORCH = {
    ts.AddOp: torch.add,
    ts.SubOp: torch.sub,
    ts.MulOp: torch.mul,
    ts.DivOp: torch.div,
    ts.MaxOp: torch.maximum,
    ts.MinOp: torch.minimum,
    ts.PowOp: torch.pow,
}


def binary_samples(cls: type) -> list[Sample]:
    out = []
    # (lhs spec, rhs spec, dtype) with concrete sizes from BS/HIDDEN
    for i in range(12):
        rng = np.random.default_rng(1000 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        dtype = ["f32", "f32", "f32", "f16", "f32", "bf16", "f32", "i32", "f32", "f32", "i32", "f32"][i]
        if cls is ts.PowOp and dtype == "i32":
            dtype = "f32"
        shapes = [
            (("batch", "seq", h), ("batch", "seq", h)),
            (("batch", "seq", h), (h,)),
            (("batch", 1, h), ("batch", "seq", 1)),
            (("batch", "seq"), ()),
            ((h,), ("batch", "seq", h)),
        ][i % 5]
        env = {"batch": bb, "seq": ss}
        cshape = [[env.get(d, d) if isinstance(d, str) else d for d in sp] for sp in shapes]
        low = 0.1 if cls in (ts.PowOp,) else None
        a = rand(rng, cshape[0], dtype, low=low)
        b = rand(rng, cshape[1], dtype, scale=0.5 if cls is ts.PowOp else 1.0)
        if cls is ts.DivOp and dtype == "i32":
            b = np.where(b == 0, 3, b).astype(np.int32)

        def ref(x, y, cls=cls, dtype=dtype):
            if cls is ts.DivOp and dtype == "i32":
                return [torch.div(x, y, rounding_mode="trunc")]
            return [BINARY_TORCH[cls](x, y)]

        out.append(
            Sample(
                f"{cls.name}-{i}-{dtype}",
                1000 + i,
                [(T(shapes[0], dtype), a), (T(shapes[1], dtype), b)],
                lambda bld, args, cls=cls: [bld(cls, args[0], args[1])],
                ref,
            )
        )
    return out


UNARY_TORCH = {
    ts.NegOp: torch.neg,
    ts.ExpOp: torch.exp,
    ts.RsqrtOp: torch.rsqrt,
    ts.SqrtOp: torch.sqrt,
    ts.SiluOp: torch.nn.functional.silu,
    ts.SigmoidOp: torch.sigmoid,
    ts.TanhOp: torch.tanh,
}


def unary_samples(cls: type) -> list[Sample]:
    out = []
    for i in range(11):
        rng = np.random.default_rng(2000 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        dtype = ["f32", "f32", "f16", "f32", "bf16", "f32", "f32", "f32", "f16", "f32", "f32"][i]
        if cls is ts.NegOp and i in (6, 7):
            dtype = "i32"
        low = 0.05 if cls in (ts.RsqrtOp, ts.SqrtOp) else None
        x = rand(rng, (bb, ss, h), dtype, scale=3.0, low=low)
        attrs = {}
        if cls is ts.GeluOp:
            approx = ["none", "tanh"][i % 2]
            attrs = {"approximate": s(approx)} if i % 4 else {}
            approx = approx if i % 4 else "none"

            def ref(x, approx=approx):
                return [torch.nn.functional.gelu(x, approximate=approx)]
        else:

            def ref(x, cls=cls):
                return [UNARY_TORCH[cls](x)]

        spec = ("batch", "seq", h) if i % 3 else (bb, "seq", h)
        out.append(
            Sample(
                f"{cls.name}-{i}-{dtype}",
                2000 + i,
                [(T(spec, dtype), x)],
                lambda bld, args, cls=cls, attrs=attrs: [bld(cls, args[0], **attrs)],
                ref,
            )
        )
    return out


TORCH_DTYPE = {
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f8e4m3": torch.float8_e4m3fn,
    "i8": torch.int8,
    "i32": torch.int32,
    "i64": torch.int64,
    "bool": torch.bool,
}


def cast_samples() -> list[Sample]:
    pairs = [
        ("f32", "f16"),
        ("f32", "bf16"),
        ("f32", "f8e4m3"),
        ("f32", "i32"),
        ("f16", "f32"),
        ("i32", "f32"),
        ("f32", "bool"),
        ("i32", "i8"),
        ("bf16", "f32"),
        ("f32", "i4"),
        ("i64", "i32"),
        ("f16", "bf16"),
    ]
    out = []
    for i, (src, dst) in enumerate(pairs):
        rng = np.random.default_rng(3000 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        x = rand(rng, (bb, ss, h), src, scale=20.0)
        if src == "i32" and dst == "i8":
            x = (x * 7).astype(np.int32)  # exercises wrapping

        def ref(x, src=src, dst=dst):
            if dst == "i4":
                return [torch.trunc(x).clamp(-8, 7).to(torch.int8)]
            if dst in ("i32", "i8") and x.is_floating_point():
                return [torch.trunc(x).to(TORCH_DTYPE[dst])]
            if dst == "bool":
                return [x != 0]
            return [x.to(TORCH_DTYPE[dst])]

        out.append(
            Sample(
                f"ix.cast-{i}-{src}-{dst}",
                3000 + i,
                [(T(("batch", "seq", h), src), x)],
                lambda bld, args, dst=dst: [
                    bld(ts.CastOp, args[0], result_types=[args[0].type.with_dtype(DType(dst))])
                ],
                ref,
                tol=EXACT,
            )
        )
    return out


def reduce_samples(cls: type) -> list[Sample]:
    out = []
    for i in range(11):
        rng = np.random.default_rng(4000 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        dtype = "i32" if cls is not ts.ReduceMeanOp and i in (3, 8) else ("f16" if i == 5 else "f32")
        dims = [(-1,), (1,), (0, 2), (2,), (1, 2), (0,), (-1, 0), (1,), (2,), (0, 1, 2), (-2,)][i]
        keep = i % 2 == 1
        x = rand(rng, (bb, ss, h), dtype)
        attrs = {"dims": ints_attr(dims), "keepdim": unit() if keep else None}

        def ref(x, cls=cls, dims=dims, keep=keep):
            if cls is ts.ReduceSumOp:
                return [torch.sum(x, dim=dims, keepdim=keep)]
            if cls is ts.ReduceMeanOp:
                return [torch.mean(x, dim=dims, keepdim=keep)]
            return [torch.amax(x, dim=dims, keepdim=keep)]

        out.append(
            Sample(
                f"{cls.name}-{i}-{dtype}-dims{'_'.join(map(str, dims))}",
                4000 + i,
                [(T(("batch", "seq", h), dtype), x)],
                lambda bld, args, cls=cls, attrs=attrs: [bld(cls, args[0], **attrs)],
                ref,
            )
        )
    return out


# sources and shape ops -------------------------------------------------------------------------


def constant_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(5000 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        dtype = ["f32", "f16", "i32", "bf16", "f32", "i64", "f32", "i8", "f32", "f8e4m3"][i]
        value = (
            float(np.round(rng.standard_normal() * 10, 3))
            if DType(dtype).is_float
            else int(rng.integers(-9, 9))
        )
        attr = float_attr(value) if isinstance(value, float) else IntegerAttr(value, i64)
        x = rand(rng, (bb, ss), "f32")

        def ref(x, value=value, h=h, dtype=dtype):
            return [torch.full((*x.shape, h), value, dtype=torch.float64).to(TORCH_DTYPE[dtype])]

        out.append(
            Sample(
                f"ix.constant-{i}-{dtype}",
                5000 + i,
                [(T(("batch", "seq")), x)],
                lambda bld, args, h=h, dtype=dtype, attr=attr: [
                    bld(ts.ConstantOp, result_types=[T(("batch", "seq", h), dtype)], value=attr)
                ],
                ref,
            )
        )
    return out


def weight_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(5100 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        dtype = ["f32", "f16", "bf16", "f32", "i32", "f32", "f16", "f32", "i8", "f32"][i]
        w = rand(rng, (ss, h), dtype)
        x = rand(rng, (bb, ss, h), dtype)

        def body(bld, args, w=w, dtype=dtype, name=f"layers.{i}.w"):
            wv = bld(ts.WeightOp, result_types=[T(w.shape, dtype)], name=s(name))
            return [wv, bld(ts.AddOp, args[0], wv)]

        out.append(
            Sample(
                f"ix.weight-{i}-{dtype}",
                5100 + i,
                [(T(("batch", ss, h), dtype), x)],
                body,
                lambda x, w: [w, x + w],
                weights={f"layers.{i}.w": w},
            )
        )
    return out


def reshape_samples() -> list[Sample]:
    out = []
    b_, s_ = sy.sym("batch"), sy.sym("seq")
    for i in range(10):
        rng = np.random.default_rng(5200 + i)
        (bb, ss) = BS[i]
        h = [12, 8, 6, 4, 12, 16, 6, 2, 12, 8][i]
        src = ("batch", "seq", h)
        dst = [
            (b_, s_, 3, h // 3),
            (sy.mul(b_, s_), h),
            (b_, sy.mul(s_, h)),
            (sy.mul(sy.mul(b_, s_), h),),
            (b_, s_, 2, 2, 3),
            (b_, 1, s_, h),
            (sy.mul(b_, s_), 2, 3),
            (b_, s_, 2, 1),
            (b_, s_, 4, 3),
            (sy.mul(b_, s_), 2, 4),
        ][i]
        x = rand(rng, (bb, ss, h))
        env = {"batch": bb, "seq": ss}
        cdst = tuple(sy.evaluate(d, env) for d in dst)
        out.append(
            Sample(
                f"ix.reshape-{i}",
                5200 + i,
                [(T(src), x)],
                lambda bld, args, dst=dst: [bld(ts.ReshapeOp, args[0], result_types=[T(dst)])],
                lambda x, cdst=cdst: [x.reshape(cdst)],
                tol=EXACT,
            )
        )
    return out


def transpose_samples() -> list[Sample]:
    out = []
    perms = [
        (0, 2, 1, 3),
        (1, 0, 2, 3),
        (3, 2, 1, 0),
        (0, 1, 3, 2),
        (2, 0, 3, 1),
        (0, 2, 1, 3),
        (1, 2, 3, 0),
        (0, 1, 2, 3),
        (3, 0, 1, 2),
        (2, 3, 0, 1),
    ]
    for i, perm in enumerate(perms):
        rng = np.random.default_rng(5300 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        x = rand(rng, (bb, ss, 3, h), "f16" if i == 4 else "f32")
        dt = "f16" if i == 4 else "f32"
        out.append(
            Sample(
                f"ix.transpose-{i}",
                5300 + i,
                [(T(("batch", "seq", 3, h), dt), x)],
                lambda bld, args, perm=perm: [bld(ts.TransposeOp, args[0], perm=ints_attr(perm))],
                lambda x, perm=perm: [x.permute(perm)],
                tol=EXACT,
            )
        )
    return out


def concat_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(5400 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        tt_ = 1 + i % 4
        dim = [1, -1, 0, 1, 2, 1, -1, 0, 1, 2][i]
        specs = {
            1: [("batch", "seq", h), ("batch", "ctx", h)],
            2: [("batch", "seq", h), ("batch", "seq", 3)],
            0: [("batch", "seq", h), (2, "seq", h)],
        }[dim % 3]
        if i % 2:
            specs = [*specs, specs[0]]
        env = {"batch": bb, "seq": ss, "ctx": tt_}
        xs = [rand(rng, [env.get(d, d) if isinstance(d, str) else d for d in sp]) for sp in specs]
        out.append(
            Sample(
                f"ix.concat-{i}-dim{dim}",
                5400 + i,
                [(T(sp), x) for sp, x in zip(specs, xs, strict=True)],
                lambda bld, args, dim=dim: [bld(ts.ConcatOp, list(args), dim=int_attr(dim))],
                lambda *xs, dim=dim: [torch.cat(xs, dim=dim)],
                tol=EXACT,
            )
        )
    return out


def split_samples() -> list[Sample]:
    out = []
    s_ = sy.sym("seq")
    for i in range(10):
        rng = np.random.default_rng(5500 + i)
        (bb, ss) = BS[i]
        h = [12, 8, 6, 4, 12, 16, 6, 2, 12, 9][i]
        if i % 3 == 2:  # along the symbolic seq dim: [seq - 1] + [1]
            dim, pieces = 1, [sy.sub(s_, 1), 1]
            ss = max(ss, 2)
        else:
            dim, pieces = (
                2,
                [[h // 2, h - h // 2], [1, h - 1], [h // 3, h // 3, h - 2 * (h // 3)]][
                    i % 3 if i % 3 < 2 else 2
                ],
            )
        x = rand(rng, (bb, ss, h))
        results = []
        for p in pieces:
            spec: list = ["batch", "seq", h]
            spec[dim] = p
            results.append(T(spec))
        sizes = [sy.evaluate(p, {"seq": ss}) for p in pieces]
        out.append(
            Sample(
                f"ix.split-{i}-dim{dim}",
                5500 + i,
                [(T(("batch", "seq", h)), x)],
                lambda bld, args, dim=dim, results=results: list(
                    _as_list(bld(ts.SplitOp, args[0], result_types=results, dim=int_attr(dim)))
                ),
                lambda x, dim=dim, sizes=sizes: list(torch.split(x, sizes, dim=dim)),
                tol=EXACT,
            )
        )
    return out


def _as_list(v) -> list:
    return v if isinstance(v, list) else [v]


def slice_samples() -> list[Sample]:
    out = []
    s_ = sy.sym("seq")
    cases = [
        (sy.sub(s_, 1), s_, 1),
        (0, s_, 1),
        (0, s_, 2),
        (1, s_, 1),
        (0, 1, 1),
        (sy.sub(s_, 1), s_, 3),
        (0, sy.sub(s_, 1), 1),
        (1, s_, 2),
        (0, s_, 5),
        (sy.sub(s_, 1), s_, 2),
    ]
    for i, (start, end, step) in enumerate(cases):
        rng = np.random.default_rng(5600 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        ss = max(ss, 2)
        x = rand(rng, (bb, 4, ss, h))
        env = {"seq": ss}
        a, e = sy.evaluate(start, env), sy.evaluate(end, env)
        attrs = {
            "dim": int_attr(2),
            "start": DimAttr(start),
            "end": DimAttr(end),
            "step": int_attr(step) if step != 1 else None,
        }
        out.append(
            Sample(
                f"ix.slice-{i}",
                5600 + i,
                [(T(("batch", 4, "seq", h)), x)],
                lambda bld, args, attrs=attrs: [bld(ts.SliceOp, args[0], **attrs)],
                lambda x, a=a, e=e, step=step: [x[:, :, a:e:step]],
                tol=EXACT,
            )
        )
    return out


def broadcast_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(5700 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        src, dst = [
            ((1, "seq", 1), ("batch", "seq", h)),
            ((h,), ("batch", "seq", h)),
            (("seq", 1), ("batch", "seq", h)),
            ((), ("batch", h)),
            (("batch", 1, h), ("batch", "seq", h)),
        ][i % 5]
        env = {"batch": bb, "seq": ss}
        x = rand(rng, [env.get(d, d) if isinstance(d, str) else d for d in src], "bf16" if i == 7 else "f32")
        dt = "bf16" if i == 7 else "f32"
        cdst = [env.get(d, d) if isinstance(d, str) else d for d in dst]
        sizes = rand(rng, (bb, ss))  # binds batch and seq where the input alone does not
        out.append(
            Sample(
                f"ix.broadcast_to-{i}",
                5700 + i,
                [(T(src, dt), x), (T(("batch", "seq")), sizes)],
                lambda bld, args, dst=dst, dt=dt: [bld(ts.BroadcastToOp, args[0], result_types=[T(dst, dt)])],
                lambda x, _, cdst=cdst: [x.expand(cdst)],
                tol=EXACT,
            )
        )
    return out


def all_samples() -> dict[type, list[Sample]]:
    """Every ix op class mapped to its samples."""
    import opinfo_nn as n  # imports this module

    table: dict[type, list[Sample]] = {}
    for cls in BINARY_TORCH:
        table[cls] = binary_samples(cls)
    for cls in [*UNARY_TORCH, ts.GeluOp]:
        table[cls] = unary_samples(cls)
    for cls in (ts.ReduceSumOp, ts.ReduceMeanOp, ts.ReduceMaxOp):
        table[cls] = reduce_samples(cls)
    table.update(
        {
            ts.CastOp: cast_samples(),
            ts.ConstantOp: constant_samples(),
            ts.WeightOp: weight_samples(),
            ts.ReshapeOp: reshape_samples(),
            ts.TransposeOp: transpose_samples(),
            ts.ConcatOp: concat_samples(),
            ts.SplitOp: split_samples(),
            ts.SliceOp: slice_samples(),
            ts.BroadcastToOp: broadcast_samples(),
            nn.EmbeddingOp: n.embedding_samples(),
            nn.LastTokenOp: n.last_token_samples(),
            nn.LinearOp: n.linear_samples(),
            nn.QLinearOp: n.qlinear_samples(),
            nn.DequantizeOp: n.dequantize_samples(),
            nn.Fp8LinearOp: n.fp8_linear_samples(),
            nn.Fp8QuantizeOp: n.fp8_quantize_samples(),
            nn.MatmulOp: n.matmul_samples(),
            nn.SoftmaxOp: n.softmax_samples(),
            nn.RMSNormOp: n.rmsnorm_samples(),
            nn.SumSquaresOp: n.sum_squares_samples(),
            nn.RMSNormSumSquaresOp: n.rmsnorm_ss_samples(),
            nn.LayerNormOp: n.layernorm_samples(),
            nn.RopeOp: n.rope_samples(),
            nn.AttentionOp: n.attention_samples(),
            nn.KVWriteOp: n.kv_write_samples(),
        }
    )
    return table
