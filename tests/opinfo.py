"""An OpInfo-style table of samples for every `ix` op, each with an independent PyTorch reference.

A ``Sample`` is a tiny one-func module built programmatically (argument types may use the symbols
``batch``, ``seq``, ``ctx``, bound to different sizes across samples), its seeded random inputs
and weights, and a reference that computes the expected results in fp32 PyTorch from the same
inputs. The harness in ``test_interpreter_ops.py`` rounds the reference to each result's dtype and
compares within the sample's tolerance.
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


# nn ops ----------------------------------------------------------------------------------------

F = torch.nn.functional


def embedding_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(6000 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        vocab = [1, 7, 129, 50, 3, 9, 200, 2, 17, 31][i]
        idt = "i64" if i % 3 == 0 else "i32"
        table = rand(rng, (vocab, h), "f16" if i == 4 else "f32")
        ids = rng.integers(0, vocab, size=(bb, ss)).astype(np.int64 if idt == "i64" else np.int32)
        dt = "f16" if i == 4 else "f32"
        out.append(
            Sample(
                f"ix.embedding-{i}",
                6000 + i,
                [(T((vocab, h), dt), table), (T(("batch", "seq"), idt), ids)],
                lambda bld, args: [bld(nn.EmbeddingOp, args[0], args[1])],
                lambda t, ids: [F.embedding(ids.long(), t)],
                tol=EXACT,
            )
        )
    return out


def linear_samples() -> list[Sample]:
    out = []
    for i in range(12):
        rng = np.random.default_rng(6100 + i)
        (bb, ss) = BS[i]
        k = [1, 7, 129, 16, 7, 33, 8, 129, 3, 64, 5, 12][i]
        n = [3, 129, 7, 1, 16, 8, 33, 5, 129, 2, 7, 9][i]
        layout = "kn" if i % 3 == 1 else "nk"
        has_bias = i % 2 == 0
        dt = {5: "f16", 9: "bf16"}.get(i, "f32")
        x = rand(rng, (bb, ss, k), dt)
        w = rand(rng, (n, k) if layout == "nk" else (k, n), dt, scale=k**-0.5)
        bias = rand(rng, (n,), dt)
        weights = {"w": w, **({"b": bias} if has_bias else {})}

        def body(bld, args, w=w, bias=bias, dt=dt, layout=layout, has_bias=has_bias):
            wv = bld(ts.WeightOp, result_types=[T(w.shape, dt)], name=s("w"))
            bv = bld(ts.WeightOp, result_types=[T(bias.shape, dt)], name=s("b")) if has_bias else None
            return [bld(nn.LinearOp, args[0], wv, bv, w_layout=s(layout) if layout == "kn" else None)]

        def ref(x, w, b=None, layout=layout):
            return [F.linear(x, w if layout == "nk" else w.T, b)]

        out.append(
            Sample(
                f"ix.linear-{i}-{layout}-{'bias' if has_bias else 'nobias'}-{dt}",
                6100 + i,
                [(T(("batch", "seq", k), dt), x)],
                body,
                ref,
                weights=weights,
            )
        )
    return out


def matmul_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(6200 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        n = [3, 7, 1, 129, 5, 2, 8, 4, 6, 9][i]
        a_spec, b_spec = [
            (("batch", 2, "seq", h), ("batch", 2, h, n)),
            (("batch", "seq", h), (h, n)),
            (("batch", 1, "seq", h), (1, 3, h, n)),
            (("seq", h), (h, "seq")),
            (("batch", "seq", h), ("batch", h, n)),
        ][i % 5]
        env = {"batch": bb, "seq": ss}
        dt = "f16" if i == 6 else "f32"
        a = rand(rng, [env.get(d, d) if isinstance(d, str) else d for d in a_spec], dt)
        b = rand(rng, [env.get(d, d) if isinstance(d, str) else d for d in b_spec], dt)
        out.append(
            Sample(
                f"ix.matmul-{i}",
                6200 + i,
                [(T(a_spec, dt), a), (T(b_spec, dt), b)],
                lambda bld, args: [bld(nn.MatmulOp, args[0], args[1])],
                lambda a, b: [torch.matmul(a, b)],
            )
        )
    return out


def softmax_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(6300 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        dim = [-1, 1, 0, 2, -1, -2, 2, 1, -1, 0][i]
        dt = {3: "f16", 7: "bf16"}.get(i, "f32")
        x = rand(rng, (bb, ss, h), dt, scale=4.0)
        out.append(
            Sample(
                f"ix.softmax-{i}-dim{dim}-{dt}",
                6300 + i,
                [(T(("batch", "seq", h), dt), x)],
                lambda bld, args, dim=dim: [bld(nn.SoftmaxOp, args[0], dim=int_attr(dim))],
                lambda x, dim=dim: [torch.softmax(x, dim=dim)],
            )
        )
    return out


def _rms_case(i: int, seed: int) -> tuple:  # type: ignore[type-arg]
    """Case ``i`` of the RMSNorm samples: batch, seq, hidden, eps, dtype, x, weight."""
    rng = np.random.default_rng(seed + i)
    (bb, ss), h = BS[i], HIDDEN[i]
    eps = [1e-6, 1e-5, 1e-6, 0.1, 1e-6, 1e-5, 1e-6, 1e-6, 1e-3, 1e-6][i]
    dt = {2: "f16", 6: "bf16"}.get(i, "f32")
    return bb, ss, h, eps, dt, rand(rng, (bb, ss, h), dt, scale=2.0), rand(rng, (h,), dt)


def rmsnorm_samples() -> list[Sample]:
    out = []
    for i in range(10):
        bb, ss, h, eps, dt, x, w = _rms_case(i, 6400)
        out.append(
            Sample(
                f"ix.rmsnorm-{i}-{dt}",
                6400 + i,
                [(T(("batch", "seq", h), dt), x), (T((h,), dt), w)],
                lambda bld, args, eps=eps: [bld(nn.RMSNormOp, args[0], args[1], eps=float_attr(eps))],
                lambda x, w, eps=eps: [F.rms_norm(x, (x.shape[-1],), w, eps)],
            )
        )
    return out


def sum_squares_samples() -> list[Sample]:
    out = []
    for i in range(10):
        _, _, h, _, dt, x, _ = _rms_case(i, 6450)  # the RMSNorm samples' inputs, drawn from other seeds
        out.append(
            Sample(
                f"ix.sum_squares-{i}-{dt}",
                6450 + i,
                [(T(("batch", "seq", h), dt), x)],
                lambda bld, args: [bld(nn.SumSquaresOp, args[0])],
                lambda x: [x.double().square().sum(-1).float()],
            )
        )
    return out


def rmsnorm_ss_samples() -> list[Sample]:
    """RMSNorm with statistics given: those of x (as an ``ix.sum_squares`` of it would give)."""
    out = []
    for i in range(10):
        bb, ss, h, eps, dt, x, w = _rms_case(i, 6470)
        sq = np.square(np.asarray(x, dtype=np.float64)).sum(-1).astype(np.float32)
        out.append(
            Sample(
                f"ix.rmsnorm_ss-{i}-{dt}",
                6470 + i,
                [(T(("batch", "seq", h), dt), x), (T((h,), dt), w), (T(("batch", "seq"), "f32"), sq)],
                lambda bld, args, eps=eps: [bld(nn.RMSNormSumSquaresOp, args[0], args[1], args[2],
                                                eps=float_attr(eps))],
                lambda x, w, sq, eps=eps: [F.rms_norm(x, (x.shape[-1],), w, eps)],
            )
        )
    return out


def layernorm_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(6500 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        h = max(h, 2)
        has_w, has_b = i % 4 in (0, 1), i % 4 in (0, 2)
        dt = "f16" if i == 5 else "f32"
        x = rand(rng, (bb, ss, h), dt, scale=2.0)
        args = [(T(("batch", "seq", h), dt), x)]
        if has_w:
            args.append((T((h,), dt), rand(rng, (h,), dt)))
        if has_b:
            args.append((T((h,), dt), rand(rng, (h,), dt)))

        def body(bld, a, has_w=has_w, has_b=has_b):
            w = a[1] if has_w else None
            b = a[1 + has_w] if has_b else None
            return [bld(nn.LayerNormOp, a[0], w, b, eps=float_attr(1e-5))]

        def ref(x, *p, has_w=has_w, has_b=has_b):
            w = p[0] if has_w else None
            b = p[int(has_w)] if has_b else None
            return [F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)]

        out.append(
            Sample(
                f"ix.layernorm-{i}-{'w' if has_w else ''}{'b' if has_b else ''}", 6500 + i, args, body, ref
            )
        )
    return out


def _ref_inv_freq(rot: int, theta: float, scaling: str, p: dict, max_pos: int) -> torch.Tensor:
    """HF transformers' rope init functions (default, linear, dynamic, llama3), in float64."""
    ar = torch.arange(0, rot, 2, dtype=torch.int64).double() / rot
    if scaling == "dynamic":
        orig, factor = p["original_max_position"], p["factor"]
        seq_len = max(max_pos + 1, orig)
        theta = theta * ((factor * seq_len / orig) - (factor - 1)) ** (rot / (rot - 2))
    inv = 1.0 / (theta**ar)
    if scaling == "linear":
        inv = inv / p["factor"]
    if scaling == "llama3":
        factor, low, high, old = (
            p["factor"],
            p["low_freq_factor"],
            p["high_freq_factor"],
            p["original_max_position"],
        )
        wavelen = 2 * torch.pi / inv
        llama = torch.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * llama / factor + smooth * llama
        medium = ~(wavelen < old / high) * ~(wavelen > old / low)
        inv = torch.where(medium, smoothed, llama)
    return inv


