"""Qwen2: Llama-shaped with biases on q/k/v (not o), and sliding windows on some layers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferx.models.config import DecoderConfig
from inferx.models.llama import llama_like


def from_hf(raw: Mapping[str, Any]) -> DecoderConfig:
    window = raw.get("sliding_window") if raw.get("use_sliding_window") else None
    cfg = llama_like("qwen2", dict(raw, attention_bias=False), qkv_bias=True, window=window)
    return cfg
