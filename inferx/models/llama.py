"""Llama 2, 3, 3.1 and 3.2 (and the Llama-shaped checkpoints: SmolLM, TinyLlama, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferx.models.config import DecoderConfig, HFFields, WeightNames, hf_dtype

LLAMA_NAMES = WeightNames(
    embed="model.embed_tokens.weight",
    final_norm="model.norm",
    lm_head="lm_head",
    input_norm="model.layers.{i}.input_layernorm",
    post_norm="model.layers.{i}.post_attention_layernorm",
    q="model.layers.{i}.self_attn.q_proj",
    k="model.layers.{i}.self_attn.k_proj",
    v="model.layers.{i}.self_attn.v_proj",
    o="model.layers.{i}.self_attn.o_proj",
    gate="model.layers.{i}.mlp.gate_proj",
    up="model.layers.{i}.mlp.up_proj",
    down="model.layers.{i}.mlp.down_proj",
)


def llama_like(family: str, raw: Mapping[str, Any], *, qkv_bias: bool | None = None,
               window: int | None = None, names: WeightNames = LLAMA_NAMES) -> DecoderConfig:
    """The config of every Llama-shaped family; the callers differ in bias and window."""
    f = HFFields(family, raw)
    f.reject("hidden_act", ("silu",), "only SiLU-gated MLPs")
    heads = int(f.need("num_attention_heads"))
    hidden = int(f.need("hidden_size"))
    head_dim = int(f.get("head_dim", hidden // heads))
    max_pos = int(f.need("max_position_embeddings"))
    layers = int(f.need("num_hidden_layers"))
    tied = bool(f.get("tie_word_embeddings", False))
    return DecoderConfig(
        family=family,
        vocab_size=int(f.need("vocab_size")),
        hidden_size=hidden,
        intermediate_size=int(f.need("intermediate_size")),
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=int(f.get("num_key_value_heads", heads)),
        head_dim=head_dim,
        max_position=max_pos,
        names=names if not tied else _tied(names),
        norm_eps=float(f.get("rms_norm_eps", 1e-6)),
        qkv_bias=bool(f.get("attention_bias", False)) if qkv_bias is None else qkv_bias,
        o_bias=bool(f.get("attention_bias", False)),
        mlp_bias=bool(f.get("mlp_bias", False)),
        rope=f.rope(head_dim, max_pos),
        tie_embeddings=tied,
        sliding_windows=f.layer_windows(layers, window),
        eos_token_ids=f.eos_ids(),
        bos_token_id=f.get("bos_token_id", None),
        dtype=hf_dtype(raw),
    )


def _tied(names: WeightNames) -> WeightNames:
    from dataclasses import replace

    return replace(names, lm_head=None)


def from_hf(raw: Mapping[str, Any]) -> DecoderConfig:
    return llama_like("llama", raw)
