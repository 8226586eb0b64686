"""Every model family compiled with int4 linears (int4-g32, round-to-nearest), and with FP8 W8A8
linears and an FP8 KV cache, on the cpu target against the reference interpreter on the same quantized program: the
qgemm and fp8gemm kernels with each family's prologues and epilogues (Llama's RMSNorm, RoPE and
gated SiLU; Qwen2's q/k/v biases; Phi-3's fused q|k|v and gate|up; GPT-2's [K, N] Conv1D weights,
quantized as their transpose, biases, LayerNorm and GELU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_gpu import FAMILIES  # the five families' configs (that module's tests need a GPU; this one does not)

import inferx
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.options import CompileError
from inferx.compiler.quant.store import quantize_program

TOL = 1e-4  # relative to the largest logit (fp32 throughout)
MAX_SEQ_LEN = 32
PROMPT = [5, 17, 3, 88, 41, 9, 60, 2, 33]


def _model(family: str) -> torch.nn.Module:
    cfg_cls, model_cls, extra = FAMILIES[family]
    torch.manual_seed(0)
    if extra is None:
        cfg = cfg_cls(vocab_size=97, n_embd=64, n_layer=2, n_head=4, n_positions=64)
    else:
        cfg = cfg_cls(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, max_position_embeddings=64, **extra)
    model = model_cls(cfg).eval()
    with torch.no_grad():  # HF initializes biases to zero, which would test nothing
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.5)
    return model


@pytest.mark.parametrize("family, quant", [
    # every family in the thorough run; Llama's and GPT-2's (the two weight layouts) in CI's
    *(pytest.param(f, q, marks=() if f in ("llama", "gpt2") else pytest.mark.thorough)
      for q in ("int4-g32", "fp8+kv") for f in sorted(FAMILIES)),
    # FP8 linears alone: further variants
    *(pytest.param(f, "fp8", marks=pytest.mark.thorough) for f in sorted(FAMILIES)),
])
def test_quantized_family_matches_the_reference(family: str, quant: str, tmp_path: Path) -> None:
    """With "+kv" the KV cache is FP8 too, its per-head scales observed on two windows of the
    prompt's tokens (decode steps write values past that range: they saturate alike)."""
    from inferx.compiler.quant.fp8 import quantize_program_fp8
    from inferx.compiler.quant.kv import observe_kv, quantize_program_kv

    program = inferx.import_model(_model(family), dtype="f32")
    amax = observe_kv(program, [PROMPT, PROMPT[::-1]]) if quant.endswith("+kv") else None
    program = quantize_program_fp8(program) if quant.startswith("fp8") else quantize_program(program, quant)
    if amax is not None:
        program = quantize_program_kv(program, amax)
        assert sum(isinstance(o, nn.KVWriteOp) and o.scale is not None for o in program.module.walk()) == 3 * 2 * 2
    kind = nn.Fp8LinearOp if quant.startswith("fp8") else nn.QLinearOp
    for func in program.module.ops:  # prefill, decode, ...: every layer linear quantized, the LM head alone float
        ops = list(func.walk())
        linears = [o for o in ops if isinstance(o, nn.LinearOp)]
        assert sum(isinstance(o, kind) for o in ops) >= 4 and len(linears) <= 1, (family, len(linears))
    ops = list(program.module.walk())
    if family in ("qwen2", "gpt2"):
        assert any(isinstance(o, kind) and o.bias is not None for o in ops), f"{family}: biases kept"
    path = inferx.compile(program, target="cpu", output=tmp_path / "a", max_seq_len=MAX_SEQ_LEN, max_batch=1)
    cpu = inferx.load(path, device="cpu")
    ref = program.reference_session(max_batch=1, max_context=MAX_SEQ_LEN)
    repro = f"repro: pytest tests/test_quant_families.py -k '{family} and {quant}'"
    ids = np.array([PROMPT])
    got, want = np.asarray(cpu.prefill(ids)), np.asarray(ref.prefill(ids))
    for step in range(3):
        assert got.shape == want.shape, f"step {step}: shape {got.shape} != {want.shape}\n{repro}"
        err = float(np.abs(got - want).max())
        tol = TOL * max(1.0, float(np.abs(want).max()))
        assert err <= tol, f"step {step}: max abs error {err:.3g} > {tol:.3g}\n{repro}"
        tok = np.array([[int(want[0, -1].argmax())]])
        got, want = np.asarray(cpu.decode(tok)), np.asarray(ref.decode(tok))


def test_fused_decode_templates_say_int4_linears_are_not_theirs(tmp_path: Path) -> None:
    """``fuse_mlp`` with int4 linears: the compile stops with one message that says why."""
    with pytest.raises(CompileError, match=r"fuse_mlp: 0 of the 2 .*int4 linears \(ix\.qlinear\)"):
        inferx.compile(_model("llama"), target="cpu", output=tmp_path / "a", max_seq_len=32, max_batch=1,
                       quant="int4-g32", fuse_mlp=True)
    assert not (tmp_path / "a").exists()
