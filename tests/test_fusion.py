"""merge-gemms + fuse on every family: kernel launches per decoder layer (<= 5 decode, <= 6
prefill) and the fused module computes what the unfused one did (reference interpreter)."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
import transformers as T

import inferx
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.pipeline import registry
from inferx.passes.pipeline import PassManager, parse

FAMILIES = {
    "llama": (T.LlamaConfig, T.LlamaForCausalLM, {}),
    "mistral": (T.MistralConfig, T.MistralForCausalLM, {"sliding_window": 4}),
    "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM, {}),
    "phi3": (T.Phi3Config, T.Phi3ForCausalLM, {"pad_token_id": 0}),
    "gpt2": (T.GPT2Config, T.GPT2LMHeadModel, None),
}


def _model(family: str, layers: int):
    cfg_cls, model_cls, extra = FAMILIES[family]
    torch.manual_seed(0)
    if extra is None:
        cfg = cfg_cls(vocab_size=67, n_embd=32, n_layer=layers, n_head=4, n_positions=64)
    else:
        cfg = cfg_cls(vocab_size=67, hidden_size=32, intermediate_size=40, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **extra)
    return model_cls(cfg).eval()


def _fuse(program) -> dict[str, collections.Counter]:
    PassManager(parse("merge-gemms,dce,fuse,bind-families", registry())).run(program.module)
    counts = {}
    for func in program.module.ops:
        kernels = [o for o in func.body.block.ops if isinstance(o, KernelOp)]
        counts[func.sym_name.data] = collections.Counter(k.template.data for k in kernels)
    return counts


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_kernels_per_layer(family: str) -> None:
    one = _fuse(inferx.import_model(_model(family, 1)))
    three = _fuse(inferx.import_model(_model(family, 3)))
    for entry, limit in (("decode", 5), ("prefill", 6)):
        per_layer = (sum(three[entry].values()) - sum(one[entry].values())) / 2
        assert per_layer <= limit, f"{family} {entry}: {per_layer} kernels per layer ({three[entry]})"
        assert three[entry]["attention"] - one[entry]["attention"] == 2


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fused_module_computes_the_same(family: str) -> None:
    model = _model(family, 2)
    plain = inferx.import_model(model).reference_session()
    fused_program = inferx.import_model(model)
    _fuse(fused_program)
    fused = fused_program.reference_session()
    rng = np.random.default_rng(1)
    rows = [rng.integers(0, 67, n).tolist() for n in (5, 9, 2)]
    a, b = plain.prefill(rows), fused.prefill(rows)
    np.testing.assert_allclose(b, a, atol=1e-5, err_msg=f"repro: pytest tests/test_fusion.py -k '{family}'")
    step = rng.integers(0, 67, (3, 1))
    np.testing.assert_allclose(fused.decode(step), plain.decode(step), atol=1e-5)
