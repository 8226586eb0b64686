"""The int4 GEMM family (qgemm) and quantized artifacts: the kernel against the interpreter's
``ix.qlinear`` in Triton's interpreter, a quantized tiny Llama compiled for the cpu target against
the reference session of the same quantized program (fp32), the packed codes in the artifact,
the fused kernel counts, and the ``quant`` compile option."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers as T

import inferx
from inferx.compiler import pipeline
from inferx.compiler.families import family
from inferx.compiler.families.common import int4
from inferx.compiler.families.common.errors import CodegenError
from inferx.compiler.families.interface import ScheduleError
from inferx.compiler.families.qgemm import codegen
from inferx.compiler.families.qgemm.heuristic import heuristic_schedule
from inferx.compiler.families.qgemm.schedule import QGemmSchedule
from inferx.compiler.interpreter.context import KernelContext
from inferx.compiler.interpreter.kernels import qlinear
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.quant import QuantizedWeight, Scheme, pack_int4
from inferx.compiler.ir.textio import parse_module
from inferx.compiler.options import CompileError, CompileOptions
from inferx.compiler.quant.store import quantize_program
from inferx.program import Program
from inferx.runtime.plan import eval_dim
from inferx.runtime.triton_kernels import grid, load_kernel

TOL = 1e-4  # relative to the largest logit (fp32 throughout)
MAX_SEQ_LEN = 32
PROMPT = [5, 17, 3, 88, 41, 9, 60, 2, 33, 71, 14]
STEPS = 3


def _rtn(w: np.ndarray, scheme: Scheme, name: str, scale_dtype: str) -> QuantizedWeight:
    """Round-to-nearest written here, independently of the library's quantizers: asymmetric
    (min and max of each group) or symmetric (the group's largest magnitude maps to -8)."""
    n, k = w.shape
    g = w.reshape(n, k // scheme.group, scheme.group).astype(np.float32)
    if scheme.symmetric:
        s = np.abs(g).max(axis=2) / 8
        s = np.where(s > 0, s, 1.0).astype(np.float32)
        q = np.clip(np.rint(g / s[:, :, None]) + 8, 0, 15).astype(np.uint8).reshape(n, k)
        return QuantizedWeight(scheme, q, s)
    lo, hi = g.min(axis=2), g.max(axis=2)
    s = np.where(hi > lo, (hi - lo) / 15, 1.0).astype(np.float32)
    q = np.clip(np.rint((g - lo[:, :, None]) / s[:, :, None]), 0, 15).astype(np.uint8).reshape(n, k)
    return QuantizedWeight(scheme, q, s, lo.astype(np.float32))


# --- the kernel -----------------------------------------------------------------------------


def _qlinear_kernel(m: int, k: int, n: int, group: int, mins: bool, col: bool, dtype: str = "f32") -> KernelOp:
    """A qgemm kernel of one ``ix.qlinear`` with static shapes, parsed from IR text."""
    g = k // group
    types = [f"!ix.tensor<[{m}, {k}], {dtype}>", f"!ix.tensor<[{n}, {k}], i4>", f"!ix.tensor<[{n}, {g}], {dtype}>"]
    if mins:
        types.append(f"!ix.tensor<[{n}, {g}], {dtype}>")
    if col:
        types.append(f"!ix.tensor<[{k}], {dtype}>")
    y = f"!ix.tensor<[{m}, {n}], {dtype}>"
    names = [f"%a{i}" for i in range(len(types))]
    args = ", ".join(f"%x{i}: {t}" for i, t in enumerate(types))
    block = ", ".join(f"{a}: {t}" for a, t in zip(names, types, strict=True))
    extra = (" mins %a3" if mins else "") + (f" col_scale %a{len(types) - 1}" if col else "")
    extra_t = (f" mins {types[3]}" if mins else "") + (f" col_scale {types[-1]}" if col else "")
    operands = ", ".join(f"%x{i}" for i in range(len(types)))
    q_types = f"{types[0]}, {types[1]}, {types[2]}{extra_t} -> {y}"
    text = f"""
    func.func @f({args}) -> {y} {{
      %y = ix.kernel "qgemm"({operands}) {{name = "k0"}} : ({", ".join(types)}) -> {y} {{
      ^bb0({block}):
        %q = ix.qlinear %a0, %a1, %a2{extra} {{group = {group} : i64}} : {q_types}
        ix.yield %q : {y}
      }}
      func.return %y : {y}
    }}
    """
    module, _ = parse_module(text)
    return next(o for o in module.walk() if isinstance(o, KernelOp))


KERNEL_CASES = [
    # (M, K, N, group, mins, col_scale, dtype, schedule or None for the cpu heuristic: bm, bn, bk
    # [, warps, stages, split_k, prefetch])
    (1, 64, 33, 32, True, False, "f32", None),
    (5, 64, 33, 32, False, False, "f32", None),
    (33, 128, 17, 64, True, True, "f32", None),
    (33, 128, 17, 64, False, True, "f32", None),
    (5, 128, 33, 128, True, False, "f32", (16, 16, 32)),  # BK below the group: four steps per group
    (1, 64, 17, 32, False, True, "f32", (1, 16, 32)),  # GEMV mode
    (5, 64, 33, 64, True, True, "f32", (4, 32, 16)),  # GEMV mode, several rows per program
    (5, 64, 33, 32, True, True, "f16", None),  # the dot on fp16 operands: codes as 1024 + q, the rest after it
    (5, 64, 33, 32, False, False, "f16", (16, 16, 32)),  # ... symmetric: -(1024 + 8) * scale * sum(x)
    (3, 128, 33, 32, True, True, "f32", (1, 16, 128)),  # GEMV at BM 1: a step of four groups, deferred sums
    (2, 256, 17, 32, False, False, "f32", (1, 8, 64)),  # ... two groups a step, symmetric
    (2, 128, 33, 64, True, False, "f16", (1, 16, 32)),  # ... half a group a step
    (70, 128, 33, 64, True, True, "f16", (64, 16, 32)),  # a prefill tile: W dequantized, col scales on W
    (6, 64, 40, 32, False, False, "f16", (64, 32, 16)),  # ... symmetric, two steps a group
    (1, 256, 33, 32, True, True, "f32", (1, 16, 64, 4, 2, 1, 1)),  # GEMV at BM 1, loads a step ahead
    (2, 128, 17, 128, False, False, "f16", (1, 8, 32, 4, 2, 1, 1)),  # ... four steps a group, symmetric
    (5, 256, 33, 64, True, True, "f32", (16, 16, 32, 4, 2, 4)),  # split-K: four slices of two groups
    (5, 128, 40, 32, False, False, "f16", (16, 32, 32, 4, 2, 2)),  # ... two slices, codes as 1024 + q
]
F16_TOL = 2e-3  # W rounded to fp16 for the dot, and y stored in fp16


@pytest.mark.parametrize("case", KERNEL_CASES, ids=lambda c: "m{}-k{}-n{}-g{}-mins{:d}-col{:d}-{}-{}".format(*c))
def test_qgemm_kernel_matches_the_interpreters_qlinear(case: tuple[Any, ...]) -> None:
    m, k, n, group, mins, col, dtype, sched = case
    kernel = _qlinear_kernel(m, k, n, group, mins, col, dtype)
    knobs = dict(zip(("split_k", "prefetch"), sched[5:], strict=False)) if sched else {}
    schedule = heuristic_schedule(kernel, "cpu") if sched is None else QGemmSchedule(*sched[:5], **knobs)
    ks = codegen.generate(kernel, "kernel", schedule)
    np_dtype = np.float32 if dtype == "f32" else np.float16
    rng = np.random.default_rng(m * 1000 + k + n)
    x = rng.standard_normal((m, k)).astype(np_dtype)
    q = rng.integers(0, 16, (n, k), dtype=np.uint8)
    scales = (rng.random((n, k // group)) * 0.1 + 0.01).astype(np_dtype)
    ins = [x, (q.astype(np.int16) - 8).astype(np.int8), scales]
    if mins:
        ins.append(-(rng.random((n, k // group)) * 0.5).astype(np_dtype))
    if col:
        ins.append((rng.random(k) + 0.5).astype(np_dtype))
    op = kernel.body.block.first_op
    assert isinstance(op, nn.QLinearOp)
    (want,) = qlinear(op, ins, KernelContext(env={}, weights={}))
    # the kernel reads the codes as stored in an artifact: q two to a byte
    tensors = [torch.from_numpy(a) for a in [x, pack_int4(q), *ins[2:]]]
    out = torch.empty((m, n), dtype=torch.float32 if dtype == "f32" else torch.float16)
    dtypes = {"f32": torch.float32, "i32": torch.int32}
    scratch = [torch.zeros([eval_dim(d, {}) for d in sc.shape], dtype=dtypes[sc.dtype])
               for sc in ks.scratch]  # split-K's partials and counters
    fn = load_kernel(ks, interpret=True)
    fn[grid(ks, {})](*tensors, out, *scratch, **ks.constexprs, num_warps=ks.num_warps, num_stages=ks.num_stages)
    err = float(np.abs(out.float().numpy() - want).max())
    tol = (1e-4 if dtype == "f32" else F16_TOL) * max(1.0, float(np.abs(want).max()))
    repro = f"repro: pytest tests/test_qgemm.py -k 'm{m}-k{k}-n{n}-g{group}' ({dtype}, {schedule})"
    assert err <= tol, f"max abs error {err:.3g} > {tol:.3g}\n{repro}"


def test_schedule_rules() -> None:
    parse = family("qgemm").parse_schedule
    ok = {"bm": 16, "bn": 32, "bk": 32, "num_warps": 4, "num_stages": 2}
    assert parse(ok) == QGemmSchedule(16, 32, 32)
    assert parse({**ok, "bm": 1, "bn": 8}).gemv
    for bad, rule in (
        ({**ok, "bm": 12}, "powers of two"),
        ({**ok, "bm": 8, "bk": 256}, "bk must be 16..128"),
        ({**ok, "bn": 8}, "at least 16 on the dot path"),
        ({**ok, "num_warps": 3}, "num_warps"),
        ({**ok, "swizzle": 2}, "fields must be"),
        ({**ok, "split_k": 3}, "split_k must be a power of two"),
        ({**ok, "bm": 1, "split_k": 2}, "not in GEMV mode"),
        ({**ok, "prefetch": 1}, "1 only at bm 1"),
    ):
        with pytest.raises(ScheduleError, match=rule):
            parse(bad)
    kernel = _qlinear_kernel(4, 64, 16, 32, True, False)
    with pytest.raises(CodegenError, match="BK 64 must divide the quantization group 32"):
        codegen.generate(kernel, "kernel", QGemmSchedule(16, 16, 64))
    with pytest.raises(CodegenError, match="BK 48 must divide the quantization group 32 or be a multiple"):
        codegen.generate(kernel, "kernel", QGemmSchedule(1, 16, 48))
    with pytest.raises(CodegenError, match="BK 128 spans groups, so it must divide K = 64"):
        codegen.generate(kernel, "kernel", QGemmSchedule(1, 16, 128))
    assert parse({**ok, "bm": 1, "bk": 1024}).deferred
    assert parse({**ok, "split_k": 4}).to_dict() == {**ok, "split_k": 4}  # on: stated; off: left out
    assert parse({**ok, "split_k": 1}).to_dict() == ok
    assert parse({**ok, "bm": 1, "prefetch": 1}).prefetch == 1
    with pytest.raises(CodegenError, match="split-K 4 x BK 32 must divide K"):
        codegen.generate(kernel, "kernel", QGemmSchedule(16, 16, 32, split_k=4))
    with pytest.raises(ScheduleError, match="or up to 2048 at bm 1"):
        parse({**ok, "bm": 1, "bk": 4096})


# --- a quantized model, compiled -------------------------------------------------------------


@pytest.fixture(scope="module")
def model() -> T.LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return T.LlamaForCausalLM(cfg).eval()


# The schemes compiled, each with the linears it leaves in float: the down projections' K (96)
# is not a multiple of 64, so under int4-g64 they stay ix.linear (a program mixing both kinds).
SCHEMES = {"int4-g32": "", "int4-g64-sym": "*down_proj*"}


def _quantized(model: T.LlamaForCausalLM, scheme: str) -> Program:
    program = inferx.import_model(model, dtype="f32")
    return quantize_program(program, scheme, exclude=SCHEMES[scheme], quantize=_rtn)


@pytest.fixture(scope="module", params=list(SCHEMES))
def compiled(request: pytest.FixtureRequest, model: T.LlamaForCausalLM,
             tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Program, Path]:
    scheme = request.param
    program = _quantized(model, scheme)
    out = tmp_path_factory.mktemp("qgemm") / scheme
    path = inferx.compile(program, target="cpu", output=out, max_seq_len=MAX_SEQ_LEN, max_batch=2)
    return scheme, program, path


def _assert_close(got: Any, want: Any, what: str, repro: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}\n{repro}"
    err = float(np.abs(got - want).max())
    tol = TOL * max(1.0, float(np.abs(want).max()))
    assert err <= tol, f"{what}: max abs error {err:.3g} > {tol:.3g}\n{repro}"


def test_cpu_session_matches_the_reference_session(compiled: tuple[str, Program, Path]) -> None:
    scheme, program, path = compiled
    repro = f"repro: pytest tests/test_qgemm.py -k 'matches_the_reference and {scheme}'"
    cpu = inferx.load(path, device="cpu")
    ref = program.reference_session(max_batch=1, max_context=MAX_SEQ_LEN)
    ids = np.array([PROMPT])
    got, want = cpu.prefill(ids), ref.prefill(ids)
    _assert_close(got, want, "prefill logits", repro)
    tokens: list[tuple[int, int]] = []
    got_last, want_last = np.asarray(got)[0, -1], np.asarray(want)[0, -1]
    for step in range(STEPS):
        tokens.append((int(got_last.argmax()), int(want_last.argmax())))
        tok = np.array([[tokens[-1][1]]])
        got, want = cpu.decode(tok), ref.decode(tok)
        _assert_close(got, want, f"decode step {step}", repro)
        got_last, want_last = np.asarray(got)[0, -1], np.asarray(want)[0, -1]
    assert [a for a, _ in tokens] == [b for _, b in tokens], f"greedy tokens differ: {tokens}\n{repro}"


def _norm_gated_kernel(m: int, k: int, n2: int, group: int, dt: str = "f32") -> KernelOp:
    """A qgemm kernel of ``silu(gate) * up`` over the halves of a qlinear behind an RMSNorm (a
    decode layer's gate|up): the template's prologue and gated epilogue together."""
    g, n = k // group, n2 // 2
    x, w, cs = f"!ix.tensor<[{m}, {k}], {dt}>", f"!ix.tensor<[{k}], {dt}>", f"!ix.tensor<[{n2}, {k}], i4>"
    s, y2, y = f"!ix.tensor<[{n2}, {g}], {dt}>", f"!ix.tensor<[{m}, {n2}], {dt}>", f"!ix.tensor<[{m}, {n}], {dt}>"
    text = f"""
    func.func @f(%x0: {x}, %x1: {w}, %x2: {cs}, %x3: {s}, %x4: {s}) -> {y} {{
      %y = ix.kernel "qgemm"(%x0, %x1, %x2, %x3, %x4) {{name = "k0"}} : ({x}, {w}, {cs}, {s}, {s}) -> {y} {{
      ^bb0(%a0: {x}, %a1: {w}, %a2: {cs}, %a3: {s}, %a4: {s}):
        %h = ix.rmsnorm %a0, %a1 {{eps = 1.0e-05 : f64}} : ({x}, {w}) -> {x}
        %q = ix.qlinear %h, %a2, %a3 mins %a4 {{group = {group} : i64}} : {x}, {cs}, {s} mins {s} -> {y2}
        %gt, %up = ix.split %q {{dim = -1 : i64}} : ({y2}) -> ({y}, {y})
        %a = ix.silu %gt : ({y}) -> {y}
        %r = ix.mul %a, %up : ({y}, {y}) -> {y}
        ix.yield %r : {y}
      }}
      func.return %y : {y}
    }}
    """
    module, _ = parse_module(text)
    return next(o for o in module.walk() if isinstance(o, KernelOp))


@pytest.mark.parametrize("sched, dtype", [((16, 16, 32), "f32"), ((4, 16, 32), "f32"), ((1, 8, 64), "f32"),
                                          ((1, 16, 32), "f32"), ((64, 16, 32), "f16")],
                         ids=["dot", "gemv-rows", "deferred-2-groups", "deferred-1-group", "prefill-tile-f16"])
def test_qgemm_norm_prologue_and_gated_epilogue(sched: tuple[int, int, int], dtype: str) -> None:
    """RMSNorm statistics summed from the kernel's own x loads and applied after the K loop, the
    norm's weight scaling x (W on a prefill tile), and silu(gate) * up paired in registers from two
    accumulators, in each K loop of the template, against numpy's norm, the interpreter's qlinear
    and SiLU."""
    m, k, n2, group = 3, 128, 66, 32
    kernel = _norm_gated_kernel(m, k, n2, group, dtype)
    assert codegen.applies(kernel) is None
    ks = codegen.generate(kernel, "kernel", QGemmSchedule(*sched))
    np_dtype = np.float32 if dtype == "f32" else np.float16
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((m, k)) * 3).astype(np_dtype)
    w = (rng.random(k) + 0.5).astype(np_dtype)
    q = rng.integers(0, 16, (n2, k), dtype=np.uint8)
    scales = (rng.random((n2, k // group)) * 0.1 + 0.01).astype(np_dtype)
    mins = -(rng.random((n2, k // group)) * 0.5).astype(np_dtype)
    xf = x.astype(np.float32)
    h = xf / np.sqrt(np.mean(xf * xf, axis=-1, keepdims=True) + 1e-5) * w.astype(np.float32)
    op = codegen.qlinear_of(kernel)
    (y2,) = qlinear(op, [h, (q.astype(np.int16) - 8).astype(np.int8), scales.astype(np.float32),
                         mins.astype(np.float32)], KernelContext(env={}, weights={}))
    gate, up = y2[:, : n2 // 2], y2[:, n2 // 2 :]
    want = gate / (1 + np.exp(-gate)) * up
    tensors = [torch.from_numpy(a) for a in [x, w, pack_int4(q), scales, mins]]
    out = torch.empty((m, n2 // 2), dtype=torch.float32 if dtype == "f32" else torch.float16)
    fn = load_kernel(ks, interpret=True)
    fn[grid(ks, {})](*tensors, out, **ks.constexprs, num_warps=ks.num_warps, num_stages=ks.num_stages)
    err = float(np.abs(out.float().numpy() - want).max())
    tol = (1e-4 if dtype == "f32" else F16_TOL) * max(1.0, float(np.abs(want).max()))
    repro = f"repro: pytest tests/test_qgemm.py -k norm_prologue ({sched}, {dtype})"
    assert err <= tol, f"max abs error {err:.3g} > {tol:.3g}\n{repro}"


def test_gpu_schedules_match_in_the_interpreter(model: T.LlamaForCausalLM, tmp_path: Path) -> None:
    """The sm_90 heuristic's schedules on a cpu artifact (``schedules="sm_90"``) against the
    reference session, one sequence and three: GEMV mode for one decode row (its loads a step
    ahead), the dot path with split-K for the batch bucket of 4 (the last program of each tile
    runs the epilogue: RoPE and the KV write, the gated product, the residual), the dot path for
    prefill."""
    program = _quantized(model, "int4-g32")
    path = inferx.compile(program, target="cpu", schedules="sm_90", output=tmp_path / "a",
                          max_seq_len=MAX_SEQ_LEN, max_batch=3)
    sources = [p.read_text() for p in (path / "kernels").glob("qgemm_*.py")]
    assert any("acc3 = tl.fma(" in s and "b0_n = tl.load(" in s for s in sources)
    assert any("tl.dot(" in s for s in sources)
    # the q|k|v GEMV's tiles hold RoPE partners: the partner accumulator is a swap of halves
    assert any("acc3 = tl.fma(" in s and "accp = tl.reshape(tl.flip(" in s for s in sources)
    # q|k|v, o and gate|up of the batch bucket (down's K of 96 is three steps: no split)
    split = [s for s in sources if "pid_k = tl.program_id(2)" in s]
    assert len(split) >= 3 and any("accp" in s for s in split), len(split)
    cpu = inferx.load(path, device="cpu")
    for batch in (1, 3):
        repro = f"repro: pytest tests/test_qgemm.py -k gpu_schedules (batch {batch})"
        ref = program.reference_session(max_batch=batch, max_context=MAX_SEQ_LEN)
        cpu.reset()
        ids = np.array([PROMPT[i:] + PROMPT[:i] for i in range(batch)])
        want = ref.prefill(ids)
        _assert_close(cpu.prefill(ids), want, "prefill logits", repro)
        for _ in range(2):
            tok = np.asarray(want)[:, -1].argmax(-1)[:, None]
            want = ref.decode(tok)
            _assert_close(cpu.decode(tok), want, "decode logits", repro)


def test_column_scales_reach_the_kernels(model: T.LlamaForCausalLM, tmp_path: Path) -> None:
    """A program whose qlinears read a column scale (as AWQ's do) compiles and computes what its
    reference session computes."""

    def scaled(w: np.ndarray, scheme: Scheme, name: str, scale_dtype: str) -> QuantizedWeight:
        cs = np.linspace(0.5, 2.0, w.shape[1]).astype(np.float32)
        qw = _rtn(w / cs[None, :], scheme, name, scale_dtype)
        qw.col_scale = cs
        return qw

    program = quantize_program(inferx.import_model(model, dtype="f32"), "int4-g32", quantize=scaled, col_scale=True)
    assert all(o.col_scale is not None for o in program.module.walk() if isinstance(o, nn.QLinearOp))
    path = inferx.compile(program, target="cpu", output=tmp_path / "a", max_seq_len=MAX_SEQ_LEN, max_batch=1)
    ids = np.array([PROMPT])
    want = program.reference_session(max_batch=1, max_context=MAX_SEQ_LEN).prefill(ids)
    _assert_close(inferx.load(path, device="cpu").prefill(ids), want, "prefill logits",
                  "repro: pytest tests/test_qgemm.py -k column_scales")


def test_codes_are_stored_packed_and_run_on_qgemm(compiled: tuple[str, Program, Path]) -> None:
    scheme, program, path = compiled
    manifest = json.loads((path / "manifest.json").read_text())
    codes = {k: w for k, w in manifest["weights"].items() if k.endswith(".codes")}
    per_layer = 1 if SCHEMES[scheme] else 2  # o and (int4-g32) down: q|k|v and gate|up merged are derived.*
    assert len(codes) == per_layer * 2, sorted(codes)
    for name, w in codes.items():
        n, k = w["shape"]
        assert w["dtype"] == "i4" and (path / w["file"]).stat().st_size == n * k // 2, (name, w)
        scales = manifest["weights"][name.removesuffix("codes") + "scales"]
        assert scales["dtype"] == "f32" and scales["shape"] == [n, k // int(scheme.split("-g")[1][:2])]
    assert any(k.endswith(".mins") for k in manifest["weights"]) == (not scheme.endswith("-sym"))
    templates = [k["template"] for k in manifest["kernels"].values()]
    assert "qgemm" in templates and templates.count("gemm") >= 1  # the float LM head


def test_quantized_layers_fuse_into_one_kernel_per_linear(model: T.LlamaForCausalLM) -> None:
    """merge-gemms makes q|k|v and gate|up one qlinear each. So a quantized layer has four
    qlinears, each the anchor of a qgemm kernel with its prologue (the RMSNorm before q|k|v and
    gate|up) and epilogue (RoPE and the KV writes, the residual add, silu(gate) * up): 5 kernels
    per decode layer, as the float program has."""

    def kernels(program: Program) -> dict[str, int]:
        opts = CompileOptions(target="cpu", dtype="f32", max_seq_len=MAX_SEQ_LEN, max_batch=2)
        for _, spec in pipeline.phases(opts):
            pipeline.run(spec, program)
        decode = next(f for f in program.module.ops if f.sym_name.data == "decode")  # type: ignore[attr-defined]
        out: dict[str, int] = {}
        for o in decode.body.block.ops:
            if isinstance(o, KernelOp):
                out[o.template.data] = out.get(o.template.data, 0) + 1
        return out

    layers = model.config.num_hidden_layers
    floats = kernels(inferx.import_model(model, dtype="f32"))
    quantized = kernels(_quantized(model, "int4-g32"))
    assert floats == {"gather": 1, "gemm": 4 * layers + 1, "attention": layers}, floats
    assert quantized == {"gather": 1, "gemm": 1, "qgemm": 4 * layers, "attention": layers}, quantized


def test_the_quant_option_quantizes_after_import(model: T.LlamaForCausalLM, tmp_path: Path) -> None:
    """``quant=`` runs the quantize pass and the library's round-to-nearest: the artifact computes
    what the reference session of ``quantize_program`` with the same scheme computes."""
    pytest.importorskip("inferx.compiler.quant.rtn")
    path = inferx.compile(model, target="cpu", dtype="f32", quant="int4-g32", output=tmp_path / "a",
                          max_seq_len=MAX_SEQ_LEN, max_batch=1)
    manifest = json.loads((path / "manifest.json").read_text())
    assert any(w["dtype"] == "i4" for w in manifest["weights"].values())
    program = quantize_program(inferx.import_model(model, dtype="f32"), "int4-g32")
    ids = np.array([PROMPT])
    want = program.reference_session(max_batch=1, max_context=MAX_SEQ_LEN).prefill(ids)
    _assert_close(inferx.load(path, device="cpu").prefill(ids), want, "prefill logits",
                  "repro: pytest tests/test_qgemm.py -k quant_option")


def test_a_group_that_does_not_divide_k_is_a_compile_error(model: T.LlamaForCausalLM, tmp_path: Path) -> None:
    with pytest.raises(CompileError, match=r"quant int4-g64: .*down_proj.weight: K = 96 is not a multiple"):
        inferx.compile(model, target="cpu", dtype="f32", quant="int4-g64", output=tmp_path / "a",
                       max_seq_len=MAX_SEQ_LEN, max_batch=1)
    assert not (tmp_path / "a").exists()


def test_compile_options_refuse_an_unknown_scheme() -> None:
    with pytest.raises(CompileError, match="unknown quant scheme 'int4-g16'"):
        CompileOptions(target="cpu", quant="int4-g16")
    with pytest.raises(CompileError, match="unknown quant scheme 'int8'"):
        inferx.compile("unused", target="cpu", output="unused", quant="int8")


def _q4_gguf(path: Path) -> Path:
    """A one-layer llama GGUF whose seven linears are Q4_0 (``gguf.quants.quantize``); the rest F32."""
    import gguf
    from gguf_files import add_llama_metadata, llama_shapes

    shapes = llama_shapes(64, 4, 2, 96, 128)
    w = gguf.GGUFWriter(str(path), "llama")
    add_llama_metadata(w, context=64, hidden=64, heads=4, kv=2, inter=96)
    rng = np.random.default_rng(0)
    for name, shape in shapes.items():
        x = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        if len(shape) == 2 and name.startswith("blk."):
            q = gguf.GGMLQuantizationType.Q4_0
            w.add_tensor(name, gguf.quants.quantize(x, q), raw_dtype=q)
        else:
            w.add_tensor(name, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_quant_gguf_keeps_the_files_int4_weights(tmp_path: Path) -> None:
    """``quant="gguf"``: a GGUF file's Q4_0 linears run on qgemm with the file's codes, and the
    artifact computes what the same file compiled to float (its weights dequantized) computes."""
    src = _q4_gguf(tmp_path / "q4.gguf")
    opts = dict(target="cpu", dtype="f32", max_seq_len=MAX_SEQ_LEN, max_batch=1)
    native = inferx.compile(src, quant="gguf", output=tmp_path / "native", **opts)
    floats = inferx.compile(src, output=tmp_path / "float", **opts)
    weights = json.loads((native / "manifest.json").read_text())["weights"]
    assert sum(w["dtype"] == "i4" for w in weights.values()) == 4  # q|k|v, o, gate|up, down
    ids = np.array([PROMPT])
    want = inferx.load(floats, device="cpu").prefill(ids)
    _assert_close(inferx.load(native, device="cpu").prefill(ids), want, "prefill logits",
                  "repro: pytest tests/test_qgemm.py -k quant_gguf")


def test_quant_gguf_needs_a_gguf_file(model: T.LlamaForCausalLM, tmp_path: Path) -> None:
    want = r"quant gguf keeps a GGUF file's 4-bit weights: the model \(a LlamaForCausalLM\) is not a .gguf file"
    with pytest.raises(CompileError, match=want):
        inferx.compile(model, target="cpu", dtype="f32", quant="gguf", output=tmp_path / "a",
                       max_seq_len=MAX_SEQ_LEN, max_batch=1)
    assert not (tmp_path / "a").exists()


def _emulate_ptx(asm: str, word: int) -> dict[str, int]:
    """The registers ``asm`` (mov, and, shr and prmt on .b32, as UNPACK_ASM uses them) leaves,
    its input ``$8`` being ``word``: the PTX semantics written out in Python."""
    regs: dict[str, int] = {"$8": word}

    def val(tok: str) -> int:
        return int(tok, 0) if tok[0].isdigit() else regs[tok]

    for stmt in asm.strip('"{} ').split(";"):
        parts = stmt.replace(",", " ").split()
        if not parts or parts[0] == ".reg":
            continue
        op, dst, *src = parts
        a = [val(s) for s in src]
        if op == "mov.b32":
            regs[dst] = a[0]
        elif op == "and.b32":
            regs[dst] = a[0] & a[1]
        elif op == "shr.u32":
            regs[dst] = a[0] >> a[1]
        elif op == "prmt.b32":  # d.byte i = byte (selector nibble i) of the 8 bytes {b, a}
            pool = (a[1] << 32) | a[0]
            regs[dst] = sum(((pool >> (8 * ((a[2] >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4))
        else:
            raise AssertionError(f"unexpected PTX {op}")
    return regs


@pytest.mark.parametrize("magic, byte", [(0x4B000000, 0), (0x43000000, 2)])
def test_the_unpack_ptx_gives_the_interpreters_values(magic: int, byte: int) -> None:
    """The unpacking PTX (GPU builds) and its integer form (the interpreter) agree: each of four
    bytes gives its low nibble in $0-$3 and its high nibble in $4-$7, placed at ``byte`` of
    ``magic``'s bits: the one-row GEMV's 2^23 + q, the prefill tile's 128 + q."""
    rng = np.random.default_rng(0)
    asm = int4.unpack_asm(magic, byte)
    assert asm == (int4.UNPACK_ASM if byte == 0 else int4.UNPACK_ASM_128)
    for word in [0, 0xFFFFFFFF, 0x12345678, *rng.integers(0, 2**32, 200).tolist()]:
        regs = _emulate_ptx(asm, int(word))
        for e in range(4):
            nib = (int(word) >> (8 * e)) & 0xFF
            assert regs[f"${e}"] == ((nib & 15) << (8 * byte)) | magic, (hex(word), e)
            assert regs[f"${e + 4}"] == ((nib >> 4) << (8 * byte)) | magic, (hex(word), e)
    for q in range(16):  # the value each code becomes
        bits = (q << (8 * byte)) | magic
        value = np.array([bits], dtype=np.uint32).view(np.float32)[0]
        assert value == (2.0**23 if byte == 0 else 128.0) + q


def test_the_gpu_kernels_build_for_sm_90() -> None:
    """The one-row GEMV (its loads a step ahead or not), a decode batch's split-K tile and a
    prefill tile (norm on W, gated epilogue), each with its PTX unpack, assemble for sm_90
    (Triton's ptxas in a build worker, no GPU needed)."""
    from inferx.compiler.build import build_cubins

    gemv = codegen.generate(_qlinear_kernel(1, 256, 64, 128, True, False, "bf16"), "gemv",
                            QGemmSchedule(1, 16, 256, 4, 2))
    tile = codegen.generate(_norm_gated_kernel(256, 256, 256, 128, "bf16"), "tile",
                            QGemmSchedule(128, 64, 64, 8, 3))
    ahead = codegen.generate(_qlinear_kernel(1, 2048, 64, 128, True, False, "bf16"), "ahead",
                             QGemmSchedule(1, 8, 1024, 8, 2, prefetch=1))
    split = codegen.generate(_norm_gated_kernel(16, 1024, 256, 128, "bf16"), "split",
                             QGemmSchedule(16, 64, 128, 4, 3, split_k=4))
    assert "inline_asm_elementwise" in gemv.source and int4.UNPACK_ASM_128 in tile.source
    built = build_cubins({"gemv": gemv, "tile": tile, "ahead": ahead, "split": split}, "sm_90", 2, lambda _: None)
    assert all(len(b["cubin"]) > 1000 for b in built.values())
