"""The tile emitter shared by every template: values of a fused group as Triton expressions.

A template computes its anchor (a GEMM, attention, a gather, a row reduction) as a register tile
and hands each tile element's coordinates in the anchor's result tensor to the emitter. The
emitter then walks the rest of the kernel body: elementwise ops become expressions, operands
from outside the kernel become loads at the same coordinates (with broadcasting), layout ops
(split, reshape, transpose, slice) only rewrite coordinates, ``kv_write`` becomes a masked store
into the cache in place, and every yielded value is stored at its coordinates. Element values
stay in registers throughout: a layout op never moves data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import BlockArgument, Operation, SSAValue

from inferx.compiler.families.common.e4m3 import emit_to_bytes
from inferx.compiler.families.common.errors import CodegenError
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.fp8 import FP8_MAX
from inferx.compiler.ir.ops_base import get_dim, get_int, get_ints, get_str
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp
from inferx.compiler.ir.types import DType, TensorType
from inferx.runtime.kernel_source import Param

# Where a kernel made safe for PDL waits for the kernel before it (``griddepcontrol.wait``); a
# template that emits this line itself has the wait there, else it comes first.
GRID_WAIT = "gdc_wait()"

# Emitted by every thread of a program before the barrier that precedes its arrival at a counter
# other programs read (split-K and split-KV partials, the fused kernels' sums): stores and
# reductions are posted, and under the PTX memory model neither the barrier nor the counting
# thread's own release orders other threads' writes before the arrival. Only where the kernel is
# compiled for a GPU (``ON_GPU``, in every kernel module's header): Triton's interpreter runs no
# inline PTX, and runs programs one after another.
RELEASE_WRITES = ('tl.inline_asm_elementwise("fence.acq_rel.gpu; // $0", "=r", [], dtype=tl.int32, is_pure=False, '
                  'pack=1)')


def release_writes(em: Emitter) -> None:
    """The fence above, in a kernel compiled for a GPU."""
    em.emit("if ON_GPU:")
    em.emit("    " + RELEASE_WRITES)


TL_DTYPE = {DType.f32: "tl.float32", DType.f16: "tl.float16", DType.bf16: "tl.bfloat16",
            DType.f8e4m3: "tl.float8e4nv", DType.i8: "tl.int8", DType.i32: "tl.int32",
            DType.i64: "tl.int64", DType.bool: "tl.int1"}
# Pointer element types of a kernel's signature; i4 and f8e4m3 weights are read as their bytes.
SIG_DTYPE = {DType.f32: "fp32", DType.f16: "fp16", DType.bf16: "bf16", DType.f8e4m3: "u8",
             DType.i8: "i8", DType.i32: "i32", DType.i64: "i64", DType.bool: "i1", DType.i4: "u8"}

UNARY: dict[type[Operation], str] = {
    t.NegOp: "-({a})",
    t.ExpOp: "tl.exp({a})",
    t.RsqrtOp: "tl.rsqrt({a})",
    t.SqrtOp: "tl.sqrt({a})",
    t.SigmoidOp: "tl.sigmoid({a})",
    t.SiluOp: "({a}) * tl.sigmoid({a})",
    t.TanhOp: "(2.0 * tl.sigmoid(2.0 * ({a})) - 1.0)",
}
BINARY: dict[type[Operation], str] = {
    t.AddOp: "({a}) + ({b})",
    t.SubOp: "({a}) - ({b})",
    t.MulOp: "({a}) * ({b})",
    t.DivOp: "({a}) / ({b})",
    t.MaxOp: "tl.maximum({a}, {b})",
    t.MinOp: "tl.minimum({a}, {b})",
    t.PowOp: "libdevice.pow({a}, {b})",
}


def dim_code(d: sy.Dim, symbols: set[str] | None = None) -> str:
    """A dim as a Python/Triton expression over ``S_<symbol>`` names (collected into ``symbols``)."""
    if isinstance(d, int):
        return str(d)
    parts = []
    for mono, coeff in d.terms:
        factors = [str(coeff)] if coeff != 1 or not mono else []
        for atom in mono:
            if isinstance(atom, str):
                if symbols is not None:
                    symbols.add(atom)
                factors.append(f"S_{atom}")
            else:
                factors.append(f"(({dim_code(atom.numerator, symbols)}) // {atom.divisor})")
        parts.append(" * ".join(factors))
    return "(" + " + ".join(parts) + ")"


@dataclass
class Tile:
    """A value held in registers: ``expr`` per tile element, at ``coords`` of its tensor type."""

    expr: str
    coords: list[str]
    mask: str
    type: TensorType
    # For a value reached from the anchor through layout ops only: its partner for RoPE.
    partner: str | None = None


@dataclass
class Emitter:
    kernel: KernelOp
    name: str
    lines: list[str] = field(default_factory=list)
    values: dict[SSAValue, Tile] = field(default_factory=dict)
    symbols: set[str] = field(default_factory=set)
    indent: int = 1
    counter: int = 0
    aliases: dict[int, int] = field(default_factory=dict)
    stored: set[int] = field(default_factory=set)
    # Inputs the template loaded once per row: (expression, the row coords it stands for).
    row_values: dict[SSAValue, tuple[str, list[str]]] = field(default_factory=dict)
    # Ops the template has already applied to its accumulator (a hoisted RoPE): they pass through.
    applied: set[Operation] = field(default_factory=set)
    # Results (by yield index) the template stores itself (row statistics across programs).
    deferred: set[int] = field(default_factory=set)

    # text ----------------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def tmp(self, expr: str, prefix: str = "v") -> str:
        name = f"{prefix}{self.counter}"
        self.counter += 1
        self.emit(f"{name} = {expr}")
        return name

    def error(self, op: Operation | None, why: str) -> CodegenError:
        where = f" at {op.name}" if op is not None else ""
        return CodegenError(f"kernel {self.name} ({self.kernel.template.data}){where}: {why}")

    # dims and addresses -------------------------------------------------------------------
    def dim(self, d: sy.Dim) -> str:
        return dim_code(d, self.symbols)

    def strides(self, shape: Sequence[sy.Dim]) -> list[str]:
        out: list[str] = []
        acc: sy.Dim = 1
        for d in reversed(shape):
            out.append(self.dim(acc))
            acc = sy.mul(acc, d)
        return list(reversed(out))

    def offset(self, coords: Sequence[str], shape: Sequence[sy.Dim]) -> str:
        terms = [f"({c}) * {s}" if s != "1" else f"({c})" for c, s in zip(coords, self.strides(shape), strict=True)]
        return " + ".join(terms) if terms else "0"

    def unravel(self, linear: str, shape: Sequence[sy.Dim]) -> list[str]:
        coords: list[str] = []
        rest = self.tmp(linear, "lin")
        for i, d in enumerate(reversed(shape)):
            if i == len(shape) - 1:
                coords.append(rest)
            else:
                dc = self.dim(d)
                coords.append(self.tmp(f"{rest} % {dc}", "c"))
                rest = self.tmp(f"{rest} // {dc}", "lin")
        return list(reversed(coords)) if shape else []

    def reshape_coords(self, coords: Sequence[str], src: list[sy.Dim], dst: list[sy.Dim]) -> list[str]:
        """Coordinates in ``dst`` of the element at ``coords`` of ``src`` (a row-major reshape).

        Leading and trailing dims the two shapes share keep their coordinates; only the middle is
        linearized and unravelled. A reshape that splits the last dim into heads
        (``[b, s, h*d] -> [b, s, h, d]``) thus divides a column index by a constant instead of
        dividing every element's linear index by the run-time sequence length."""
        lo = 0
        while lo < min(len(src), len(dst)) and src[lo] == dst[lo]:
            lo += 1
        hi = 0
        while hi < min(len(src), len(dst)) - lo and src[len(src) - 1 - hi] == dst[len(dst) - 1 - hi]:
            hi += 1
        mid_src, mid_dst = src[lo : len(src) - hi], dst[lo : len(dst) - hi]
        head, tail = list(coords[:lo]), list(coords[len(coords) - hi :])
        if not mid_dst:
            return head + tail
        if not mid_src:  # dst only adds unit dims in the middle
            return head + ["0"] * len(mid_dst) + tail
        linear = self.offset(coords[lo : len(coords) - hi], mid_src)
        return head + self.unravel(linear, mid_dst) + tail

    # inputs -------------------------------------------------------------------------------
    def input_index(self, v: SSAValue) -> int:
        assert isinstance(v, BlockArgument)
        return v.index

    def load(self, v: SSAValue, coords: Sequence[str], mask: str, as_float: bool = True) -> str:
        """Loads kernel input ``v`` at ``coords`` of a value of rank len(coords), broadcasting."""
        ty = v.type
        assert isinstance(ty, TensorType)
        row = self.row_values.get(v)
        if row is not None and list(coords[len(coords) - ty.rank :]) == row[1]:
            expr = row[0]
            return self.tmp(f"{expr}.to(tl.float32)", "x") if as_float and ty.dtype.is_float else expr
        lead = len(coords) - ty.rank
        if lead < 0:
            raise self.error(None, f"operand {ty} has a higher rank than the value it combines with")
        cs = ["0" if ty.shape[i] == 1 else coords[lead + i] for i in range(ty.rank)]
        ptr = f"in{self.input_index(v)} + {self.offset(cs, ty.shape)}"
        cast = ".to(tl.float32)" if as_float and ty.dtype.is_float else ""
        if all(c == "0" for c in cs):  # a scalar: one load, broadcast by the arithmetic
            return self.tmp(f"tl.load(in{self.input_index(v)}){cast}", "x")
        return self.tmp(f"tl.load({ptr}, mask={mask}, other=0){cast}", "x")

    def operand(self, v: SSAValue, like: Tile, op: Operation) -> str:
        if v in self.values:
            other = self.values[v]
            if other.coords != like.coords:
                raise self.error(op, "combines two in-kernel values whose elements are not aligned")
            return other.expr
        return self.load(v, like.coords, like.mask)

    # the body walk ------------------------------------------------------------------------
    def run_epilogue(self, ops: Sequence[Operation]) -> None:
        for op in ops:
            if isinstance(op, YieldOp):
                for i, v in enumerate(op.values):
                    if i in self.aliases or i in self.deferred:
                        continue  # written in place by kv_write, or by the template
                    tile = self.values.get(v)
                    if tile is None:
                        raise self.error(op, f"yields value #{i}, which is not computed in this kernel")
                    self.store(tile, i)
                return
            self.visit(op)
        raise self.error(None, "the body has no ix.yield")

    def visit(self, op: Operation) -> None:
        tiles = [self.values.get(v) for v in op.operands]
        first = next((x for x in tiles if x is not None), None)
        if first is None:
            raise self.error(op, "does not use any value computed in this kernel (it should not have fused)")
        res_type = op.results[0].type if op.results else None
        if not isinstance(res_type, TensorType):
            raise self.error(op, "has no tensor result to compute")
        assert isinstance(res_type, TensorType) or res_type is None
        if type(op) in UNARY:
            self.set(op, Tile(self.tmp(UNARY[type(op)].format(a=first.expr)), first.coords, first.mask, res_type))
        elif isinstance(op, t.GeluOp):
            a = first.expr
            if get_str(op.attributes, "approximate", ("none", "tanh"), "none") == "tanh":
                inner = f"0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a})"
                expr = f"0.5 * {a} * (2.0 * tl.sigmoid(2.0 * ({inner})))"
            else:
                expr = f"0.5 * {a} * (1.0 + tl.erf({a} * 0.7071067811865476))"
            self.set(op, Tile(self.tmp(expr), first.coords, first.mask, res_type))
        elif type(op) in BINARY:
            if res_type is None or tuple(res_type.shape) != tuple(first.type.shape):
                raise self.error(op, f"broadcasts the in-kernel value {first.type} up to {res_type}")
            a = self.operand(op.operands[0], first, op)
            b = self.operand(op.operands[1], first, op)
            self.set(op, Tile(self.tmp(BINARY[type(op)].format(a=a, b=b)), first.coords, first.mask, res_type))
        elif isinstance(op, t.CastOp):
            assert res_type is not None
            target = res_type.dtype
            if target.is_float:
                expr = f"({first.expr}).to({TL_DTYPE[target]}).to(tl.float32)"
            else:
                expr = f"({first.expr}).to({TL_DTYPE[target]})"
            self.set(op, Tile(self.tmp(expr), first.coords, first.mask, res_type))
        elif isinstance(op, t.SplitOp):
            dim = get_int(op.attributes, "dim") % first.type.rank
            off: sy.Dim = 0
            for r in op.results:
                rt = r.type
                assert isinstance(rt, TensorType)
                size = rt.shape[dim]
                c = first.coords[dim]
                coords = list(first.coords)
                coords[dim] = self.tmp(f"{c} - {self.dim(off)}", "c")
                lo, hi = self.dim(off), self.dim(sy.add(off, size))
                mask = self.tmp(f"{first.mask} & ({c} >= {lo}) & ({c} < {hi})", "m")
                self.values[r] = Tile(first.expr, coords, mask, rt, first.partner)
                off = sy.add(off, size)
        elif isinstance(op, t.ReshapeOp):
            assert res_type is not None
            coords = self.reshape_coords(first.coords, list(first.type.shape), list(res_type.shape))
            self.set(op, Tile(first.expr, coords, first.mask, res_type, first.partner))
        elif isinstance(op, t.TransposeOp):
            perm = get_ints(op.attributes, "perm")
            coords = [first.coords[p] for p in perm]
            self.set(op, Tile(first.expr, coords, first.mask, res_type, first.partner))
        elif isinstance(op, t.SliceOp):
            dim = get_int(op.attributes, "dim") % first.type.rank
            start, end = self.dim(get_dim(op.attributes, "start")), self.dim(get_dim(op.attributes, "end"))
            step = get_int(op.attributes, "step", 1)
            c = first.coords[dim]
            coords = list(first.coords)
            coords[dim] = self.tmp(f"({c} - {start}) // {step}", "c")
            mask = self.tmp(f"{first.mask} & ({c} >= {start}) & ({c} < {end}) & (({c} - {start}) % {step} == 0)", "m")
            self.set(op, Tile(first.expr, coords, mask, res_type))
        elif isinstance(op, nn.RopeOp) and op in self.applied:
            self.set(op, Tile(first.expr, first.coords, first.mask, first.type))
        elif isinstance(op, nn.RopeOp):
            self.rope(op, first)
        elif isinstance(op, nn.KVWriteOp):
            self.kv_write(op)
        else:
            raise self.error(op, "has no tile form in an epilogue")

    def set(self, op: Operation, tile: Tile) -> None:
        self.values[op.results[0]] = tile

    # rope and the KV cache ----------------------------------------------------------------
    def rope(self, op: nn.RopeOp, x: Tile) -> None:
        if op.input not in self.values or x.partner is None:
            raise self.error(op, "RoPE must follow its GEMM through layout ops only (split, reshape, transpose)")
        attrs = op.attributes
        head_dim = x.type.shape[-1]
        assert isinstance(head_dim, int)
        rot = get_int(attrs, "rotary_dim", head_dim)
        scaling = get_str(attrs, "scaling", ("none", "linear", "dynamic", "llama3"), "none")
        if scaling == "dynamic":
            raise self.error(op, "dynamic NTK scaling depends on the step's longest sequence; not generated yet")
        d = x.coords[-1]
        pos = self.load(op.positions, [x.coords[0], x.coords[2]], x.mask, as_float=False)
        inv, sign = self.rope_frequencies(op, d, rot)
        ang = self.tmp(f"{pos}.to(tl.float32) * {inv}", "a")
        cos, sin = self.sincos(ang)
        rotated = f"{x.expr} * {cos} + {sign} * {x.partner} * {sin}"
        out = self.tmp(f"tl.where({d} < {rot}, {rotated}, {x.expr})")
        self.set(op, Tile(out, x.coords, x.mask, x.type))

    def sincos(self, angle: str, fast: bool = False) -> tuple[str, str]:
        """Names of cos and sin of ``angle`` (fp32 radians, any size), computed inline: the angle
        reduced to [-pi, pi] (2*pi split in two constants, exact for multiples below 2^16), then
        Taylor polynomials of degree 16 and 15 (absolute error < 2e-6 for angles up to 8192,
        against < 1e-7 for libdevice). libdevice's cos/sin carry a slow path for huge arguments
        that the compiler inlines at every element: the sm_90 prefill qkv GEMM of a Llama-3-8B
        shape compiled to 772 KB of cubin with it, 216 KB with these.

        ``fast``: in a kernel compiled for a GPU, libdevice's ``fast_cosf``/``fast_sinf`` (the
        hardware approximations, on the reduced angle) instead of the polynomials; the
        interpreter, which has neither, keeps the polynomials. The approximations make prefill
        GEMMs with RoPE faster and decode GEMVs (one row per program) no faster, so those keep
        the polynomials (docs/performance.md)."""
        n = self.tmp(f"tl.floor({angle} * 0.15915494309189535 + 0.5)", "n")
        r = self.tmp(f"({angle} - {n} * 6.28125) - {n} * 0.0019353071795864769", "r")
        cos, sin = f"cs{self.counter}", f"sn{self.counter}"
        self.counter += 1
        if fast:
            self.emit("if ON_GPU:")
            self.emit(f"    {cos} = libdevice.fast_cosf({r})")
            self.emit(f"    {sin} = libdevice.fast_sinf({r})")
            self.emit("else:")
            self.indent += 1
        r2 = self.tmp(f"{r} * {r}", "r")

        def horner(coeffs: list[float]) -> str:
            expr = f"{coeffs[-1]!r}"
            for c in reversed(coeffs[:-1]):
                expr = f"{c!r} + {r2} * ({expr})"
            return expr

        fact = [float(math.factorial(k)) for k in range(17)]
        self.emit(f"{cos} = {horner([(-1) ** i / fact[2 * i] for i in range(9)])}")
        self.emit(f"{sin} = {r} * ({horner([(-1) ** i / fact[2 * i + 1] for i in range(8)])})")
        if fast:
            self.indent -= 1
        return cos, sin

    def rope_frequencies(self, op: nn.RopeOp, d: str, rot: int) -> tuple[str, str]:
        """Names of the inverse frequency and the partner's sign for head-dim index ``d``."""
        attrs = op.attributes
        style = get_str(attrs, "style", ("rotate_half", "interleaved"), "rotate_half")
        scaling = get_str(attrs, "scaling", ("none", "linear", "dynamic", "llama3"), "none")
        theta = float(attrs["theta"].value.data)  # type: ignore[attr-defined]
        if style == "rotate_half":
            j = self.tmp(f"{d} % {rot // 2}", "j")
            sign = self.tmp(f"tl.where({d} < {rot // 2}, -1.0, 1.0)", "sg")
        else:
            j = self.tmp(f"{d} // 2", "j")
            sign = self.tmp(f"tl.where({d} % 2 == 0, -1.0, 1.0)", "sg")
        inv = self.tmp(f"tl.exp2(-({j}.to(tl.float32) * 2.0 / {rot}) * {math.log2(theta)!r})", "f")
        if scaling == "linear":
            inv = self.tmp(f"{inv} / {float(attrs['factor'].value.data)!r}", "f")  # type: ignore[attr-defined]
        elif scaling == "llama3":
            inv = self._llama3(inv, attrs)
        return inv, sign

    def _llama3(self, inv: str, attrs) -> str:  # type: ignore[no-untyped-def]
        factor = float(attrs["factor"].value.data)
        low = float(attrs["low_freq_factor"].value.data)
        high = float(attrs["high_freq_factor"].value.data)
        orig = float(attrs["original_max_position"].value.data)
        low_wl, high_wl = orig / low, orig / high
        wl = self.tmp(f"{2 * math.pi!r} / {inv}", "wl")
        smooth = self.tmp(f"({orig!r} / {wl} - {low!r}) / {high - low!r}", "sm")
        mid = f"(1.0 - {smooth}) * {inv} / {factor!r} + {smooth} * {inv}"
        scaled = f"tl.where({wl} > {low_wl!r}, {inv} / {factor!r}, {mid})"
        return self.tmp(f"tl.where({wl} < {high_wl!r}, {inv}, {scaled})", "f")

    def kv_write(self, op: nn.KVWriteOp) -> None:
        new = self.values.get(op.new)
        if new is None or op.cache in self.values:
            raise self.error(op, "writes a cache that is not a kernel input, or a value not computed here")
        cache_t = op.cache.type
        assert isinstance(cache_t, TensorType)
        pos = self.load(op.positions, [new.coords[0], new.coords[2]], new.mask, as_float=False)
        coords = [new.coords[0], new.coords[1], pos, new.coords[3]]
        valid = f"({pos} >= 0)"
        if op.block_table is not None:  # a paged cache: the position's block from the table
            bs = cache_t.shape[2]
            blk = self.load(op.block_table, [new.coords[0], f"({pos} // {bs})"], f"{new.mask} & {valid}",
                            as_float=False)
            coords = [blk, new.coords[1], f"({pos} % {bs})", new.coords[3]]
            valid = f"{valid} & ({blk} >= 0)"  # a position with no block is not written
        ptr = f"in{self.input_index(op.cache)} + {self.offset(coords, cache_t.shape)}"
        if op.scale is not None:  # an FP8 cache: the value over its head's scale, as E4M3 bytes
            new_t = op.new.type
            assert isinstance(new_t, TensorType)
            sc = self.load(op.scale, [new.coords[1]], new.mask)  # 0 in masked lanes: divide by 1 there
            q = self.tmp(f"{new.expr}.to({TL_DTYPE[new_t.dtype]}).to(tl.float32) / tl.where({sc} > 0, {sc}, 1.0)",
                         "kq")
            q = self.tmp(f"tl.minimum(tl.maximum({q}, -{FP8_MAX!r}), {FP8_MAX!r})", "kq")
            value = f"kb{self.counter}"
            self.counter += 1
            emit_to_bytes(self, q, value)
        else:
            value = f"{new.expr}.to({TL_DTYPE[cache_t.dtype]})"
        self.emit(f"tl.store({ptr}, {value}, mask={new.mask} & {valid})")
        # The result is the cache itself, updated in place: yield it as an alias of the input.
        yield_op = self.kernel.body.block.last_op
        assert isinstance(yield_op, YieldOp)
        for i, v in enumerate(yield_op.values):
            if v == op.results[0]:
                self.aliases[i] = self.input_index(op.cache)

    def squares_of_rows(self, op: nn.SumSquaresOp, yields: list[SSAValue], columns: str) -> int:
        """Emits ``xs``: the tile ``op`` sums the squares of along its last dim (``columns``, the
        template's ``c``), as stored and zero outside its mask. Returns the index of the kernel
        output the row sums go to."""
        tile = self.values.get(op.input)
        if tile is None or tile.coords[-1] != "c[None, :]":
            raise self.error(op, f"sums rows of a value whose last dim is not {columns}")
        if op.results[0] not in yields:
            raise self.error(op, "the row sums are not a result of the kernel")
        x_t = op.input.type
        assert isinstance(x_t, TensorType)
        stored = tile.expr if x_t.dtype == DType.f32 else f"({tile.expr}).to({TL_DTYPE[x_t.dtype]}).to(tl.float32)"
        self.emit(f"xs = tl.where({tile.mask}, {stored}, 0.0)")
        return yields.index(op.results[0])

    def store(self, tile: Tile, out_index: int) -> None:
        out_t = self.kernel.outputs[out_index].type
        assert isinstance(out_t, TensorType)
        ptr = f"out{out_index} + {self.offset(tile.coords, out_t.shape)}"
        self.emit(f"tl.store({ptr}, ({tile.expr}).to({TL_DTYPE[out_t.dtype]}), mask={tile.mask})")

    # the parameter list ---------------------------------------------------------------------
    def params(self) -> list[Param]:
        ps: list[Param] = []
        for i, v in enumerate(self.kernel.inputs):
            ty = v.type
            assert isinstance(ty, TensorType)
            ps.append(Param(f"in{i}", "in", index=i, dtype=ty.dtype.value))
        for i, v in enumerate(self.kernel.outputs):
            ty = v.type
            assert isinstance(ty, TensorType)
            ps.append(Param(f"out{i}", "out", index=i, dtype=ty.dtype.value))
        for s in sorted(self.symbols):
            ps.append(Param(f"S_{s}", "sym", symbol=s))
        return ps


def attr_str(op: Operation, key: str, default: str) -> str:
    a = op.attributes.get(key)
    return a.data if isinstance(a, StringAttr) else default
