"""The fused decode MLP template: ``y = epilogue(mid(rmsnorm(x) @ W1) @ W2)`` as one launch,
where W1 holds gate|up halves and ``mid`` is what joins them (``silu(gate) * up``), for decode
steps of up to ``GEMV_MAX_ROWS`` rows.

Each program owns BI columns of the intermediate activation ``h``: it streams its gate and up
rows of W1 (the K loop accumulates the RMSNorm statistics as the gemm template's GEMVs do),
computes its slice of ``h`` in registers, then streams the BI columns of W2 that multiply it,
BN output columns at a time, adding each partial product into the output's fp32 sums (programs
start at different column tiles, so they do not queue on the same addresses); the last program
to arrive at an output tile runs the epilogue (the residual add) on it (``partials.py``). So a
decode layer's MLP is one launch instead of two, with no pass over ``h`` in memory.

Loads, by schedule: with ``prefetch`` (the default) each loop step issues the next step's tiles
before reducing its own, and the first W2 tile is issued before the first loop, so a program
alone on its SM keeps two steps in flight; without it, one; with ``dot`` the products run on
tensor cores over a 16-row tile (rows past BM masked), so Triton's pipeliner stages the weight
tiles in shared memory over ``num_stages``. Prefetch makes the kernel markedly faster; even so,
on Hopper it is slower than the two GEMVs it replaces (hence off by default: ``--fuse-mlp``),
and the dot form is no faster (docs/performance.md).

Applies to a kernel whose body is ``[rmsnorm ->] linear (gate|up halves, no bias) -> elementwise
ops -> linear (no bias) -> elementwise epilogue``, both weights stored [N, K], with static dims
(the ``fuse-decode-mlp`` pass builds such kernels).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import BlockArgument, Operation, SSAValue

from inferx.compiler.families.common import partials
from inferx.compiler.families.common.hardware import HOPPER_SMS
from inferx.compiler.families.common.partials import add_partial, finish_tiles
from inferx.compiler.families.common.rows import GEMV_MAX_ROWS, gated_split, norm_scale
from inferx.compiler.families.common.source import module_source as _module
from inferx.compiler.families.common.tile import BINARY, TL_DTYPE, UNARY, Emitter, Tile, attr_str
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import get_float
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import DType, TensorType
from inferx.runtime.kernel_source import KernelSource

# Weight elements per tile (per matrix) a GPU program loads in one loop step: the program is alone
# on its SM (one wave of about 132), so its own loads must keep the SM's share of the bandwidth
# in flight: two 16K-element bf16 tiles are 64 KB per step of the first loop, one 32 KB of the
# second; on 16 warps, 32 elements per thread per tile. (A GEMV of many programs per SM has its
# neighbours' loads in flight as well; this one has none.)
TILE_ELEMS = 16384
WARPS = 16

@dataclass(frozen=True)
class MlpSchedule:
    bm: int  # rows per program (all of a decode bucket's rows, up to GEMV_MAX_ROWS)
    bi: int  # intermediate columns (of h) per program: cdiv(I, BI) programs per row block
    bk: int  # the K step over W1's gate and up rows
    bn: int  # the output-column step over W2
    num_warps: int = 4
    num_stages: int = 2
    prefetch: int = 1  # 1: each loop step issues the next step's loads before reducing its own
    dot: int = 0  # 1: the products on tensor cores (tl.dot, 16 rows), loads pipelined over num_stages
    defer: int = 0  # 1 (BM 1): the first loop's products summed elementwise, reduced over K once after it

    def to_dict(self) -> dict[str, int]:
        return {"bm": self.bm, "bi": self.bi, "bk": self.bk, "bn": self.bn, "num_warps": self.num_warps,
                "num_stages": self.num_stages, "prefetch": self.prefetch, "dot": self.dot,
                "defer": self.defer}


@dataclass(frozen=True)
class MlpParts:
    """The pieces of a fused MLP body in order."""

    norm: Operation | None
    up: nn.LinearOp  # the gate|up GEMM
    gate_rows: str  # "pairs" (row 2j gate j, 2j + 1 up j) or "halves" (gate rows first)
    halves: tuple[SSAValue, SSAValue]
    middle: list[Operation]  # from the halves to the second GEMM's input
    down: nn.LinearOp
    epilogue: list[Operation]  # after the second GEMM, ending with the yield
    k: int  # columns of x
    i: int  # columns of h
    n: int  # columns of y


def parts(kernel: KernelOp) -> MlpParts | str:
    """The body's pieces, or the reason the template does not implement it."""
    ops = list(kernel.body.block.ops)
    norm = ops[0] if isinstance(ops[0], nn.RMSNormOp) else None
    if isinstance(ops[0], (nn.LayerNormOp, nn.RMSNormSumSquaresOp)):
        return f"a {ops[0].name} prologue is not generated (RMSNorm only)"
    linears = [o for o in ops if isinstance(o, nn.LinearOp)]
    if len(linears) != 2:
        return f"the body has {len(linears)} linear ops, not 2"
    up, down = linears
    start = 1 if norm else 0
    if ops[start] is not up or (norm is not None and up.input != norm.results[0]):
        return "the body does not start with [rmsnorm ->] linear"
    for lin in linears:
        if lin.bias is not None:
            return "a linear with a bias is not fused"
        if attr_str(lin, "w_layout", "nk") != "nk":
            return "a weight stored [K, N] is not fused"
        if not isinstance(lin.weight, BlockArgument):
            return "a weight computed in the kernel"
    mid_ops = ops[start + 1 : ops.index(down)]
    gated = gated_split(up, mid_ops)
    if gated is None:
        return "the first linear's columns are not gate|up halves"
    middle = [o for o in mid_ops if o not in gated.ops]
    inside = {*gated.results, *(r for o in middle for r in o.results)}
    for o in middle:
        if type(o) not in UNARY and type(o) not in BINARY and not isinstance(o, (t.CastOp, t.GeluOp)):
            return f"{o.name} between the two linears is not elementwise"
        for r in o.results:
            if any(u.operation not in middle and u.operation is not down for u in r.uses):
                return f"the result of {o.name} between the two linears leaves the kernel"
    if down.input not in inside:
        return "the second linear's input is not computed from the gate|up halves"
    x_t, h_t, y_t = up.input.type, down.input.type, down.result.type
    assert isinstance(x_t, TensorType) and isinstance(h_t, TensorType) and isinstance(y_t, TensorType)
    k, i, n = x_t.shape[-1], h_t.shape[-1], y_t.shape[-1]
    if not (isinstance(k, int) and isinstance(i, int) and isinstance(n, int)):
        return "K, the intermediate width and N must be static"
    if "seq" in sy.symbols_of(sy.product(x_t.shape[:-1])):
        return "rows hold seq: a prefill MLP is two GEMMs"
    epilogue = ops[ops.index(down) + 1 :]
    return MlpParts(norm, up, "pairs" if gated.pairs else "halves", gated.results, middle, down, epilogue, k, i, n)


