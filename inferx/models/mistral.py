"""Mistral: Llama-shaped with a sliding attention window on every layer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferx.models.config import DecoderConfig
from inferx.models.llama import llama_like


def from_hf(raw: Mapping[str, Any]) -> DecoderConfig:
    return llama_like("mistral", raw, qkv_bias=False, window=raw.get("sliding_window"))
