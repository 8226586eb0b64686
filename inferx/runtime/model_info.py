"""What a session knows of the decoder LLM it runs: the metadata an artifact's manifest carries and
a frontend's Program holds. In the runtime, which imports nothing of the compiler."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelInfo:
    """Metadata of a decoder LLM that sessions and the compiler need."""

    architecture: str
    vocab_size: int
    max_context: int
    eos_token_ids: tuple[int, ...]
    num_layers: int
    num_kv_heads: int
    head_dim: int
    dtype: str = "f32"
    kv_dtype: str | None = None  # the KV cache's element type: None is dtype; "f8e4m3" an FP8 cache

    @property
    def cache_dtype(self) -> str:
        """The element type of each K and V cache [batch, num_kv_heads, ctx, head_dim]."""
        return self.kv_dtype or self.dtype