def applies(kernel: KernelOp) -> str | None:
    """None if this template implements the kernel, else the reason it does not."""
    p = parts(kernel)
    return p if isinstance(p, str) else None


def heuristic_schedule(kernel: KernelOp, target: str = "sm_90", rows: int | None = None) -> MlpSchedule:
    """All of the bucket's rows in one row block; BI the narrowest power of two (16 up) whose
    programs fit in one wave on 132 SMs (the 1B shape's I = 8192: 64, 128 programs; the 8B's
    14336: 128, 112 programs), 16 on the CPU (few interpreted programs either way); the K and N
    steps so that each weight tile holds ``TILE_ELEMS`` / BM elements (a step's products over BM
    rows stay in registers), on ``WARPS`` warps."""
    p = parts(kernel)
    if isinstance(p, str):
        raise ValueError(p)
    bm = 1 if not rows or rows <= 1 else min(GEMV_MAX_ROWS, 1 << (rows - 1).bit_length())
    bi = 16
    while target != "cpu" and -(-p.i // bi) > HOPPER_SMS and bi < 256:
        bi *= 2
    elems = TILE_ELEMS // bm

    def step(limit: int) -> int:
        return max(16, min(1 << (limit - 1).bit_length(), elems // bi))

    return MlpSchedule(bm, bi, step(p.k), step(p.n), num_warps=WARPS if target != "cpu" else 4)


def generate(kernel: KernelOp, name: str, schedule: MlpSchedule | None = None, target: str = "sm_90") -> KernelSource:
    """The kernel's Triton source (module docstring for the method)."""
    em = Emitter(kernel, name)
    p = parts(kernel)
    if isinstance(p, str):
        raise em.error(None, p)
    sched = schedule or heuristic_schedule(kernel, target)
    if sched.bm > GEMV_MAX_ROWS:
        raise em.error(p.down, f"the fused MLP holds at most {GEMV_MAX_ROWS} rows per program: {sched}")
    e = em.emit
    x_val = p.norm.operands[0] if p.norm is not None else p.up.input
    x_t = x_val.type
    assert isinstance(x_t, TensorType)
    rows_shape = list(x_t.shape[:-1])
    m_code = em.dim(sy.product(rows_shape))
    x_ptr, w1, w2 = (f"in{em.input_index(v)}" for v in (x_val, p.up.weight, p.down.weight))
    n_i = -(-p.i // sched.bi)  # programs per row block
    n_t = -(-p.n // sched.bn)  # output tiles
    n_tp = 1 << max(0, (n_t - 1).bit_length())

    # tl.dot takes at least 16 rows: the dot form's tiles have BMD rows, those past BM masked
    bmd = max(16, sched.bm) if sched.dot else sched.bm
    w_t = p.up.weight.type
    assert isinstance(w_t, TensorType)
    w_low = w_t.dtype in (DType.bf16, DType.f16)
    precision = "" if w_low else ', input_precision="ieee"'
    e("pid_m = tl.program_id(0)")
    e("pid_i = tl.program_id(1)")
    e(f"M = {m_code}")
    e(f"r = pid_m * BM + tl.arange(0, {bmd})")
    e("rm = r < M" if bmd == sched.bm else f"rm = (tl.arange(0, {bmd}) < BM) & (r < M)")
    e("c = pid_i * BI + tl.arange(0, BI)")
    e(f"ci = c < {p.i}")
    gate, up = ("2 * c", "2 * c + 1") if p.gate_rows == "pairs" else ("c", f"c + {p.i}")
    e(f"gr = {gate}")
    e(f"ur = {up}")
    if sched.defer and (sched.bm != 1 or sched.dot):
        raise em.error(p.up, f"deferred reductions are generated at BM 1 without dot: {sched}")
    # deferred: [BI, BK] sums of products (and [1, BK] of x's squares), reduced over K after the
    # loop, so a step is loads and FMAs only (a reduction per step also converts its result's
    # layout through shared memory, behind a barrier, three times a step in Triton 3.6)
    acc_shape = "(BI, BK)" if sched.defer else f"({bmd}, BI)"
    e(f"acc = tl.zeros({acc_shape}, dtype=tl.float32)")
    e(f"accp = tl.zeros({acc_shape}, dtype=tl.float32)")
    g = norm_scale(kernel, p.norm) if p.norm is not None else None
    if p.norm is not None:
        e("ss = tl.zeros((1, BK), dtype=tl.float32)" if sched.defer else f"ss = tl.zeros(({bmd},), dtype=tl.float32)")

    # 1. h's columns c: gate and up rows of W1 against x (and x's squares for the norm). With
    # prefetch, each step first issues the next step's loads (masked off past K), so a program's
    # loads stay in flight while it reduces the tile it holds; its first W2 tile is issued here too.
    def x_load(kk: str, km: str) -> str:
        return f"tl.load({x_ptr} + r[:, None] * {p.k} + {kk}[None, :], mask=rm[:, None] & {km}[None, :], other=0)"

    def w1_load(rows: str, kk: str, km: str) -> str:
        if sched.dot:  # [BK, BI]: the dot's right operand
            return f"tl.load({w1} + {rows}[None, :] * {p.k} + {kk}[:, None], mask=ci[None, :] & {km}[:, None], other=0)"
        return f"tl.load({w1} + {rows}[:, None] * {p.k} + {kk}[None, :], mask=ci[:, None] & {km}[None, :], other=0)"

    def w2_load(n: str, nm: str) -> str:
        if sched.dot:  # [BI, BN]
            return f"tl.load({w2} + {n}[None, :] * {p.i} + c[:, None], mask={nm}[None, :] & ci[:, None], other=0)"
        return f"tl.load({w2} + {n}[:, None] * {p.i} + c[None, :], mask={nm}[:, None] & ci[None, :], other=0)"

    loads = (("a", x_load), ("wg", lambda kk, km: w1_load("gr", kk, km)), ("wu", lambda kk, km: w1_load("ur", kk, km)))
    if sched.prefetch:
        e(f"nt = pid_i % {n_t}")
        e("n = nt * BN + tl.arange(0, BN)")
        e(f"v = {w2_load('n', f'(n < {p.n})')}")
        e("kk = tl.arange(0, BK)")
        e(f"km = kk < {p.k}")
        for var, load in loads:
            e(f"{var} = {load('kk', 'km')}")
    e(f"for k0 in range(0, {p.k}, BK):")
    em.indent += 1
    if sched.prefetch:
        e("kn = k0 + BK + tl.arange(0, BK)")
        e(f"knm = kn < {p.k}")
        for var, load in loads:
            e(f"{var}_n = {load('kn', 'knm')}")
    else:
        e("kk = k0 + tl.arange(0, BK)")
        e(f"km = kk < {p.k}")
        for var, load in loads:
            e(f"{var} = {load('kk', 'km')}")
    e("af = a.to(tl.float32)")
    if p.norm is not None:
        e("ss += af * af" if sched.defer else "ss += tl.sum(af * af, 1)")
    if g is not None:
        e(f"af = af * tl.load(in{em.input_index(g)} + kk, mask=km, other=0).to(tl.float32)[None, :]")
    if sched.dot:  # x's rows in the weight's dtype (the products in fp32 on tensor cores)
        e(f"ab = af.to({TL_DTYPE[w_t.dtype]})" if w_low else "ab = af")
    for acc, w in (("acc", "wg"), ("accp", "wu")):
        if sched.dot:
            e(f"{acc} += tl.dot(ab, {w}{'' if w_low else '.to(tl.float32)'}{precision})")
        elif sched.defer:
            e(f"{acc} += {w}.to(tl.float32) * af")
        elif sched.bm == 1:
            e(f"{acc} += tl.sum({w}.to(tl.float32) * af, 1)[None, :]")
        else:
            e(f"{acc} += tl.sum({w}.to(tl.float32)[None, :, :] * af[:, None, :], 2)")
    if sched.prefetch:
        e("kk, km = kn, knm")
        e("a, wg, wu = a_n, wg_n, wu_n")
    em.indent -= 1
    if sched.defer:
        e("acc = tl.sum(acc, 1)[None, :]")
        e("accp = tl.sum(accp, 1)[None, :]")
        if p.norm is not None:
            e("ss = tl.sum(ss, 1)")
    if p.norm is not None:
        e(f"scale = tl.rsqrt(ss / {p.k} + {get_float(p.norm.attributes, 'eps')!r})")
        e("acc = acc * scale[:, None]")
        e("accp = accp * scale[:, None]")
    lead = em.unravel("r[:, None]", rows_shape)
    h_mask = "(rm[:, None] & ci[None, :])"
    for expr, v in zip(("acc", "accp"), p.halves, strict=True):
        em.values[v] = Tile(expr, [*lead, "c[None, :]"], h_mask, v.type)  # type: ignore[arg-type]
    for op in p.middle:
        em.visit(op)
    h_t = p.down.input.type
    assert isinstance(h_t, TensorType)
    # h as the unfused kernels would have stored it, and zero outside the tile
    e(f"h = tl.where({h_mask}, ({em.values[p.down.input].expr}).to({TL_DTYPE[h_t.dtype]}).to(tl.float32), 0.0)")
    if sched.dot:
        e(f"hb = h.to({TL_DTYPE[w_t.dtype]})" if w_low else "hb = h")

    # 2. h's columns c against W2's columns c, BN outputs at a time, added into the sums
    e(f"for t0 in range({n_t}):")
    em.indent += 1
    if sched.prefetch:
        e(f"nn = ((pid_i + t0 + 1) % {n_t}) * BN + tl.arange(0, BN)")
        e(f"v_n = {w2_load('nn', f'((nn < {p.n}) & (t0 + 1 < {n_t}))')}")
    else:
        e(f"nt = (pid_i + t0) % {n_t}")
        e("n = nt * BN + tl.arange(0, BN)")
        e(f"v = {w2_load('n', f'(n < {p.n})')}")
    e(f"nm = n < {p.n}")
    if sched.dot:
        e(f"part = tl.dot(hb, v{'' if w_low else '.to(tl.float32)'}{precision})")
    elif sched.bm == 1:
        e("part = tl.sum(v.to(tl.float32) * h, 1)[None, :]")
    else:
        e("part = tl.sum(v.to(tl.float32)[None, :, :] * h[:, None, :], 2)")
    add_partial(em, "part", f"r[:, None] * {p.n} + n[None, :]", "rm[:, None] & nm[None, :]")
    if sched.prefetch:
        e("n, v = nn, v_n")
    em.indent -= 1

    # 3. if this program is its row block's last: the epilogue, then the sums and the counter zeroed
    e(f"tt = tl.arange(0, {n_tp})")
    finish_tiles(em, counter="pid_m", tiles="tt", live=f"tt < {n_t}", arrivals=n_i, n=p.n,
                 first_row="pid_m * BM", rows="BM", rows_shape=rows_shape, result=p.down.result, epilogue=p.epilogue)

    blocks = f"((({m_code}) + {sched.bm - 1}) // {sched.bm})"
    ws_params, scratch = partials.scratch(f"{blocks} * {sched.bm}", p.n, blocks)
    params = em.params() + ws_params
    constexprs = {"BM": sched.bm, "BI": sched.bi, "BK": sched.bk, "BN": sched.bn}
    args = ", ".join([q.name for q in params] + [f"{c}: tl.constexpr" for c in constexprs])
    return KernelSource(
        name=name,
        template="mlp",
        source=_module(name, args, em.lines),
        params=tuple(params),
        grid=(f"cdiv({m_code}, {sched.bm})", str(n_i)),
        constexprs=constexprs,
        aliases=em.aliases,
        scratch=scratch,
        num_warps=sched.num_warps,
        num_stages=sched.num_stages,
    )