def rope_samples() -> list[Sample]:
    out = []
    configs = [
        ("rotate_half", "none", {}),
        ("interleaved", "none", {}),
        ("rotate_half", "linear", {"factor": 4.0}),
        ("rotate_half", "dynamic", {"factor": 2.0, "original_max_position": 16}),
        (
            "rotate_half",
            "llama3",
            {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position": 64},
        ),
        ("interleaved", "linear", {"factor": 2.0}),
        ("rotate_half", "none", {}),
        ("interleaved", "dynamic", {"factor": 3.0, "original_max_position": 500}),
        (
            "interleaved",
            "llama3",
            {"factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 2.0, "original_max_position": 32},
        ),
        ("rotate_half", "dynamic", {"factor": 2.0, "original_max_position": 4}),
        ("rotate_half", "none", {}),
    ]
    for i, (style, scaling, p) in enumerate(configs):
        rng = np.random.default_rng(6600 + i)
        (bb, ss) = BS[i]
        d = [16, 8, 32, 16, 64, 8, 6, 16, 32, 4, 2][i]
        rot = [d, d, d // 2, d, d, 4, 2, 8, d, d, 2][i]
        theta = [10000.0, 10000.0, 500000.0, 10000.0, 500000.0, 100.0, 10000.0, 1e6, 10000.0, 1000.0, 10.0][i]
        dt = {6: "f16", 10: "bf16"}.get(i, "f32")
        x = rand(rng, (bb, 3, ss, d), dt)
        pos = rng.integers(0, 200, size=(bb, ss)).astype(np.int32 if i % 2 else np.int64)
        pdt = "i32" if i % 2 else "i64"
        attrs = {
            "theta": float_attr(theta),
            "style": s(style) if style != "rotate_half" else None,
            "rotary_dim": int_attr(rot) if rot != d or i == 0 else None,
            "scaling": s(scaling) if scaling != "none" else None,
        }
        for key, v in p.items():
            attrs[key] = int_attr(v) if isinstance(v, int) else float_attr(v)

        def ref(x, pos, rot=rot, theta=theta, scaling=scaling, p=p, style=style):
            x = x.double()
            inv = _ref_inv_freq(rot, theta, scaling, p, int(pos.max()))
            ang = pos.double()[:, None, :, None] * inv  # [b, 1, s, rot/2]
            xr, rest = x[..., :rot], x[..., rot:]
            if style == "rotate_half":
                emb = torch.cat([ang, ang], dim=-1)
                x1, x2 = xr[..., : rot // 2], xr[..., rot // 2 :]
                y = xr * emb.cos() + torch.cat([-x2, x1], dim=-1) * emb.sin()
            else:
                c = torch.view_as_complex(xr.reshape(*xr.shape[:-1], rot // 2, 2).contiguous())
                y = torch.view_as_real(c * torch.polar(torch.ones_like(ang), ang)).flatten(-2)
            return [torch.cat([y, rest], dim=-1).float()]

        out.append(
            Sample(
                f"ix.rope-{i}-{style}-{scaling}-rot{rot}",
                6600 + i,
                [(T(("batch", 3, "seq", d), dt), x), (T(("batch", "seq"), pdt), pos)],
                lambda bld, args, attrs=attrs: [bld(nn.RopeOp, args[0], args[1], **attrs)],
                ref,
            )
        )
    return out


def attention_samples() -> list[Sample]:
    out = []
    # (hq, hkv, s, t, d, dv, causal, window, softcap, scale, positions?, kv_lens?)
    cases = [
        (4, 4, "s", "s", 16, 16, True, None, None, None, False, False),
        (4, 2, "s", "s", 8, 8, True, None, None, None, False, False),
        (8, 1, 1, "ctx", 16, 16, True, None, None, None, True, True),
        (2, 2, "s", "s", 8, 4, False, None, None, None, False, False),
        (4, 2, "s", "s", 16, 16, True, 3, None, None, False, False),
        (4, 4, "s", "s", 8, 8, True, None, 5.0, None, False, False),
        (6, 3, "s", "ctx", 8, 8, True, None, None, 0.3, True, True),
        (2, 1, "s", "s", 4, 4, True, 2, 2.0, None, True, False),
        (4, 4, 2, "ctx", 8, 8, False, None, None, None, False, True),
        (3, 1, "s", "ctx", 7, 5, True, 4, None, None, True, True),
        (2, 2, "s", "s", 8, 8, True, None, None, None, True, False),  # a padded query sees nothing
        (4, 2, "s", "s", 8, 8, True, None, None, None, False, False),
    ]
    for i, (hq, hkv, s_, t_, d, dv, causal, window, cap, scale, has_pos, has_lens) in enumerate(cases):
        rng = np.random.default_rng(6700 + i)
        (bb, ss) = BS[i]
        ss = min(ss, 33)
        sv = ss if s_ == "s" else s_
        tv = sv if t_ == "s" else sv + int(rng.integers(0, 9))
        dt = {11: "f16", 3: "bf16"}.get(i, "f32")
        sspec = "seq" if s_ == "s" else s_
        tspec = "seq" if t_ == "s" else "ctx"
        q = rand(rng, (bb, hq, sv, d), dt)
        k = rand(rng, (bb, hkv, tv, d), dt)
        v = rand(rng, (bb, hkv, tv, dv), dt)
        kv_lens = rng.integers(max(tv - 3, 1), tv + 1, size=(bb,)).astype(np.int32)
        positions = (kv_lens[:, None] - sv + np.arange(sv)[None, :]).astype(np.int32)
        if i == 10:
            positions[:, 0] = -1  # padding: no key is at or before position -1
        args = [
            (T(("batch", hq, sspec, d), dt), q),
            (T(("batch", hkv, tspec, d), dt), k),
            (T(("batch", hkv, tspec, dv), dt), v),
        ]
        if has_pos:
            args.append((T(("batch", sspec), "i32"), positions))
        if has_lens:
            args.append((T(("batch",), "i32"), kv_lens))
        attrs = {
            "causal": unit() if causal else None,
            "window": int_attr(window) if window else None,
            "softcap": float_attr(cap) if cap else None,
            "scale": float_attr(scale) if scale else None,
        }

        def body(bld, a, has_pos=has_pos, has_lens=has_lens, attrs=attrs):
            pos = a[3] if has_pos else None
            lens = a[3 + has_pos] if has_lens else None
            return [bld(nn.AttentionOp, a[0], a[1], a[2], pos, lens, **attrs)]

        def ref(
            q,
            k,
            v,
            *extra,
            has_pos=has_pos,
            has_lens=has_lens,
            causal=causal,
            window=window,
            cap=cap,
            scale=scale,
        ):
            b, hq, s, d = q.shape
            t = k.shape[2]
            pos = extra[0].long() if has_pos else (torch.arange(s) + t - s).expand(b, s)
            lens = extra[int(has_pos)].long() if has_lens else torch.full((b,), t)
            j = torch.arange(t)
            mask = (j[None, None, :] < lens[:, None, None]).expand(b, s, t)
            if causal:
                mask = mask & (j[None, None, :] <= pos[:, :, None])
            if window:
                mask = mask & (pos[:, :, None] - j[None, None, :] < window)
            mask = mask[:, None]
            rep = hq // k.shape[1]
            k, v = k.double().repeat_interleave(rep, dim=1), v.double().repeat_interleave(rep, dim=1)
            q = q.double()
            sc = scale if scale else d**-0.5
            if cap:
                logits = cap * torch.tanh(q @ k.transpose(-1, -2) * sc / cap)
                o = torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1) @ v
            else:
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=sc)
            return [torch.where(mask.any(-1, keepdim=True), o, 0.0).float()]

        out.append(
            Sample(
                f"ix.attention-{i}-hq{hq}-hkv{hkv}{'-causal' if causal else ''}"
                f"{f'-w{window}' if window else ''}{'-cap' if cap else ''}-{dt}",
                6700 + i,
                args,
                body,
                ref,
            )
        )
    return out


def kv_write_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(6800 + i)
        (bb, ss) = BS[i]
        ss = min(ss, 33)
        hkv, d = [1, 2, 4, 1, 3, 2, 1, 2, 8, 1][i], [8, 16, 4, 7, 8, 2, 16, 8, 4, 129][i]
        cap = ss + int(rng.integers(0, 6))
        dt = {4: "f16", 7: "bf16"}.get(i, "f32")
        cache, new = rand(rng, (bb, hkv, cap, d), dt), rand(rng, (bb, hkv, ss, d), dt)
        pos = np.stack([rng.permutation(cap)[:ss] for _ in range(bb)]).astype(np.int32 if i % 2 else np.int64)
        if i % 3 == 0:
            pos[rng.random(pos.shape) < 0.3] = -1  # padding tokens are skipped
        pdt = "i32" if i % 2 else "i64"

        def ref(cache, new, pos):
            out = cache.clone()
            for n in range(pos.shape[0]):
                for j in range(pos.shape[1]):
                    if pos[n, j] >= 0:
                        out[n, :, pos[n, j]] = new[n, :, j]
            return [out]

        out.append(
            Sample(
                f"ix.kv_write-{i}-{dt}",
                6800 + i,
                [
                    (T(("batch", hkv, cap, d), dt), cache),
                    (T(("batch", hkv, "seq", d), dt), new),
                    (T(("batch", "seq"), pdt), pos),
                ],
                lambda bld, a: [bld(nn.KVWriteOp, a[0], a[1], a[2])],
                ref,
                tol=EXACT,
            )
        )
    return out


def all_samples() -> dict[type, list[Sample]]:
    """Every ix op class mapped to its samples."""
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
            nn.EmbeddingOp: embedding_samples(),
            nn.LinearOp: linear_samples(),
            nn.MatmulOp: matmul_samples(),
            nn.SoftmaxOp: softmax_samples(),
            nn.RMSNormOp: rmsnorm_samples(),
            nn.SumSquaresOp: sum_squares_samples(),
            nn.RMSNormSumSquaresOp: rmsnorm_ss_samples(),
            nn.LayerNormOp: layernorm_samples(),
            nn.RopeOp: rope_samples(),
            nn.AttentionOp: attention_samples(),
            nn.KVWriteOp: kv_write_samples(),
        }
    )
    return table
