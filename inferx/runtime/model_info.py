"""What a session knows of the decoder LLM it runs: the metadata an artifact's manifest carries and
a frontend's Program holds. In the runtime, which imports nothing of the compiler."""

from __future__ import annotations

from dataclasses import dataclass

from inferx.runtime.kv_blocks import Paging


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
    kv_paging: Paging | None = None  # a paged cache's geometry (inferx.runtime.kv_blocks); None: contiguous

    @property
    def cache_dtype(self) -> str:
        """The element type of each K and V cache [batch, num_kv_heads, ctx, head_dim]."""
        return self.kv_dtype or self.dtype

    def cache_shape(self, rows: int, context: int) -> tuple[int, int, int, int]:
        """The shape of each layer's K (and V) cache for ``rows`` sequences of ``context``
        positions: [rows, num_kv_heads, context, head_dim], or a paged cache's pool [blocks,
        num_kv_heads, block_size, head_dim] whatever the rows and context."""
        p = self.kv_paging
        if p is None:
            return (rows, self.num_kv_heads, context, self.head_dim)
        return (p.blocks, self.num_kv_heads, p.block_size, self.head_dim)
