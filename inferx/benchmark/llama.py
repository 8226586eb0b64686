"""A plain PyTorch Llama with a static KV cache: the eager and torch.compile peer of the benchmark.

The math of HF ``LlamaForCausalLM`` (RMSNorm, rotate-half RoPE, grouped-query attention through
``F.scaled_dot_product_attention``, SwiGLU) in a few dozen lines, in the style of gpt-fast. It
reads the HF model's own parameter tensors (no copy, except q, k and v concatenated into one
matrix as gpt-fast does) and its rotary frequencies (``inv_freq`` and
``attention_scaling`` of ``model.model.rotary_emb``, which carry any RoPE scaling), so it computes
the same function on the same weights.

The KV cache is one ``[batch, kv_heads, length, head_dim]`` buffer per layer for K and for V,
allocated by ``setup_cache``. Attention reads the whole buffer, masked to the positions at or
before each query, so a cache of exactly ``context`` positions costs exactly ``context`` positions
of reads. Query heads of one KV head are stacked along the query axis (``[batch, kv_heads,
group * seq, head_dim]``), so GQA needs no copy of K or V.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

ATTEND = ("masked", "causal", "all")


class _Block(nn.Module):
    """One decoder layer's weights (registered as parameters by ``PlainLlama``)."""

    attn_norm: torch.Tensor
    wqkv: torch.Tensor
    wo: torch.Tensor
    mlp_norm: torch.Tensor
    w_gate: torch.Tensor
    w_up: torch.Tensor
    w_down: torch.Tensor


class PlainLlama(nn.Module):
    """``prefill`` and ``decode`` over a static KV cache, on the weights of an HF Llama model."""

    def __init__(self, hf_model: Any):
        super().__init__()
        cfg = hf_model.config
        self.num_heads = cfg.num_attention_heads
        self.num_kv_heads = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = cfg.rms_norm_eps
        inner = hf_model.model
        rotary = inner.rotary_emb

        def share(t: torch.Tensor) -> nn.Parameter:
            return nn.Parameter(t.detach(), requires_grad=False)

        self.embed = share(inner.embed_tokens.weight)
        self.norm = share(inner.norm.weight)
        self.lm_head = share(hf_model.lm_head.weight)  # the embedding itself when tied
        self.layers: list[_Block] = nn.ModuleList()  # type: ignore[assignment]
        for layer in inner.layers:
            a, m = layer.self_attn, layer.mlp
            block = _Block()
            # q, k and v in one matrix, one GEMM (a copy: q/k/v are a few percent of the weights)
            wqkv = torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]).detach()
            for name, t in (("attn_norm", layer.input_layernorm.weight), ("wqkv", wqkv), ("wo", a.o_proj.weight),
                            ("mlp_norm", layer.post_attention_layernorm.weight), ("w_gate", m.gate_proj.weight),
                            ("w_up", m.up_proj.weight), ("w_down", m.down_proj.weight)):
                block.register_parameter(name, share(t))
            self.layers.append(block)
        self.register_buffer("inv_freq", rotary.inv_freq.detach().float().clone(), persistent=False)
        self.rope_scale = float(getattr(rotary, "attention_scaling", 1.0))
        self.k_cache: list[torch.Tensor] = []
        self.v_cache: list[torch.Tensor] = []

    def setup_cache(self, batch: int, length: int, fill: str = "zeros", seed: int = 0) -> None:
        """Allocates the KV cache for ``batch`` sequences of ``length`` positions, replacing any
        earlier one. ``fill="random"`` fills it with N(0, 1) values (for timing, where a decode
        step at position ``length - 1`` then reads ``length`` positions of non-zero data)."""
        self.k_cache, self.v_cache = [], []
        shape = (batch, self.num_kv_heads, length, self.head_dim)
        gen = torch.Generator(device=self.embed.device).manual_seed(seed) if fill == "random" else None
        for _ in self.layers:
            for cache in (self.k_cache, self.v_cache):
                if gen is None:
                    t = torch.zeros(shape, dtype=self.embed.dtype, device=self.embed.device)
                else:
                    t = torch.randn(shape, generator=gen, dtype=self.embed.dtype, device=self.embed.device)
                if t.is_cuda:
                    torch._dynamo.mark_static_address(t)  # mutated in place: CUDA graphs keep the address
                cache.append(t)

    def free_cache(self) -> None:
        """Drops the KV cache (its memory returns to torch's allocator)."""
        self.k_cache, self.v_cache = [], []

    def _rms(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * w

    def _rope(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq: torch.Tensor = self.inv_freq  # type: ignore[assignment]
        freqs = positions.float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.rope_scale).to(dtype), (emb.sin() * self.rope_scale).to(dtype)

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, attend: str = "masked",
                last: bool = False) -> torch.Tensor:
        """Logits ``[batch, seq, vocab]`` (``[batch, 1, vocab]`` of the last token with ``last``:
        the final norm and LM head over it alone) for ``input_ids`` ``[batch, seq]`` at ``positions``
        ``[seq]`` (the same for every sequence, ascending); writes their K and V into the cache
        at those positions. Which cache positions each query sees, by ``attend`` (ATTEND):

        - "masked": those at or before its own position (any step; a mask is built);
        - "causal": a promise that ``positions`` is ``0 .. seq - 1`` (a prefill into an empty cache):
          causal attention over the new keys alone, no mask, so SDPA may take its flash kernel;
        - "all": a promise that ``seq`` is 1 and its position is the cache's last (a decode step
          whose cache holds exactly the context): every position, no mask."""
        if attend not in ATTEND:
            raise ValueError(f"attend={attend!r}: use one of {', '.join(ATTEND)}")
        batch, seq = input_ids.shape
        heads, kv_heads, dim = self.num_heads, self.num_kv_heads, self.head_dim
        group = heads // kv_heads
        x = F.embedding(input_ids, self.embed)
        cos, sin = self._rope(positions, x.dtype)  # [seq, dim]
        mask = None
        if attend == "masked":
            length = self.k_cache[0].shape[2]
            visible = positions[:, None] >= torch.arange(length, device=positions.device)[None, :]  # [seq, length]
            mask = visible.repeat(group, 1)  # rows ordered (group, seq), like the stacked queries
        for layer, k_cache, v_cache in zip(self.layers, self.k_cache, self.v_cache, strict=True):
            h = self._rms(x, layer.attn_norm)
            q, k, v = F.linear(h, layer.wqkv).split([heads * dim, kv_heads * dim, kv_heads * dim], dim=-1)
            q = q.view(batch, seq, heads, dim).transpose(1, 2)
            k = k.view(batch, seq, kv_heads, dim).transpose(1, 2)
            v = v.view(batch, seq, kv_heads, dim).transpose(1, 2)
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
            k_cache[:, :, positions] = k
            v_cache[:, :, positions] = v
            if attend == "causal":
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).transpose(1, 2)
            else:  # query head h belongs to KV head h // group: stack a KV head's queries along seq
                q = q.reshape(batch, kv_heads, group * seq, dim)
                y = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
                y = y.view(batch, kv_heads, group, seq, dim).permute(0, 3, 1, 2, 4)
            y = y.reshape(batch, seq, heads * dim)
            x = x + F.linear(y, layer.wo)
            h = self._rms(x, layer.mlp_norm)
            x = x + F.linear(F.silu(F.linear(h, layer.w_gate)) * F.linear(h, layer.w_up), layer.w_down)
        if last:
            x = x[:, -1:]
        return F.linear(self._rms(x, self.norm), self.lm_head)
