"""Phi-3: fused qkv and gate_up projections, partial rotary, optional sliding window."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from inferx.models.config import DecoderConfig, WeightNames
from inferx.models.llama import llama_like

PHI3_NAMES = WeightNames(
    embed="model.embed_tokens.weight",
    final_norm="model.norm",
    lm_head="lm_head",
    input_norm="model.layers.{i}.input_layernorm",
    post_norm="model.layers.{i}.post_attention_layernorm",
    qkv="model.layers.{i}.self_attn.qkv_proj",
    o="model.layers.{i}.self_attn.o_proj",
    gate_up="model.layers.{i}.mlp.gate_up_proj",
    down="model.layers.{i}.mlp.down_proj",
)


def from_hf(raw: Mapping[str, Any]) -> DecoderConfig:
    cfg = llama_like("phi3", dict(raw, attention_bias=False), qkv_bias=False,
                     window=raw.get("sliding_window"), names=PHI3_NAMES)
    return replace(cfg, o_bias=False, mlp_bias=False)
