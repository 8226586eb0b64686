"""The floor under a step: bytes it must move over the measured copy rate, FLOPs it must do over
the measured matmul rate.

Counts take a Llama config (HF field names) and assume bf16 weights, KV cache and logits (2
bytes; ``elem`` changes it). What a step must move, each input read once and each output written
once:

- decode (one token per sequence): every weight once, the LM head included; the embedding table
  is not read (only ``batch`` rows are gathered), except that a tied embedding *is* the LM head and
  is counted once as such; the KV cache of ``context`` positions (the new token's included) read
  once per layer, K and V; the new K and V written; the gathered rows and the logits.
- prefill (``seq`` tokens from an empty cache): the same weights once, K and V of every token
  written, the logits of every token written; FLOPs 2 per weight per token for the matmuls (the LM
  head on every token, as the session's prefill returns every token's logits) plus causal attention
  (QK^T and PV over the ``i + 1`` visible positions of token ``i``).

Activations between kernels are not counted: they are small and stay in L2 when kernels are fused.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Dims:
    """The sizes a roofline needs, from an HF Llama config."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool

    @staticmethod
    def of(config: Any) -> Dims:
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return Dims(hidden=config.hidden_size, intermediate=config.intermediate_size,
                    layers=config.num_hidden_layers, heads=config.num_attention_heads,
                    kv_heads=config.num_key_value_heads, head_dim=head_dim, vocab=config.vocab_size,
                    tied=bool(config.tie_word_embeddings))

    def layer_params(self) -> int:
        """Weights of one decoder layer: q, k, v, o, gate, up, down and the two norms."""
        q = self.hidden * self.heads * self.head_dim
        kv = 2 * self.hidden * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * self.hidden
        mlp = 3 * self.hidden * self.intermediate
        return q + kv + o + mlp + 2 * self.hidden

    def matmul_params(self) -> int:
        """Weights that multiply activations in a step: every layer's matrices and the LM head."""
        return self.layers * (self.layer_params() - 2 * self.hidden) + self.vocab * self.hidden

    def step_weight_params(self) -> int:
        """Weights a step reads once: every layer, the final norm and the LM head (the tied
        embedding counted once, as the LM head; an untied embedding table is not read)."""
        return self.layers * self.layer_params() + self.hidden + self.vocab * self.hidden


def int4_weight_bytes(dims: Dims, group: int, symmetric: bool, head: bool, elem: int = 2) -> int:
    """Bytes of the weights a step reads when every layer's matrices (and with ``head`` the LM
    head) are int4: half a byte per weight, and per ``group`` weights a scale (and, unless
    ``symmetric``, a minimum) of ``elem`` bytes; norms (and a float LM head) stay ``elem`` bytes."""
    per = 0.5 + elem * (1 if symmetric else 2) / group
    layers = dims.layers * (dims.layer_params() - 2 * dims.hidden)
    lm_head = dims.vocab * dims.hidden
    norms = dims.layers * 2 * dims.hidden + dims.hidden
    return round(layers * per + norms * elem + lm_head * (per if head else elem))


def fp8_weight_bytes(dims: Dims, head: bool, elem: int = 2) -> int:
    """Bytes of the weights a step reads when every layer's matrices (and with ``head`` the LM
    head) are FP8: a byte per weight and a 4-byte scale per output channel; norms (and a float LM
    head) stay ``elem`` bytes."""
    layers = dims.layers * (dims.layer_params() - 2 * dims.hidden)
    # output channels of q, k, v, o, gate, up, down
    rows = dims.layers * ((dims.heads + 2 * dims.kv_heads) * dims.head_dim + 2 * dims.hidden + 2 * dims.intermediate)
    lm_head = dims.vocab * dims.hidden
    norms = dims.layers * 2 * dims.hidden + dims.hidden
    return round(layers + 4 * rows + norms * elem + (lm_head + 4 * dims.vocab if head else lm_head * elem))


def decode_bytes(dims: Dims, batch: int, context: int, elem: int = 2, weights: int | None = None,
                 kv_elem: int | None = None) -> dict[str, int]:
    """Bytes one decode step must move, by part (see the module docstring); ``total`` sums them.
    ``weights``: the weights' bytes where they are not ``elem`` bytes each (``int4_weight_bytes``);
    ``kv_elem``: a KV-cache element's bytes where not ``elem`` (1 for an FP8 cache)."""
    kv_row = dims.kv_heads * dims.head_dim * (elem if kv_elem is None else kv_elem)
    parts = {
        "weights": dims.step_weight_params() * elem if weights is None else weights,
        "kv_read": 2 * dims.layers * batch * context * kv_row,
        "kv_write": 2 * dims.layers * batch * kv_row,
        "embedding_rows": batch * dims.hidden * elem,
        "logits": batch * dims.vocab * elem,
    }
    parts["total"] = sum(parts.values())
    return parts


