"""The decoder-LLM configuration every family maps its HF config onto, and the reader that maps
HF field names with errors naming the missing or unsupported key.

One ``DecoderConfig`` describes every knob the families differ in; ``inferx.models.decoder``
turns it into `ix` IR. A family file only says how its HF keys and weight names map here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal


class ConfigError(ValueError):
    """An HF config that is missing a key, or has a value InferX does not support."""


@dataclass(frozen=True)
class RopeConfig:
    """Rotary embedding: HF ``rope_parameters`` (or the older ``rope_theta``/``rope_scaling``)."""

    theta: float = 10000.0
    style: Literal["rotate_half", "interleaved"] = "rotate_half"
    rotary_dim: int | None = None  # None: the whole head_dim
    scaling: Literal["none", "linear", "dynamic", "llama3"] = "none"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position: int = 0


@dataclass(frozen=True)
class WeightNames:
    """HF state-dict names of one family; ``{i}`` stands for the layer index.

    Fused projections (``qkv``, ``gate_up``) are used as stored: the IR runs one linear and
    splits its output, so weights are never copied on import.
    """

    embed: str
    final_norm: str
    lm_head: str | None  # None: tied to the embedding
    input_norm: str
    post_norm: str
    o: str
    down: str
    q: str | None = None
    k: str | None = None
    v: str | None = None
    qkv: str | None = None
    gate: str | None = None
    up: str | None = None
    gate_up: str | None = None
    pos_embed: str | None = None


@dataclass(frozen=True)
class DecoderConfig:
    """Everything the shared decoder builder needs; validated on construction."""

    family: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    max_position: int
    names: WeightNames
    norm: Literal["rms", "layer"] = "rms"
    norm_eps: float = 1e-6
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    mlp: Literal["gated", "plain"] = "gated"
    act: Literal["silu", "gelu", "gelu_tanh"] = "silu"
    rope: RopeConfig | None = field(default_factory=RopeConfig)
    tie_embeddings: bool = False
    sliding_windows: tuple[int | None, ...] = ()  # one per layer; () = none anywhere
    eos_token_ids: tuple[int, ...] = ()
    bos_token_id: int | None = None
    dtype: str = "f32"
    # Weight layout of the projections: "nk" (HF Linear, [out, in]) or "kn" (GPT-2 Conv1D).
    w_layout: Literal["nk", "kn"] = "nk"

    def __post_init__(self) -> None:
        for key in ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads",
                    "num_kv_heads", "head_dim", "max_position"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"{self.family}: {key} must be positive, got {getattr(self, key)}")
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(
                f"{self.family}: num_attention_heads ({self.num_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_kv_heads})"
            )
        if self.sliding_windows and len(self.sliding_windows) != self.num_layers:
            raise ConfigError(f"{self.family}: {len(self.sliding_windows)} layer types for {self.num_layers} layers")
        if self.rope is not None:
            rot = self.rope.rotary_dim or self.head_dim
            if rot % 2 or rot > self.head_dim:
                raise ConfigError(f"{self.family}: rotary dim {rot} must be even and <= head_dim {self.head_dim}")

    def window(self, layer: int) -> int | None:
        return self.sliding_windows[layer] if self.sliding_windows else None


class HFFields:
    """Reads an HF config dict; every error names the family and the key."""

    def __init__(self, family: str, raw: Mapping[str, Any]):
        self.family = family
        self.raw = raw

    def need(self, *keys: str) -> Any:
        """The first of ``keys`` present (aliases, newest name first), or a ConfigError."""
        for k in keys:
            if self.raw.get(k) is not None:
                return self.raw[k]
        raise ConfigError(f"{self.family} config: missing key '{keys[0]}'")

    def get(self, key: str, default: Any) -> Any:
        v = self.raw.get(key)
        return default if v is None else v

    def reject(self, key: str, allowed: Sequence[Any], what: str) -> None:
        v = self.raw.get(key)
        if v is not None and v not in allowed:
            raise ConfigError(f"{self.family} config: {key}={v!r} is not supported ({what})")

    def eos_ids(self) -> tuple[int, ...]:
        eos = self.raw.get("eos_token_id")
        if eos is None:
            return ()
        return tuple(eos) if isinstance(eos, list) else (int(eos),)

    def rope(self, head_dim: int, max_position: int) -> RopeConfig:
        """HF rope settings: ``rope_parameters`` (transformers 5) or ``rope_theta``+``rope_scaling``."""
        params = dict(self.raw.get("rope_parameters") or {})
        legacy = self.raw.get("rope_scaling") or {}
        for k, v in legacy.items():
            params.setdefault(k, v)
        theta = float(params.get("rope_theta", self.get("rope_theta", 10000.0)))
        kind = params.get("rope_type", params.get("type", "default"))
        partial = float(params.get("partial_rotary_factor", self.get("partial_rotary_factor", 1.0)))
        rotary_dim = int(head_dim * partial)
        orig = int(params.get("original_max_position_embeddings",
                              self.get("original_max_position_embeddings", max_position)))

        def param(key: str) -> float:
            if params.get(key) is None:
                raise ConfigError(
                    f"{self.family} config: rope type {kind!r} needs the rope_parameters key '{key}'"
                )
            return float(params[key])

        if kind == "default":
            return RopeConfig(theta=theta, rotary_dim=rotary_dim)
        if kind == "linear":
            return RopeConfig(theta=theta, rotary_dim=rotary_dim, scaling=kind,
                              factor=param("factor"), original_max_position=orig)
        if kind == "dynamic":  # HF scales past max_position_embeddings, ignoring any "original" key
            return RopeConfig(theta=theta, rotary_dim=rotary_dim, scaling=kind,
                              factor=param("factor"), original_max_position=max_position)
        if kind == "llama3":
            return RopeConfig(
                theta=theta, rotary_dim=rotary_dim, scaling="llama3", factor=param("factor"),
                low_freq_factor=param("low_freq_factor"),
                high_freq_factor=param("high_freq_factor"), original_max_position=orig,
            )
        raise ConfigError(
            f"{self.family} config: rope type {kind!r} is not supported "
            "(supported: default, linear, dynamic, llama3)"
        )

    def layer_windows(self, num_layers: int, window: int | None) -> tuple[int | None, ...]:
        """Per-layer sliding windows from ``layer_types`` (or one window for all layers)."""
        types = self.raw.get("layer_types")
        if types is None:
            return (window,) * num_layers if window else ()
        if len(types) != num_layers:
            raise ConfigError(f"{self.family} config: layer_types has {len(types)} entries for {num_layers} layers")
        out: list[int | None] = []
        for i, t in enumerate(types):
            if t == "full_attention":
                out.append(None)
            elif t == "sliding_attention":
                if not window:
                    raise ConfigError(f"{self.family} config: layer {i} slides but sliding_window is not set")
                out.append(int(window))
            else:
                raise ConfigError(f"{self.family} config: layer_types[{i}]={t!r} is not supported")
        return tuple(out) if any(w is not None for w in out) else ()


DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def hf_dtype(raw: Mapping[str, Any], default: str = "f32") -> str:
    name = raw.get("dtype") or raw.get("torch_dtype")
    if name is None:
        return default
    if str(name) not in DTYPES:
        raise ConfigError(f"config: dtype {name!r} is not supported ({', '.join(DTYPES)})")
    return DTYPES[str(name)]
