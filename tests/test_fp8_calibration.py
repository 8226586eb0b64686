"""FP8 calibration: the observers' ranges, static activation scales (an fp8gemm kernel that
saturates against the interpreter; a compiled model against its reference session), and
SmoothQuant (the float model unchanged by the migration; the FP8 model compiled after it against
its reference)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_fp8_kernels import PROMPTS, _agree, _close, _model
from test_precision import ByteTokenizer

import inferx
from inferx.compiler.families.fp8gemm import codegen
from inferx.compiler.families.fp8gemm.codegen import Fp8GemmSchedule
from inferx.compiler.interpreter.context import KernelContext
from inferx.compiler.interpreter.kernels import KERNELS
from inferx.compiler.ir import fp8
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.textio import parse_module
from inferx.compiler.options import CompileOptions
from inferx.compiler.pipeline import PrecisionPlan, apply_plan, calibration_windows
from inferx.compiler.quant import observers
from inferx.compiler.quant import precision as pr
from inferx.compiler.quant.smooth import smooth
from inferx.program import Program
from inferx.runtime.triton_kernels import grid, load_kernel


def test_observers_choose_ranges_within_the_data() -> None:
    rng = np.random.default_rng(0)
    r = observers.InputRange(64)
    x = rng.standard_normal((400, 64)).astype(np.float32)
    x[3, 5] = 40.0  # one outlier
    x[7] = 0.0
    r.add(x)
    assert r.range("minmax") == pytest.approx(40.0)
    assert r.percentile(100) == pytest.approx(40.0)
    median = float(np.median(np.abs(x)))
    assert median <= r.percentile(50) <= median * 2 ** (1 / observers.BINS_PER_OCTAVE) * 1.01
    assert r.percentile(99.9) < 10  # the outlier is past it
    t = r.range("entropy")
    assert r.percentile(99) * 0.98 <= t <= 40.0
    np.testing.assert_array_equal(r.channel_max[5], np.float32(40.0))


def _static_kernel(m: int, k: int, n: int) -> KernelOp:
    x, c, s, xs = (f"!ix.tensor<[{m}, {k}], f32>", f"!ix.tensor<[{n}, {k}], f8e4m3>", f"!ix.tensor<[{n}], f32>",
                   "!ix.tensor<[1], f32>")
    y = f"!ix.tensor<[{m}, {n}], f32>"
    text = f"""
    func.func @f(%x0: {x}, %x1: {c}, %x2: {s}, %x3: {xs}) -> {y} {{
      %y = ix.kernel "fp8gemm"(%x0, %x1, %x2, %x3) {{name = "k0"}} : ({x}, {c}, {s}, {xs}) -> {y} {{
      ^bb0(%a0: {x}, %a1: {c}, %a2: {s}, %a3: {xs}):
        %q = ix.fp8_linear %a0, %a1, %a2 x_scale %a3 : {x}, {c}, {s} x_scale {xs} -> {y}
        ix.yield %q : {y}
      }}
      func.return %y : {y}
    }}
    """
    module, _ = parse_module(text)
    return next(o for o in module.walk() if isinstance(o, KernelOp))


def test_a_static_scale_saturates_in_the_kernel_as_in_the_interpreter() -> None:
    """x quantized by one static scale that a tenth of its elements exceed (they clamp to 448):
    the kernel in Triton's interpreter against the interpreter's op, within 1e-4 of the largest
    output; no pass over x for a scale."""
    m, k, n = 9, 64, 40
    kernel = _static_kernel(m, k, n)
    ks = codegen.generate(kernel, "kernel", Fp8GemmSchedule(16, 32, 32))
    assert "amax" not in ks.source
    rng = np.random.default_rng(1)
    x = rng.standard_normal((m, k)).astype(np.float32)
    codes, scales = fp8.quantize_weight(rng.standard_normal((n, k)).astype(np.float32) * 0.1)
    x_scale = np.array([np.quantile(np.abs(x), 0.9) / 448], dtype=np.float32)
    op = next(o for o in kernel.body.block.ops if o.name == "ix.fp8_linear")
    want = KERNELS[type(op)](op, [x, codes, scales, x_scale], KernelContext(env={}, weights={}))[0]
    assert np.abs(x / x_scale[0]).max() > 448  # some values do saturate
    out = torch.empty((m, n), dtype=torch.float32)
    fn = load_kernel(ks, interpret=True)
    tensors = [torch.from_numpy(a) for a in (x, fp8.encode_e4m3(codes), scales, x_scale)]
    fn[grid(ks, {})](*tensors, out, **ks.constexprs, num_warps=ks.num_warps, num_stages=ks.num_stages)
    err = float(np.abs(out.numpy() - want).max())
    assert err <= 1e-4 * max(1.0, float(np.abs(want).max())), f"max abs error {err:.3g}\n" \
        "repro: pytest tests/test_fp8_calibration.py -k saturates"


def _program() -> Program:
    program = inferx.import_model(_model("llama"), dtype="f32")
    program.tokenizer = ByteTokenizer()
    return program


def _reference(options: CompileOptions) -> Any:
    program = _program()
    layers = pr.from_options(program.module, "fp8", False, ())
    return apply_plan(program, PrecisionPlan(layers, "test"), options).reference_session(max_batch=2,
                                                                                         max_context=32)


@pytest.mark.parametrize("activations, alpha, once", [
    ("percentile", None, True),
    pytest.param("entropy", 0.5, False, marks=pytest.mark.thorough),  # further variants: not in CI's run
    pytest.param("minmax", None, False, marks=pytest.mark.thorough),
    pytest.param("dynamic", 0.5, False, marks=pytest.mark.thorough),
])
def test_calibrated_fp8_artifacts_match_the_reference(activations: str, alpha: float | None, once: bool,
                                                      tmp_path: Path) -> None:
    """quant fp8 with static scales (an x_scale weight an input, no pass over x for it; with
    ``once``, prompts' x quantized by the fp8quant kernels with it) and with SmoothQuant: the
    compiled cpu artifact against the reference session of the same program (f32: within 1e-4 of
    the largest logit)."""
    text = tmp_path / "calibration.txt"  # four windows of the tiny model's 64 positions
    text.write_text(("Static scales come from text like this, " * 7)[:256])
    kw = dict(target="cpu", max_seq_len=32, max_batch=2, quant="fp8", fp8_activations=activations, smoothquant=alpha,
              calibration=text)
    path = inferx.compile(_program(), output=tmp_path / "a", fp8_inputs_once=once, **kw)
    weights = json.loads((path / "manifest.json").read_text())["weights"]
    static = [n for n in weights if n.endswith(".fp8.x_scale")]
    assert len(static) == (8 if activations != "dynamic" else 0), static  # q|k|v, o, gate|up, down: 4 a layer
    ref = _reference(CompileOptions(**kw))
    cpu = inferx.load(path, device="cpu")
    _agree(cpu, ref, "f32", f"repro: pytest tests/test_fp8_calibration.py -k '{activations}'")


@pytest.mark.parametrize("tied", [False, True])
def test_smoothing_leaves_the_float_model_unchanged(tied: bool) -> None:
    """SmoothQuant at alpha 0.5 moves ranges between the activations and the weights: the float
    model's logits stay (within 1e-4 of the largest), the smoothed weights differ, and the down
    projections' inputs are smoothed through the up projections. A tied LM head (the embedding
    table) is left alone."""
    model = _model("llama")
    if tied:
        model.config.tie_word_embeddings = True
        model.lm_head.weight = model.model.embed_tokens.weight
    program = inferx.import_model(model, dtype="f32")
    program.tokenizer = ByteTokenizer()
    want = np.asarray(program.reference_session(max_batch=2, max_context=32).prefill(PROMPTS))
    ranges = observers.observe(program, calibration_windows(program, CompileOptions(target="cpu"))[:2])
    factors = smooth(program, ranges, 0.5)
    assert {"model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.down_proj.weight"} <= set(factors)
    assert not np.allclose(factors["model.layers.1.mlp.down_proj.weight"], 1.0)
    got = np.asarray(program.reference_session(max_batch=2, max_context=32).prefill(PROMPTS))
    err = float(np.abs(got - want).max())
    assert err <= 1e-4 * max(1.0, float(np.abs(want).max())), f"max abs error {err:.3g}"


def test_gptq_over_the_e4m3_grid_lowers_the_output_error() -> None:
    """On inputs with correlated channels, GPTQ's FP8 codes give a smaller output error than
    round-to-nearest's, with the same per-row scales and every code an E4M3 value."""
    from inferx.compiler.quant.gptq import hessian, quantize_gptq_fp8

    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 8)) @ rng.standard_normal((8, 64)) + 0.1 * rng.standard_normal((512, 64))
    w = rng.standard_normal((32, 64)).astype(np.float32)
    codes, scales = quantize_gptq_fp8(w, hessian([x]), damp=0.01)
    rtn_codes, rtn_scales = fp8.quantize_weight(w)
    np.testing.assert_array_equal(scales, rtn_scales)
    np.testing.assert_array_equal(fp8.decode_e4m3(fp8.encode_e4m3(codes)), codes)
    err = lambda c: float(np.linalg.norm(x @ (w - fp8.dequantize(c, scales)).T))  # noqa: E731
    assert err(codes) < 0.8 * err(rtn_codes), (err(codes), err(rtn_codes))


