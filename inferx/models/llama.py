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
    heads = f.size("num_heads", "num_attention_heads")
    hidden = f.size("hidden_size", "hidden_size")
    if raw.get("head_dim") is None and hidden % heads:
        raise f.fail("num_attention_heads", f"does not divide hidden_size={hidden} (and head_dim is not given)")
    head_dim = f.size("head_dim", "head_dim", default=hidden // heads)
    max_pos = f.size("max_position", "max_position_embeddings")
    layers = f.size("num_layers", "num_hidden_layers")
    tied = f.flag("tie_word_embeddings", False)
    bias = f.flag("attention_bias", False)
    return DecoderConfig(
        family=family,
        vocab_size=f.size("vocab_size", "vocab_size"),
        hidden_size=hidden,
        intermediate_size=f.size("intermediate_size", "intermediate_size"),
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=f.size("num_kv_heads", "num_key_value_heads", default=heads),
        head_dim=head_dim,
        max_position=max_pos,
        names=names if not tied else _tied(names),
        norm_eps=f.number("rms_norm_eps", 1e-6),
        qkv_bias=bias if qkv_bias is None else qkv_bias,
        o_bias=bias,
        mlp_bias=f.flag("mlp_bias", False),
        rope=f.rope(head_dim, max_pos),
        tie_embeddings=tied,
        sliding_windows=f.layer_windows(layers, window),
        eos_token_ids=f.eos_ids(),
        bos_token_id=f.token_id("bos_token_id"),
        dtype=hf_dtype(raw),
    )


def _tied(names: WeightNames) -> WeightNames:
    from dataclasses import replace

    return replace(names, lm_head=None)


def from_hf(raw: Mapping[str, Any]) -> DecoderConfig:
    return llama_like("llama", raw)
