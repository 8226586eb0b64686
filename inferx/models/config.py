"""The decoder-LLM configuration every family maps its HF config onto, and the reader that maps
HF field names with errors naming the missing or unsupported key.

One ``DecoderConfig`` describes every knob the families differ in; ``inferx.models.decoder``
turns it into `ix` IR. A family file only says how its HF keys and weight names map here.

A config is data from wherever the checkpoint came from: ``HFFields`` reads each field with its
type (an integer is a JSON integer, a flag a JSON boolean, a token id an integer in range) and
``DecoderConfig`` checks every size against ``LIMITS`` before any IR is built, so a config that
claims a billion layers fails at once, naming the field and the value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal


class ConfigError(ValueError):
    """An HF config that is missing a key, or has a value InferX does not support."""


# Upper bounds of a config's sizes (DecoderConfig field -> largest accepted value): far above any
# released model (the largest have ~130 layers, 16k hidden, 256k vocabulary, 10M context), low
# enough that a crafted config is refused before the IR of its layers is built.
LIMITS: dict[str, int] = {
    "vocab_size": 1 << 22,
    "hidden_size": 1 << 17,
    "intermediate_size": 1 << 20,
    "num_layers": 1024,
    "num_heads": 1024,
    "num_kv_heads": 1024,
    "head_dim": 1024,
    "max_position": 1 << 24,
}
# Token ids are int32 in every session.
MAX_TOKEN_ID = (1 << 31) - 1


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
        for key, limit in LIMITS.items():
            value = getattr(self, key)
            if type(value) is not int or not 0 < value <= limit:
                raise ConfigError(f"{self.family}: {key} must be an integer in 1..{limit}, got {value!r}")
        if not (math.isfinite(self.norm_eps) and self.norm_eps > 0):
            raise ConfigError(f"{self.family}: norm_eps must be a positive number, got {self.norm_eps!r}")
        # An EOS id at or past the vocabulary is kept (small test models keep their family's
        # default id): no step can emit it, so generation runs its whole budget.
        for i, t in enumerate(self.eos_token_ids):
            if type(t) is not int or not 0 <= t <= MAX_TOKEN_ID:
                raise ConfigError(f"{self.family}: eos_token_ids[{i}] = {t!r} is not a token id "
                                  f"(an integer in 0..{MAX_TOKEN_ID})")
        if self.bos_token_id is not None and (type(self.bos_token_id) is not int or self.bos_token_id < 0):
            raise ConfigError(f"{self.family}: bos_token_id must be a token id, got {self.bos_token_id!r}")
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(
                f"{self.family}: num_attention_heads ({self.num_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_kv_heads})"
            )
        if self.sliding_windows and len(self.sliding_windows) != self.num_layers:
            raise ConfigError(f"{self.family}: {len(self.sliding_windows)} layer types for {self.num_layers} layers")
        for i, w in enumerate(self.sliding_windows):
            if w is not None and (type(w) is not int or w <= 0):
                raise ConfigError(f"{self.family}: the sliding window of layer {i} must be a positive integer, "
                                  f"got {w!r}")
        if self.rope is not None:
            rot = self.rope.rotary_dim or self.head_dim
            if rot % 2 or rot > self.head_dim:
                raise ConfigError(f"{self.family}: rotary dim {rot} must be even and <= head_dim {self.head_dim}")
            for key in ("theta", "factor"):
                value = getattr(self.rope, key)
                if not (math.isfinite(value) and value > 0):
                    raise ConfigError(f"{self.family}: rope {key} must be a positive number, got {value!r}")

    def window(self, layer: int) -> int | None:
        return self.sliding_windows[layer] if self.sliding_windows else None


class HFFields:
    """Reads an HF config dict with each field's type; every error names the family, the key and
    the value. A key that is absent or null takes its default."""

    def __init__(self, family: str, raw: Mapping[str, Any], where: str = ""):
        self.family = family
        self.raw = raw
        self.where = where or f"{family} config"

    def fail(self, key: str, why: str) -> ConfigError:
        return ConfigError(f"{self.where}: {key}={self.raw.get(key)!r} {why}")

    def need(self, *keys: str) -> Any:
        """The first of ``keys`` present (aliases, newest name first), or a ConfigError."""
        for k in keys:
            if self.raw.get(k) is not None:
                return self.raw[k]
        raise ConfigError(f"{self.where}: missing key '{keys[0]}'")

    def _key(self, keys: Sequence[str]) -> str | None:
        return next((k for k in keys if self.raw.get(k) is not None), None)

    def get(self, key: str, default: Any) -> Any:
        v = self.raw.get(key)
        return default if v is None else v

    def size(self, what: str, *keys: str, default: int | None = None) -> int:
        """A size (the DecoderConfig field ``what``): an integer in 1..LIMITS[what], from the first of
        ``keys`` present, else ``default`` (None: required)."""
        key = self._key(keys)
        if key is None:
            if default is None:
                raise ConfigError(f"{self.where}: missing key '{keys[0]}'")
            return default
        return self.integer(key, 1, LIMITS[what])

    def integer(self, key: str, low: int, high: int, default: int | None = None) -> int:
        v = self.raw.get(key)
        if v is None and default is not None:
            return default
        if type(v) is not int:
            raise self.fail(key, "must be an integer")
        if not low <= v <= high:
            raise self.fail(key, f"must be in {low}..{high}")
        return v

    def number(self, key: str, default: float, *, positive: bool = True) -> float:
        """A finite number (JSON integer or float); positive unless told otherwise."""
        v = self.raw.get(key)
        if v is None:
            return default
        if type(v) not in (int, float) or not math.isfinite(v):
            raise self.fail(key, "must be a finite number")
        if positive and v <= 0:
            raise self.fail(key, "must be positive")
        return float(v)

    def flag(self, key: str, default: bool) -> bool:
        v = self.raw.get(key)
        if v is None:
            return default
        if type(v) is not bool:
            raise self.fail(key, "must be true or false")
        return v

    def mapping(self, key: str) -> Mapping[str, Any]:
        v = self.raw.get(key)
        if v is None:
            return {}
        if not isinstance(v, Mapping):
            raise self.fail(key, "must be an object")
        return v

    def reject(self, key: str, allowed: Sequence[Any], what: str) -> None:
        v = self.raw.get(key)
        if v is not None and (not isinstance(v, str) or v not in allowed):
            raise ConfigError(f"{self.where}: {key}={v!r} is not supported ({what})")

    def eos_ids(self) -> tuple[int, ...]:
        """``eos_token_id``: a token id or a list of them (JSON integers, not strings)."""
        eos = self.raw.get("eos_token_id")
        if eos is None:
            return ()
        ids = eos if isinstance(eos, list) else [eos]
        for t in ids:
            if type(t) is not int or not 0 <= t <= MAX_TOKEN_ID:
                raise self.fail("eos_token_id", "must be a token id (a non-negative integer) or a list of them")
        return tuple(ids)

    def token_id(self, key: str) -> int | None:
        v = self.raw.get(key)
        if v is None:
            return None
        return self.integer(key, 0, MAX_TOKEN_ID)

    def rope(self, head_dim: int, max_position: int) -> RopeConfig:
        """HF rope settings: ``rope_parameters`` (transformers 5) or ``rope_theta``+``rope_scaling``."""
        params = dict(self.mapping("rope_parameters"))
        for k, v in self.mapping("rope_scaling").items():
            params.setdefault(k, v)
        rope = HFFields(self.family, params, f"{self.where}: rope_parameters")
        # Each setting in rope_parameters, else at the top level (older configs), else the default.
        theta = rope.number("rope_theta", self.number("rope_theta", 10000.0))
        kind = params.get("rope_type", params.get("type", "default"))
        partial = rope.number("partial_rotary_factor", self.number("partial_rotary_factor", 1.0))
        if partial > 1:
            raise ConfigError(f"{self.where}: partial_rotary_factor={partial!r} must be in (0, 1]")
        rotary_dim = int(head_dim * partial)
        orig_key = "original_max_position_embeddings"
        orig = rope.integer(orig_key, 1, LIMITS["max_position"],
                            self.integer(orig_key, 1, LIMITS["max_position"], max_position))

        def param(key: str) -> float:
            if params.get(key) is None:
                raise ConfigError(
                    f"{self.where}: rope type {kind!r} needs the rope_parameters key '{key}'"
                )
            return rope.number(key, 0.0)

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
            f"{self.where}: rope type {kind!r} is not supported "
            "(supported: default, linear, dynamic, llama3)"
        )

    def layer_windows(self, num_layers: int, window: int | None) -> tuple[int | None, ...]:
        """Per-layer sliding windows from ``layer_types`` (or one window for all layers)."""
        if window is not None and (type(window) is not int or window <= 0):
            raise ConfigError(f"{self.where}: sliding_window={window!r} must be a positive integer")
        types = self.raw.get("layer_types")
        if types is None:
            return (window,) * num_layers if window else ()
        if not isinstance(types, list):
            raise self.fail("layer_types", "must be a list")
        if len(types) != num_layers:
            raise ConfigError(f"{self.where}: layer_types has {len(types)} entries for {num_layers} layers")
        out: list[int | None] = []
        for i, t in enumerate(types):
            if t == "full_attention":
                out.append(None)
            elif t == "sliding_attention":
                if not window:
                    raise ConfigError(f"{self.where}: layer {i} slides but sliding_window is not set")
                out.append(window)
            else:
                raise ConfigError(f"{self.where}: layer_types[{i}]={t!r} is not supported")
        return tuple(out) if any(w is not None for w in out) else ()


DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def hf_dtype(raw: Mapping[str, Any], default: str = "f32") -> str:
    name = raw.get("dtype") or raw.get("torch_dtype")
    if name is None:
        return default
    if not isinstance(name, str) or name not in DTYPES:
        raise ConfigError(f"config: dtype {name!r} is not supported ({', '.join(DTYPES)})")
    return DTYPES[str(name)]
