"""Quantization-aware training (``inferx.compiler.quant.qat``): the prepared torch model computes
what the reference interpreter computes on the program quantized the same way (int4 asymmetric
and symmetric, FP8 W8A8, a mixed precision map), gradients pass straight through the rounding,
``finish`` gives back plain linears with the trained weights, and the artifact compiled from the
trained model reproduces the prepared model's logits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_fp8_kernels import PROMPTS, _model

import inferx
from inferx.compiler.ir.quant import parse_scheme
from inferx.compiler.options import CompileOptions
from inferx.compiler.pipeline import PrecisionPlan, apply_plan
from inferx.compiler.quant import precision as pr
from inferx.compiler.quant import qat
from inferx.compiler.quant.rtn import quantize_rtn

MIXED = {"model.layers.0.self_attn.q_proj.weight": "fp8", "model.layers.1.mlp.down_proj.weight": "int4-g32-sym"}


def _logits(model: torch.nn.Module) -> np.ndarray:
    with torch.no_grad():
        return model(torch.as_tensor(PROMPTS)).logits.float().numpy()


def _reference(model: torch.nn.Module, layers: dict[str, str]) -> np.ndarray:
    program = inferx.import_model(model, dtype="f32")
    full = {n: layers.get(n, pr.FLOAT) for n in pr.linear_weights(program.module)}
    program = apply_plan(program, PrecisionPlan(full, "test"), CompileOptions(target="cpu"))
    return np.asarray(program.reference_session(max_batch=2, max_context=32).prefill(PROMPTS), dtype=np.float32)


def _close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """fp32 sums in another order: within 1e-4 of the largest logit."""
    err = float(np.abs(got - want).max())
    assert err <= 1e-4 * max(1.0, float(np.abs(want).max())), f"{what}: max abs error {err:.3g}\n" \
        f"repro: pytest tests/test_qat.py -k '{what}'"


@pytest.mark.parametrize("precision", ["int4-g32", pytest.param("int4-g32-sym", marks=pytest.mark.thorough), "fp8",
                                       "mixed"])
def test_the_prepared_model_computes_what_the_quantized_program_does(precision: str) -> None:
    model = _model("llama")
    layers = qat.prepare(model, MIXED if precision == "mixed" else precision)
    assert len(layers) == (2 if precision == "mixed" else 14)  # every layer linear, the LM head float
    qat.finish(model)
    ref = _reference(model, layers)
    qat.prepare(model, MIXED if precision == "mixed" else precision)
    _close(_logits(model), ref, precision)


def test_int4_rounding_matches_round_to_nearest_with_bf16_scales() -> None:
    """The torch rounding against ``quant.rtn`` on the same weight, scales and minimums rounded
    to bf16 (minimum down, scale up): the same dequantized values."""
    g = torch.Generator().manual_seed(3)
    w = (torch.randn(24, 128, generator=g) * 0.05).to(torch.bfloat16).float()
    w[0, :32] = 0.25  # a group of equal values: scale 0
    for name in ("int4-g32", "int4-g64-sym"):
        scheme = parse_scheme(name)
        want = quantize_rtn(w.numpy(), scheme, scale_dtype="bf16").dequantize()
        got = qat.fake_int4(w, scheme, torch.bfloat16).numpy()
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_gradients_pass_straight_through_and_finish_restores_plain_linears() -> None:
    model = _model("llama")
    names = set(model.state_dict())
    qat.prepare(model, "fp8")
    logits = model(torch.as_tensor(PROMPTS)).logits
    torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                      torch.as_tensor(PROMPTS)[:, 1:].reshape(-1)).backward()
    q = model.model.layers[0].self_attn.q_proj
    grad = q.parametrizations.weight.original.grad
    assert grad is not None and float(grad.abs().sum()) > 0
    qat.finish(model)
    assert set(model.state_dict()) == names
    assert type(model.model.layers[0].self_attn.q_proj) is torch.nn.Linear
    assert not model.model.layers[0].self_attn.q_proj._forward_pre_hooks


def test_a_bad_precision_is_refused() -> None:
    model = _model("llama")
    with pytest.raises(pr.PrecisionError, match="'int3'"):
        qat.prepare(model, "int3")
    with pytest.raises(pr.PrecisionError, match="not a linear"):
        qat.prepare(model, {"model.layers.7.mlp.up_proj.weight": "fp8"})


def test_the_compiled_artifact_reproduces_the_trained_model(tmp_path: Path) -> None:
    """A few steps of training with int4-g32 in the loop, then the artifact compiled with
    ``quant="int4-g32"`` from the finished model: its prefill logits are the prepared model's
    (cpu kernels, f32: within 1e-4 of the largest logit)."""
    model = _model("llama")
    qat.prepare(model, "int4-g32")
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    ids = torch.as_tensor(PROMPTS)
    for _ in range(3):
        logits = model(ids).logits
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    want = _logits(model)
    qat.finish(model)
    path = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=32, max_batch=2,
                          quant="int4-g32")
    got = np.asarray(inferx.load(path, device="cpu").prefill(PROMPTS), dtype=np.float32)
    _close(got, want, "compiled_artifact")