@pytest.mark.thorough  # the GPTQ codes are the store's; their kernels are every fp8 artifact's
def test_an_fp8_gptq_artifact_matches_the_reference(tmp_path: Path) -> None:
    """quant fp8 with quant_method gptq: the compiled cpu artifact against the reference session
    of the same program (f32: within 1e-4 of the largest logit); the stored codes are GPTQ's."""
    text = tmp_path / "calibration.txt"
    text.write_text(("GPTQ rounds each column against the ones still to come. " * 5)[:256])
    kw = dict(target="cpu", max_seq_len=32, max_batch=2, quant="fp8", quant_method="gptq", calibration=text)
    path = inferx.compile(_program(), output=tmp_path / "a", **kw)
    name = "model.layers.0.mlp.down_proj.weight"
    meta = json.loads((path / "manifest.json").read_text())["weights"][f"{name}.fp8.codes"]
    stored = np.frombuffer((path / meta["file"]).read_bytes(), dtype=np.uint8)
    rtn = fp8.encode_e4m3(fp8.quantize_weight(np.asarray(_program().weights[name], np.float32))[0]).reshape(-1)
    assert stored.shape == rtn.shape and (stored != rtn).any()
    ref = _reference(CompileOptions(**kw))
    cpu = inferx.load(path, device="cpu")
    want = np.asarray(ref.prefill(PROMPTS)).astype(np.float32)
    _close(np.asarray(cpu.prefill(PROMPTS)).astype(np.float32), want, "f32", "prefill",
           "repro: pytest tests/test_fp8_calibration.py -k gptq_artifact")