def prefill_bytes(dims: Dims, batch: int, seq: int, elem: int = 2, last: bool = False,
                  weights: int | None = None) -> dict[str, int]:
    """Bytes a prefill of ``seq`` tokens per sequence must move, by part; ``total`` sums them.
    ``last``: the logits of each sequence's last token alone; ``weights`` as ``decode_bytes``'s."""
    tokens = batch * seq
    parts = {
        "weights": dims.step_weight_params() * elem if weights is None else weights,
        "kv_write": 2 * dims.layers * tokens * dims.kv_heads * dims.head_dim * elem,
        "embedding_rows": tokens * dims.hidden * elem,
        "logits": (batch if last else tokens) * dims.vocab * elem,
    }
    parts["total"] = sum(parts.values())
    return parts


def prefill_flops(dims: Dims, batch: int, seq: int, last: bool = False) -> int:
    """Multiply-add FLOPs (2 per MAC) of a prefill of ``seq`` tokens per sequence, causal attention;
    ``last``: the LM head over each sequence's last token alone."""
    matmuls = 2 * dims.matmul_params() * batch * seq
    if last:
        matmuls -= 2 * dims.vocab * dims.hidden * batch * (seq - 1)
    visible = seq * (seq + 1) // 2  # token i sees i + 1 positions
    attention = 2 * 2 * dims.layers * batch * dims.heads * dims.head_dim * visible
    return matmuls + attention


def decode_flops(dims: Dims, batch: int, context: int) -> int:
    """FLOPs of one decode step: 2 per weight per sequence, plus attention over ``context`` positions."""
    return 2 * dims.matmul_params() * batch + 2 * 2 * dims.layers * batch * dims.heads * dims.head_dim * context


@dataclass(frozen=True)
class Ceilings:
    """Measured device rates: bytes per second of a device-to-device copy (read plus write) and
    FLOPs per second of a large bf16 matmul."""

    copy_bytes_per_s: float
    matmul_flops_per_s: float

    def decode_ms(self, dims: Dims, batch: int, context: int, weights: int | None = None,
                  kv_elem: int | None = None) -> float:
        """Decode's floor: its bytes over the copy rate (its FLOPs are far under the matmul ceiling,
        and the larger of the two is taken anyway); ``weights`` and ``kv_elem`` as ``decode_bytes``'s."""
        return max(decode_bytes(dims, batch, context, weights=weights, kv_elem=kv_elem)["total"]
                   / self.copy_bytes_per_s,
                   decode_flops(dims, batch, context) / self.matmul_flops_per_s) * 1e3

    def prefill_ms(self, dims: Dims, batch: int, seq: int, last: bool = False, weights: int | None = None) -> float:
        """Prefill's floor: the larger of its FLOPs over the matmul rate and its bytes over the copy rate."""
        return max(prefill_flops(dims, batch, seq, last) / self.matmul_flops_per_s,
                   prefill_bytes(dims, batch, seq, last=last, weights=weights)["total"] / self.copy_bytes_per_s) * 1e3


def measure_ceilings(device: str, iters: int = 20) -> Ceilings:
    """Copy rate (2 GiB copied on a CUDA device, 64 MiB on the CPU) and bf16 matmul rate (8192^3 on
    CUDA, 512^3 on the CPU, where the numbers only exercise the code), each the median of ``iters``
    timed runs after warm-up; inputs are random, never zeros."""
    import torch

    from inferx.benchmark.peers import time_ms

    cuda = device.startswith("cuda")
    n = 2 * 1024**3 if cuda else 64 * 1024**2
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    copy_ms = statistics.median(time_ms(lambda: dst.copy_(src), device, warmup=3, iters=iters))
    size = 8192 if cuda else 512
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, generator=gen, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, generator=gen, device=device, dtype=torch.bfloat16)
    mm_ms = statistics.median(time_ms(lambda: torch.matmul(a, b), device, warmup=3, iters=iters))
    return Ceilings(copy_bytes_per_s=2 * n / (copy_ms / 1e3), matmul_flops_per_s=2 * size**3 / (mm_ms / 1e3))
