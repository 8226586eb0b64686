"""Tiny one-layer llama GGUF files for tests: the tensors' names and shapes (numpy order, as
HF's), random F32 values, and the writer's closing calls."""

from __future__ import annotations

from typing import Any

import numpy as np


def llama_shapes(
    hidden: int, heads: int, kv: int, inter: int, vocab: int, q_rows: int | None = None
) -> dict[str, tuple[int, ...]]:
    hd = hidden // heads
    return {
        "token_embd.weight": (vocab, hidden),
        "output_norm.weight": (hidden,),
        "output.weight": (vocab, hidden),
        "blk.0.attn_norm.weight": (hidden,),
        "blk.0.ffn_norm.weight": (hidden,),
        "blk.0.attn_q.weight": (q_rows or heads * hd, hidden),
        "blk.0.attn_k.weight": (kv * hd, hidden),
        "blk.0.attn_v.weight": (kv * hd, hidden),
        "blk.0.attn_output.weight": (hidden, heads * hd),
        "blk.0.ffn_gate.weight": (inter, hidden),
        "blk.0.ffn_up.weight": (inter, hidden),
        "blk.0.ffn_down.weight": (hidden, inter),
    }


def finish(writer: Any, shapes: dict[str, tuple[int, ...]], extra: dict[str, np.ndarray] | None = None) -> None:
    """Adds a seeded random F32 tensor for each of ``shapes`` (then ``extra``) and writes the file."""
    rng = np.random.default_rng(0)
    for name, shape in shapes.items():
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.1).astype(np.float32))
    for name, array in (extra or {}).items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def add_llama_metadata(writer: Any, *, context: int, hidden: int, heads: int, kv: int, inter: int) -> None:
    """The llama sizes of a one-layer model, RMSNorm eps 1e-5 and RoPE base 10000."""
    writer.add_context_length(context)
    writer.add_embedding_length(hidden)
    writer.add_block_count(1)
    writer.add_feed_forward_length(inter)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
