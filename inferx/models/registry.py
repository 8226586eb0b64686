"""The architecture registry: HF ``model_type`` (and ``architectures``) to a config mapper."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from inferx.models import gpt2, llama, mistral, phi3, qwen2
from inferx.models.config import ConfigError, DecoderConfig

FAMILIES: dict[str, Callable[[Mapping[str, Any]], DecoderConfig]] = {
    "llama": llama.from_hf,
    "mistral": mistral.from_hf,
    "qwen2": qwen2.from_hf,
    "phi3": phi3.from_hf,
    "gpt2": gpt2.from_hf,
}

ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Phi3ForCausalLM": "phi3",
    "GPT2LMHeadModel": "gpt2",
}


def decoder_config(raw: Mapping[str, Any], source: str = "config.json") -> DecoderConfig:
    """Maps an HF config dict onto a DecoderConfig, or names what is missing or unsupported."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: expected a JSON object, found {type(raw).__name__}")
    model_type = raw.get("model_type")
    family = model_type if isinstance(model_type, str) and model_type in FAMILIES else None
    archs = raw.get("architectures")
    if family is None and isinstance(archs, (list, tuple)):
        for arch in archs:
            family = ARCHITECTURES.get(arch) if isinstance(arch, str) else None
            if family:
                break
    if family is None:
        what = f"model_type {model_type!r}" if model_type else f"architectures {raw.get('architectures')!r}"
        raise ConfigError(
            f"{source}: unsupported architecture ({what}); supported model types: "
            f"{', '.join(FAMILIES)}; architectures: {', '.join(ARCHITECTURES)}"
        )
    try:
        return FAMILIES[family](raw)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise ConfigError(f"{source}: {family} config: {e}") from None
