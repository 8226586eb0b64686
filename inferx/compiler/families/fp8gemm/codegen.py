"""The FP8 W8A8 GEMM template: ``y = x[..., K] @ W^T`` with ``W[N, K]`` held as E4M3 codes and one
fp32 scale per output channel (``ix.fp8_linear``, numerics: ``inferx.compiler.ir.fp8``), after an
optional RMSNorm of x, then any epilogue the tile emitter can express (residual add, activations,
casts, reshape/transpose into heads, RoPE, KV-cache write, a gated ``act(gate) * up``).

Applies to a kernel whose body starts with an ``ix.fp8_linear`` of kernel inputs, or with an
``ix.rmsnorm`` of a kernel input feeding one. Each program computes a BM x BN tile of y on
``tl.dot``, quantizing its rows of x per token as it reads them:

1. with a norm, the rows' sums of squares over K (a pass over x's rows, or loaded: where the
   kernel producing x sums its output rows' squares, the norm-stats pass);
2. the rows' largest magnitude of the linear's input x' (the norm's output rounded to x's dtype,
   or x itself): the token scale ``sx = max|x'| / 448`` (1 for a row of zeros); or, with a
   static ``x_scale`` from calibration, that scale for every row (no pass; x' / sx clamped to
   +-448);
3. the K loop: x' / sx rounded to E4M3 and the E4M3 codes of W into ``tl.dot`` (FP8 wgmma on the
   GPU, fp32 sums), then the product times sx and the channel scales, the bias and the epilogue.

The codes arrive as their bytes (uint8). On the GPU they are bitcast to ``tl.float8e4nv`` and x'
/ sx is converted to it (round to nearest even; |x' / sx| <= 448 by construction). Triton's
interpreter has no FP8 it can be trusted with, so there both are emulated exactly in fp32
(``common.e4m3``) and the dot runs in fp32: the same values, summed in another
order. The passes over x re-read rows the K loop reads again (from L2); a producer that writes
x quantized is the faster form, not built yet. Like gemm and qgemm, the kernel sums its output
rows' squares for the next norm where norm-stats asks (``partials.row_sum_squares``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from xdsl.ir import BlockArgument, SSAValue

from inferx.compiler.families.common.e4m3 import DECODE, ROUND, emit_normed_rows, emit_row_scales
from inferx.compiler.families.common.linear_tile import (
    TileLayout,
    bind_tile_results,
    emit_tile_columns,
    linear_applies,
    linear_op,
    linear_prologue,
    tile_layout,
)
from inferx.compiler.families.common.partials import row_sum_squares
from inferx.compiler.families.common.rows import gated_split, norm_scale
from inferx.compiler.families.common.source import module_source
from inferx.compiler.families.common.tile import TL_DTYPE, Emitter
from inferx.compiler.families.interface import ScheduleError, check_warps_stages, pow2
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.fp8 import FP8_MAX
from inferx.compiler.ir.ops_base import get_int
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp
from inferx.compiler.ir.types import DType, TensorType
from inferx.runtime.kernel_source import KernelSource, Param, Scratch

TEMPLATE = "fp8gemm"
FIELDS = ("bm", "bn", "bk", "num_warps", "num_stages")
# Knobs a schedule may leave out, with the value that means off
OPTIONAL = {"tma": 0}


@dataclass(frozen=True)
class Fp8GemmSchedule:
    """A BM x BN output tile per program, K in steps of BK (BK divides K). ``tma``: x and W tiles
    through tensor descriptors (TMA on sm_90), for an x that arrives E4M3 (``row_scales`` or
    ``given``). ``given``: the tile reads x quantized once (``ix.fp8_linear``'s ``given``), in
    the row buckets from its ``given_min_rows``; set from the bucket (``at_rows``), never by a
    record, as the quantizing kernel's launch must agree."""

    bm: int
    bn: int
    bk: int
    num_warps: int = 4
    num_stages: int = 3
    tma: int = 0
    given: bool = False

    def to_dict(self) -> dict[str, int]:
        d = {f: getattr(self, f) for f in FIELDS}
        d.update({k: getattr(self, k) for k, off in OPTIONAL.items() if getattr(self, k) != off})
        return d


def fp8gemm_schedule(d: dict[str, int]) -> Fp8GemmSchedule:
    """The schedule a dict names; ScheduleError naming the rule it breaks: FIELDS, and of
    OPTIONAL any; bm, bn, bk powers of two, bm and bn 16..256 (tl.dot's least M and N; a TMA
    box's most), bk 32..256 (FP8 wgmma steps K by 32); 1, 2, 4, 8 or 16 warps; 1 to 8 stages;
    tma 0 or 1."""
    if not set(FIELDS) <= set(d) <= set(FIELDS) | set(OPTIONAL):
        raise ScheduleError(f"fp8gemm schedule fields must be {list(FIELDS)} and of {sorted(OPTIONAL)} any, "
                            f"got {sorted(d)}")
    s = Fp8GemmSchedule(d["bm"], d["bn"], d["bk"], d["num_warps"], d["num_stages"], tma=d.get("tma", OPTIONAL["tma"]))
    if not all(pow2(v) for v in (s.bm, s.bn, s.bk)):
        raise ScheduleError(f"bm, bn and bk must be powers of two: {s}")
    if not (16 <= s.bm <= 256 and 16 <= s.bn <= 256 and 32 <= s.bk <= 256):
        raise ScheduleError(f"bm and bn must be 16..256, bk 32..256: {s}")
    if s.tma not in (0, 1):
        raise ScheduleError(f"tma must be 0 or 1: {s}")
    check_warps_stages(s)
    return s


NORMS = (nn.RMSNormOp, nn.RMSNormSumSquaresOp)


def prologue_of(kernel: KernelOp) -> nn.RMSNormOp | nn.RMSNormSumSquaresOp | None:
    """The RMSNorm the kernel's linear reads, when the body starts with one (its statistics an
    input where norm-stats made it ``ix.rmsnorm_ss``)."""
    return linear_prologue(kernel, nn.Fp8LinearOp, NORMS)  # type: ignore[return-value]


def linear_of(kernel: KernelOp) -> nn.Fp8LinearOp:
    return linear_op(kernel, nn.Fp8LinearOp, NORMS)  # type: ignore[return-value]


def applies(kernel: KernelOp) -> str | None:
    """None if this template implements the kernel, else the reason it does not."""
    return linear_applies(kernel, nn.Fp8LinearOp, NORMS, "an fp8_linear")


def reads_given(kernel: KernelOp, rows: int | None) -> bool:
    """The kernel's row bucket ``rows`` (None: the largest) reads x quantized once (``given``)."""
    f = linear_of(kernel)
    return f.given is not None and (rows is None or rows >= get_int(f.attributes, "given_min_rows"))


def at_rows(kernel: KernelOp, schedule: Fp8GemmSchedule, rows: int | None) -> Fp8GemmSchedule:
    """``schedule`` with ``given`` as the row bucket has it."""
    return replace(schedule, given=reads_given(kernel, rows))


def decode_rows(kernel: KernelOp) -> bool:
    """The kernel's rows are a batch of single tokens (no ``seq`` among them)."""
    x_t = linear_of(kernel).input.type
    assert isinstance(x_t, TensorType)
    return "seq" not in sy.symbols_of(sy.product(x_t.shape[:-1]))


def heuristic_schedule(kernel: KernelOp, target: str = "sm_90", rows: int | None = None) -> Fp8GemmSchedule:
    """BK: the largest of 128, 64, 32 dividing K. The cpu target (Triton's interpreter, a Python
    step per program and K step): 16 x 64 tiles for decode, 64 x 64 for prompts. sm_90: 16 x 64
    tiles for decode rows on 4 warps, 4 stages, and 64 x 64 on 3 stages where a decode bucket
    reads x quantized once (one warpgroup's FP8 wgmma); 128 x 128 tiles for prompts on 8 warps
    (two warpgroups of FP8 wgmma), 3 stages, and 128 x 256 where x arrives E4M3 and the columns
    are plain (o, down: the best of the probe's sweep at 4096 rows, docs/performance.md); the
    schedules of kernels without a tuning record."""
    op = linear_of(kernel)
    k = op.input.type.shape[-1]  # type: ignore[attr-defined]
    n = op.result.type.shape[-1]  # type: ignore[attr-defined]
    bk = next((b for b in (128, 64, 32) if isinstance(k, int) and k % b == 0), 32)
    bn = 64 if not isinstance(n, int) or n >= 64 else 32 if n >= 32 else 16
    decode = decode_rows(kernel)
    given = reads_given(kernel, rows)
    if target == "cpu":
        return Fp8GemmSchedule(16 if decode else 64, bn, min(bk, 64) if k % 64 == 0 else bk, given=given)
    if decode:
        if given:
            return Fp8GemmSchedule(64, bn, bk, num_warps=4, num_stages=3, given=True)
        return Fp8GemmSchedule(16, bn, bk, num_warps=4, num_stages=4)
    if op.row_scales is not None and isinstance(n, int) and n >= 256 and _plain_columns(kernel, op):
        return Fp8GemmSchedule(128, 256, bk, num_warps=8, num_stages=3)
    return Fp8GemmSchedule(128, 128 if isinstance(n, int) and n >= 128 else bn, bk, num_warps=8, num_stages=3)


def _plain_columns(kernel: KernelOp, op: nn.Fp8LinearOp) -> bool:
    """The tile's columns need one accumulator and no partners: no gate|up split, no RoPE."""
    ops = list(kernel.body.block.ops)
    epilogue = ops[ops.index(op) + 1:]
    return gated_split(op, epilogue) is None and not any(isinstance(o, nn.RopeOp) for o in epilogue)  # type: ignore[arg-type]


def tma_applies(layout: TileLayout, k_dim: int, given: bool) -> str | None:
    """Why TMA loads cannot feed this kernel's dot, or None: x must arrive E4M3 (a quantizing
    K loop converts x in registers), each W row set of a tile must be a run of rows (plain, a
    gated split's halves, or gate|up pairs as one box of 2*BN rows; not RoPE partners gathered
    apart or a tile of permuted columns), and rows 16-byte aligned."""
    if not given:
        return "TMA loads take an x that arrives E4M3 (row_scales); this kernel quantizes x itself"
    if layout.partner and layout.paired != "t":
        return "TMA loads need each tile's W rows in one run: this RoPE tile gathers its partner rows"
    if k_dim % 16:
        return f"TMA needs 16-byte aligned rows: K={k_dim} is not"
    return None


def _on_gpu(em: Emitter, gpu: str, interpreted: Sequence[str]) -> None:
    """``gpu`` on the GPU, the lines ``interpreted`` (FP8 emulated exactly) in Triton's interpreter."""
    em.emit("if ON_GPU:")
    em.emit(f"    {gpu}")
    em.emit("else:")
    em.indent += 1
    for line in interpreted:
        em.emit(line)
    em.indent -= 1


def _dot(em: Emitter, acc: str, gpu_w: str, load_bytes: str | None = None) -> None:
    """``acc += aq . W^T`` of one K step: on the GPU W is ``gpu_w`` (E4M3 [BN, BK], taken
    transposed); in Triton's interpreter the bytes ``wb`` (loaded by ``load_bytes`` where given)
    decoded exactly to fp32 and an fp32 dot."""
    _on_gpu(em, f"{acc} = tl.dot(aq, tl.trans({gpu_w}), {acc})",
            ([f"wb = {load_bytes}"] if load_bytes is not None else []) + DECODE.format(b="wb", out="wf").splitlines()
            + [f"{acc} = tl.dot(aq, tl.trans(wf), {acc}, input_precision=\"ieee\")"])


def _quantized_loop(em: Emitter, f: nn.Fp8LinearOp, pairs: Sequence[tuple[str, str]], x_ptr: str, x_scales: str,
                    codes: str, k_dim: int, layout: TileLayout, sched: Fp8GemmSchedule, rows: str) -> None:
    """The K loop of an input already E4M3 (``row_scales``, or ``given``) at ``x_ptr`` with its
    rows' scales at ``x_scales``: its bytes and W's straight into ``tl.dot``. On the GPU both
    pointers are cast to E4M3 so the loads feed the dot directly (Triton pipelines those); ``sx``
    is the rows' scales. With ``tma`` the tiles come through tensor descriptors (in Triton's
    interpreter, descriptors over the bytes, decoded)."""
    e = em.emit
    e(f"sx = tl.load({x_scales} + r, mask=rm, other=1.0)")
    if sched.tma:
        why = tma_applies(layout, k_dim, True)
        if why is not None:
            raise em.error(f, f"TMA loads: {why} ({sched})")
        _tma_loop(em, pairs, x_ptr, codes, k_dim, layout, rows)
        return
    for _, acc in pairs:
        e(f"{acc} = tl.zeros((BM, BN), dtype=tl.float32)")
    e("if ON_GPU:")
    e(f"    xp = {x_ptr}.to(tl.pointer_type(tl.float8e4nv))")
    e(f"    wp = {codes}.to(tl.pointer_type(tl.float8e4nv))")
    e(f"for k0 in range(0, {k_dim}, BK):")
    em.indent += 1
    a_offs = f"r[:, None] * {k_dim} + (k0 + kk)[None, :]"
    _on_gpu(em, f"aq = tl.load(xp + {a_offs}, mask=rm[:, None])  # rows past M: never stored",
            [f"ab = tl.load({x_ptr} + {a_offs}, mask=rm[:, None], other=0)",
             *DECODE.format(b="ab", out="aq").splitlines()])
    for cols, acc in pairs:
        w_offs = f"{cols}[:, None] * {k_dim} + (k0 + kk)[None, :]"
        _dot(em, acc, f"tl.load(wp + {w_offs}, mask=cn[:, None])",
             f"tl.load({codes} + {w_offs}, mask=cn[:, None], other=0)")
    em.indent -= 1


def _tma_loop(em: Emitter, pairs: Sequence[tuple[str, str]], x_ptr: str, codes: str, k_dim: int,
              layout: TileLayout, rows: str) -> None:
    """The K loop of ``_quantized_loop`` on tensor descriptors: x's [BM, BK] box and each W row
    set's [BN, BK] box (gate|up pairs: one [2 * BN, BK] box, its product split into the gate's
    and the up's columns after the loop). Boxes past M, N or K read as zeros."""
    e = em.emit
    n_rows = 2 * layout.n_tile if layout.gated else layout.n_tile
    interleaved = bool(layout.gated and layout.gated.pairs)
    box = "2 * BN" if interleaved else "BN"
    for dev, cast in (("if ON_GPU:", ".to(tl.pointer_type(tl.float8e4nv))"), ("else:", "")):
        e(dev)
        e(f"    x_desc = tl.make_tensor_descriptor({x_ptr}{cast}, shape=[{rows}, {k_dim}], strides=[{k_dim}, 1], "
          "block_shape=[BM, BK])")
        e(f"    w_desc = tl.make_tensor_descriptor({codes}{cast}, shape=[{n_rows}, {k_dim}], strides=[{k_dim}, 1], "
          f"block_shape=[{box}, BK])")
    # (W row start, accumulator) of each box
    boxes = ([("pid_n * 2 * BN", "acc2")] if interleaved else
             [("pid_n * BN", "acc")] + ([(f"{layout.n_tile} + pid_n * BN", "accp")] if len(pairs) > 1 else []))
    for _, acc in boxes:
        e(f"{acc} = tl.zeros((BM, {box}), dtype=tl.float32)" if acc == "acc2" else
          f"{acc} = tl.zeros((BM, BN), dtype=tl.float32)")
    e(f"for k0 in range(0, {k_dim}, BK):")
    em.indent += 1
    e("ab = x_desc.load([pid_m * BM, k0])")
    _on_gpu(em, "aq = ab", DECODE.format(b="ab", out="aq").splitlines())
    for start, acc in boxes:
        e(f"wb = w_desc.load([{start}, k0])")
        _dot(em, acc, "wb")
    em.indent -= 1
    if interleaved:  # columns 2j and 2j + 1 of the box: gate j and up j
        e("acc, accp = tl.split(tl.reshape(acc2, (BM, BN, 2)))")


def generate(kernel: KernelOp, name: str, schedule: Fp8GemmSchedule) -> KernelSource:
    """The kernel's Triton source under ``schedule``; CodegenError where BK does not divide K."""
    sched = schedule
    em = Emitter(kernel, name)
    norm = prologue_of(kernel)
    f = linear_of(kernel)
    x_t, y_t = f.input.type, f.result.type
    assert isinstance(x_t, TensorType) and isinstance(y_t, TensorType)
    k_dim, n_dim = x_t.shape[-1], y_t.shape[-1]
    assert isinstance(k_dim, int) and isinstance(n_dim, int)
    if k_dim % sched.bk:
        raise em.error(f, f"BK {sched.bk} must divide K = {k_dim}: {sched}")
    ops = list(kernel.body.block.ops)
    epilogue = ops[2 if norm is not None else 1:]
    # Row sums of squares of the output (norm-stats): reduced across the row block's programs
    # after the epilogue, not a tile op
    row_sums = [o for o in epilogue if isinstance(o, nn.SumSquaresOp)]
    if len(row_sums) > 1:
        raise em.error(row_sums[1], "one row-sum output per GEMM is generated")
    epilogue = [o for o in epilogue if not isinstance(o, nn.SumSquaresOp)]
    layout = tile_layout(em, f, epilogue, sched.bn)
    if sched.given and f.given is None:
        raise em.error(f, f"a schedule reading x quantized once needs the fp8_linear's given operand: {sched}")
    given = f.given if sched.given else None
    x_ptr = f"in{_idx(norm.input if norm is not None else f.input)}"
    codes, scales = f"in{_idx(f.codes)}", f"in{_idx(f.scales)}"
    g = norm_scale(kernel, norm) if norm is not None else None
    rows = em.dim(sy.product(x_t.shape[:-1]))
    e = em.emit
    pairs = emit_tile_columns(em, layout, rows)
    e("kk = tl.arange(0, BK)")
    x_tl = None if x_t.dtype is DType.f32 else TL_DTYPE[x_t.dtype]
    if f.row_scales is not None:  # x already E4M3: a plain FP8 x FP8 product
        if norm is not None:
            raise em.error(f, "a quantized input takes no norm prologue (the kernel that quantized x applies it)")
        _quantized_loop(em, f, pairs, x_ptr, f"in{_idx(f.row_scales)}", codes, k_dim, layout, sched, rows)
    elif given is not None:  # x quantized once beside it (norm applied there): the same product
        assert f.given_scales is not None
        _quantized_loop(em, f, pairs, f"in{_idx(given)}", f"in{_idx(f.given_scales)}", codes, k_dim, layout, sched,
                        rows)
    else:
        if sched.tma:
            raise em.error(f, f"TMA loads: {tma_applies(layout, k_dim, False)} ({sched})")
        # 1. the norm's row statistics; 2. the token scale: the static one, or each row's
        # largest magnitude (a pass over x); 3. the K loop on E4M3 operands
        linear_input = emit_normed_rows(em, x_ptr, k_dim, norm, g, x_tl)
        emit_row_scales(em, linear_input, k_dim, f"in{_idx(f.x_scale)}" if f.x_scale is not None else None)
        for _, acc in pairs:
            e(f"{acc} = tl.zeros((BM, BN), dtype=tl.float32)")
        e(f"for k0 in range(0, {k_dim}, BK):")
        em.indent += 1
        linear_input()
        e("a = a / sx[:, None]")
        if f.x_scale is not None:  # a static scale: values past its range saturate
            e(f"a = tl.minimum(tl.maximum(a, -{FP8_MAX!r}), {FP8_MAX!r})")
        _on_gpu(em, "aq = a.to(tl.float8e4nv)", ROUND.format(v="a", out="aq").splitlines())
        for cols, acc in pairs:
            e(f"wb = tl.load({codes} + {cols}[:, None] * {k_dim} + (k0 + kk)[None, :], mask=cn[:, None], other=0)")
            _dot(em, acc, "wb.to(tl.float8e4nv, bitcast=True)")
        em.indent -= 1
    for cols, acc in pairs:
        e(f"{acc} = {acc} * sx[:, None] * tl.load({scales} + {cols}, mask=cn, other=0)[None, :]")
    if f.bias is not None:
        for cols, acc in pairs:
            e(f"{acc} += tl.load(in{_idx(f.bias)} + {cols}, mask=cn, other=0).to(tl.float32)[None, :]")
    bind_tile_results(em, f, layout, sched.bn, fast=True)
    yields = list(ops[-1].operands) if isinstance(ops[-1], YieldOp) else []
    em.deferred.update(yields.index(o.results[0]) for o in row_sums if o.results[0] in yields)
    em.run_epilogue(layout.epilogue)
    n_tiles = -(-layout.n_tile // sched.bn)
    named: list[tuple[str, Scratch]] = []
    for op in row_sums:
        named += row_sum_squares(em, op, yields, n_tiles, rows, sched.bm)
    params = em.params()
    params += [Param(n, "scratch", index=i, dtype=sc.dtype) for i, (n, sc) in enumerate(named)]
    constexprs = {"BM": sched.bm, "BN": sched.bn, "BK": sched.bk}
    args = ", ".join([p.name for p in params] + [f"{c}: tl.constexpr" for c in constexprs])
    return KernelSource(
        name=name,
        template=TEMPLATE,
        source=module_source(name, args, em.lines),
        params=tuple(params),
        grid=(f"cdiv({rows}, {sched.bm})", f"cdiv({layout.n_tile}, {sched.bn})"),
        constexprs=constexprs,
        aliases=em.aliases,
        scratch=tuple(sc for _, sc in named),
        num_warps=sched.num_warps,
        num_stages=sched.num_stages,
    )


def _idx(v: SSAValue) -> int:
    assert isinstance(v, BlockArgument)
    return v.index
