"""FP8 W8A8 (``ix.fp8_linear``): the E4M3 numerics against PyTorch's own float8_e4m3fn cast, the
per-channel weight and per-token activation scales, the quantize-fp8 pass on a model and its
store (the kernels: ``test_fp8_kernels.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as T

import inferx
from inferx.compiler.interpreter.numerics import round_f8e4m3
from inferx.compiler.ir import fp8
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.quant.fp8 import quantize_program_fp8


def _torch_e4m3(x: np.ndarray) -> np.ndarray:
    return torch.from_numpy(x.astype(np.float32)).clamp(-448, 448).to(torch.float8_e4m3fn).float().numpy()


def test_e4m3_rounding_is_torchs_cast() -> None:
    """Every E4M3 value, the midpoints between neighbours (ties to even), values past 448, the
    subnormal range and random values round as PyTorch's cast after a clamp."""
    values = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float().numpy()
    finite = np.unique(values[np.isfinite(values)])
    mids = (finite[:-1] + finite[1:]) / 2
    rng = np.random.default_rng(0)
    x = np.concatenate([finite, mids, np.nextafter(mids, np.float32(np.inf)), [500.0, -1e6, 2.0**-10, 2.0**-12],
                        rng.standard_normal(4000).astype(np.float32) * 40]).astype(np.float32)
    got, want = round_f8e4m3(x), _torch_e4m3(x)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{bad.size} values differ, e.g. {x[bad[:3]]} -> {got[bad[:3]]} vs {want[bad[:3]]}"


def test_weight_scales_are_per_channel_and_put_each_row_maximum_at_448() -> None:
    rng = np.random.default_rng(1)
    w = rng.standard_normal((9, 40)).astype(np.float32) * np.logspace(-3, 2, 9, dtype=np.float32)[:, None]
    w[4] = 0.0
    codes, scales = fp8.quantize_weight(w)
    assert codes.shape == w.shape and scales.shape == (9,) and scales.dtype == np.float32
    live = np.arange(9) != 4
    np.testing.assert_array_equal(np.abs(codes[live]).max(axis=1), 448.0)  # the row's maximum itself
    assert scales[4] == 1.0 and not codes[4].any()  # a zero row: scale 1, codes 0
    # elementwise IEEE division and rounding on both sides: exact on any CPU
    np.testing.assert_array_equal(codes, _torch_e4m3(w / scales[:, None]))
    # E4M3 keeps 3 fraction bits: every weight within 1/16 of itself (relative), or the subnormal step
    err = np.abs(fp8.dequantize(codes, scales) - w)
    assert (err <= np.maximum(np.abs(w) / 16, scales[:, None] * 2.0**-9)).all()
    with pytest.raises(ValueError, match="layer.w: non-finite"):
        fp8.quantize_weight(np.array([[1.0, np.nan]], dtype=np.float32), "layer.w")


def test_fp8_matmul_quantizes_each_token_by_its_own_scale() -> None:
    """Scaling one token's row scales its output row alone: its scale absorbs the factor."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    codes, scales = fp8.quantize_weight(rng.standard_normal((5, 64)).astype(np.float32))
    y = fp8.fp8_matmul(x, codes, scales)
    x2 = x.copy()
    x2[1] *= 1024.0  # a power of two: the quantized row is the same
    y2 = fp8.fp8_matmul(x2, codes, scales)
    np.testing.assert_allclose(y2[[0, 2]], y[[0, 2]], rtol=1e-6, atol=0)
    np.testing.assert_allclose(y2[1], y[1] * 1024.0, rtol=1e-6)
    ref = x @ fp8.dequantize(codes, scales).T
    assert np.abs(y - ref).max() <= 0.1 * np.abs(ref).max()


def _llama() -> T.LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=67, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return T.LlamaForCausalLM(cfg).eval()


def test_quantize_program_fp8_runs_in_the_reference(tmp_path: Path) -> None:
    """Every layer linear becomes ix.fp8_linear (the LM head stays float), the store serves the
    codes and scales it computes, the reference session runs it close to the float model, and a
    compile names the op it has no kernel for, writing nothing."""
    model = _llama()
    program = quantize_program_fp8(inferx.import_model(model, dtype="f32"))
    prefill = next(f for f in program.module.ops if f.sym_name.data == "prefill")
    ops = [o for o in prefill.walk() if isinstance(o, (nn.Fp8LinearOp, nn.LinearOp))]
    assert sum(isinstance(o, nn.Fp8LinearOp) for o in ops) == 14 and len(ops) == 15  # 2 x 7, the head
    name = "model.layers.0.mlp.down_proj.weight"
    codes, scales = program.weights[f"{name}.fp8.codes"], program.weights[f"{name}.fp8.scales"]
    np.testing.assert_array_equal(codes, fp8.quantize_weight(np.asarray(program.weights[name]))[0])
    assert scales.shape == (32,) and f"{name}.fp8.codes" in program.weights and "x.fp8.codes" not in program.weights
    ids = np.random.default_rng(3).integers(0, 67, (2, 9))
    want = np.asarray(inferx.import_model(model, dtype="f32").reference_session().prefill(ids))
    got = np.asarray(program.reference_session().prefill(ids))
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    assert 0 < rel < 0.1, f"rel err {rel:.3g}; repro: pytest tests/test_fp8.py -k reference"
