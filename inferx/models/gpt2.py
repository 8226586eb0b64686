"""GPT-2: LayerNorm, learned positions, Conv1D weights ([in, out]), fused c_attn, tied head."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferx.models.config import ConfigError, DecoderConfig, HFFields, WeightNames, hf_dtype

GPT2_NAMES = WeightNames(
    embed="transformer.wte.weight",
    pos_embed="transformer.wpe.weight",
    final_norm="transformer.ln_f",
    lm_head=None,
    input_norm="transformer.h.{i}.ln_1",
    post_norm="transformer.h.{i}.ln_2",
    qkv="transformer.h.{i}.attn.c_attn",
    o="transformer.h.{i}.attn.c_proj",
    up="transformer.h.{i}.mlp.c_fc",
    down="transformer.h.{i}.mlp.c_proj",
)

ACTS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}


def from_hf(raw: Mapping[str, Any]) -> DecoderConfig:
    f = HFFields("gpt2", raw)
    f.reject("activation_function", tuple(ACTS), "GELU forms only")
    for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"):
        if f.flag(flag, False):
            raise ConfigError(f"gpt2 config: {flag}=true is not supported")
    hidden = f.size("hidden_size", "n_embd", "hidden_size")
    heads = f.size("num_heads", "n_head", "num_attention_heads")
    if hidden % heads:
        raise ConfigError(f"gpt2 config: n_head={heads} does not divide n_embd={hidden}")
    return DecoderConfig(
        family="gpt2",
        vocab_size=f.size("vocab_size", "vocab_size"),
        hidden_size=hidden,
        intermediate_size=f.size("intermediate_size", "n_inner", default=4 * hidden),
        num_layers=f.size("num_layers", "n_layer", "num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        max_position=f.size("max_position", "n_positions", "max_position_embeddings"),
        names=GPT2_NAMES,
        norm="layer",
        norm_eps=f.number("layer_norm_epsilon", 1e-5),
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        mlp="plain",
        act=ACTS[f.get("activation_function", "gelu_new")],  # type: ignore[arg-type]
        rope=None,
        tie_embeddings=True,
        eos_token_ids=f.eos_ids(),
        bos_token_id=f.token_id("bos_token_id"),
        dtype=hf_dtype(raw),
        w_layout="kn",
    )
