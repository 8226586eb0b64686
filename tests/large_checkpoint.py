"""Writes Llama-3-8B-shaped checkpoints for import tests without writing 16 GB: each shard is a
valid safetensors file whose tensor bytes are a sparse hole (zeros), so the directory looks and
sizes exactly like the real one while costing no disk writes. ``fill=True`` writes random bytes
instead (for a one-off measurement on real data)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np

LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "bos_token_id": 128000, "eos_token_id": 128001,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def llama_tensors(cfg: dict) -> dict[str, tuple[int, ...]]:
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * h // cfg["num_attention_heads"]
    out = {"model.embed_tokens.weight": (v, h)}
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        out |= {p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
                p + "self_attn.q_proj.weight": (h, h), p + "self_attn.k_proj.weight": (kv, h),
                p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, h),
                p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h),
                p + "mlp.down_proj.weight": (h, i)}
    out |= {"model.norm.weight": (h,), "lm_head.weight": (v, h)}
    return out


def write_checkpoint(path: Path, cfg: dict = LLAMA3_8B, shards: int = 4, fill: bool = False) -> int:
    """Writes config.json, the shards and the index; returns the total bytes of the shards."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(cfg))
    names = list(llama_tensors(cfg).items())
    per = -(-len(names) // shards)
    weight_map, total = {}, 0
    rng = np.random.default_rng(0)
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        header, offset = {}, 0
        for key, shape in names[s * per:(s + 1) * per]:
            nbytes = int(np.prod(shape)) * 2
            header[key] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
            weight_map[key] = fname
            offset += nbytes
        blob = json.dumps(header).encode()
        blob += b" " * (-len(blob) % 8)
        with (path / fname).open("wb") as f:
            f.write(struct.pack("<Q", len(blob)) + blob)
            if fill:
                chunk = 64 << 20
                for start in range(0, offset, chunk):
                    n = min(chunk, offset - start)
                    f.write((rng.standard_normal(n // 2).astype(np.float32).view(np.uint32) >> 16)
                            .astype(np.uint16).tobytes())
            else:
                f.truncate(8 + len(blob) + offset)
        total += offset
    (path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )
    return total


if __name__ == "__main__":
    import sys

    target = Path(sys.argv[1])
    print(f"wrote {write_checkpoint(target, fill='--fill' in sys.argv) / 1e9:.1f} GB to {target}")
    os.sync()
