"""Tiny random HuggingFace decoder models and the HF-side reference numbers tests compare with.

A ``Case`` is a family, the kwargs of its ``transformers`` config and a seed; ``build`` makes the
model (seeded, eval mode). ``hf_greedy`` is greedy decoding by repeated full forward passes, not
``generate`` (which may suppress EOS or apply generation-config processors).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

# Tiny models gain nothing from intra-op threads, and on a loaded 2-core machine spinning threads
# make each forward pass hundreds of times slower.
torch.set_num_threads(1)

# family -> (config class, model class) in transformers
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "mistral": ("MistralConfig", "MistralForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "phi3": ("Phi3Config", "Phi3ForCausalLM"),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel"),
}


@dataclass(frozen=True)
class Case:
    name: str
    family: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0

    def repro(self) -> str:
        """One line that rebuilds the failing model."""
        return f"repro: case={self.name} family={self.family} seed={self.seed} config={dict(self.kwargs)!r}"

    @property
    def vocab_size(self) -> int:
        return int(self.kwargs["vocab_size"])


def build(case: Case) -> Any:
    """The seeded random ``transformers`` model of ``case``, in eval mode, fp32."""
    config_cls, model_cls = (getattr(transformers, n) for n in FAMILIES[case.family])
    torch.manual_seed(case.seed)
    model = model_cls(config_cls(**case.kwargs)).eval()
    return model


def pass_test_model(config_cls: Any, model_cls: Any, extra: Mapping[str, Any],
                    redraw: Callable[[str], tuple[float, float] | None] = lambda name: None) -> Any:
    """A two-layer decoder (hidden 32, vocab 67, 4 heads over 2 KV heads) for checking that a pass
    keeps what a module computes; ``redraw(name)`` is the range a parameter is drawn from again,
    uniformly (norm scales away from one, biases away from zero, so a rewrite that drops them
    shows), or None to keep it."""
    torch.manual_seed(0)
    cfg = config_cls(vocab_size=67, hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **extra)
    model = model_cls(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if (span := redraw(name)) is not None:
                p.uniform_(*span)
    return model


def assert_sessions_agree(want: Any, got: Any, repro: str, rtol: float, atol: float) -> None:
    """Two reference sessions of a ``pass_test_model`` give the same logits: a prefill of three
    prompts of 5, 9 and 2 tokens, then one decode step."""
    rng = np.random.default_rng(1)
    rows = [rng.integers(0, 67, n).tolist() for n in (5, 9, 2)]
    np.testing.assert_allclose(got.prefill(rows), want.prefill(rows), rtol=rtol, atol=atol, err_msg=repro)
    step = rng.integers(0, 67, (3, 1))
    np.testing.assert_allclose(got.decode(step), want.decode(step), rtol=rtol, atol=atol, err_msg=repro)


def save(model: Any, path: Path, **options: Any) -> Path:
    model.save_pretrained(path, **options)
    return path


def prompts(case: Case, lengths: Sequence[int]) -> list[list[int]]:
    rng = np.random.default_rng(case.seed + 1000)
    return [rng.integers(0, case.vocab_size, n).tolist() for n in lengths]


@torch.no_grad()
def hf_logits(model: Any, ids: Sequence[int]) -> np.ndarray:
    """Logits [seq, vocab] of one prompt run alone."""
    return model(torch.tensor([list(ids)])).logits[0].float().numpy()


@torch.no_grad()
def hf_greedy(model: Any, ids: Sequence[int], steps: int) -> tuple[list[int], np.ndarray]:
    """``steps`` greedy tokens, and the logits [steps, vocab] each was chosen from."""
    seq, tokens, logits = list(ids), [], []
    for _ in range(steps):
        last = model(torch.tensor([seq])).logits[0, -1].float().numpy()
        tok = int(last.argmax())
        logits.append(last)
        tokens.append(tok)
        seq.append(tok)
    return tokens, np.stack(logits)


def _case(name: str, family: str, seed: int, **kwargs: Any) -> Case:
    base = {"num_hidden_layers": 2, "max_position_embeddings": 64}
    if family == "gpt2":
        base = {"n_layer": 2, "n_positions": 64}
    return Case(name, family, {**base, **kwargs}, seed)


def _llama3_rope(factor: float, original: int) -> dict[str, Any]:
    return {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": original, "rope_theta": 500000.0}


# Every family, with non-power-of-two hidden sizes, GQA ratios 1, 2 and 4, head_dim 64 and
# non-power-of-two head dims, vocabularies that are not multiples of 16. Windows of 4-6 with
# prompts of 9+ tokens so the window cuts in prefill and in decode.
CASES = [
    _case("llama-gqa2-hd40", "llama", 1, vocab_size=131, hidden_size=72, intermediate_size=100,
          num_attention_heads=4, num_key_value_heads=2, head_dim=40),
    _case("llama3-rope-gqa4-hd64", "llama", 2, vocab_size=151, hidden_size=96, intermediate_size=88,
          num_attention_heads=4, num_key_value_heads=1, head_dim=64,
          rope_parameters=_llama3_rope(8.0, 16)),
    _case("llama32-tied-gqa2", "llama", 3, vocab_size=129, hidden_size=48, intermediate_size=76,
          num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
          rope_parameters=_llama3_rope(32.0, 8)),
    _case("llama2-linear-gqa1", "llama", 4, vocab_size=99, hidden_size=60, intermediate_size=84,
          num_attention_heads=5, num_key_value_heads=5,
          rope_parameters={"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}),
    _case("llama2-dynamic-gqa2", "llama", 5, vocab_size=101, hidden_size=56, intermediate_size=90,
          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
          rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0,
                           "original_max_position_embeddings": 8}),
    _case("llama-biases-gqa4", "llama", 14, vocab_size=89, hidden_size=32, intermediate_size=44,
          num_attention_heads=4, num_key_value_heads=1, attention_bias=True, mlp_bias=True),
    _case("mistral-window5-gqa4", "mistral", 6, vocab_size=117, hidden_size=56, intermediate_size=72,
          num_attention_heads=4, num_key_value_heads=1, head_dim=14, sliding_window=5),
    _case("mistral-window4-hd64", "mistral", 7, vocab_size=83, hidden_size=80, intermediate_size=64,
          num_attention_heads=2, num_key_value_heads=2, head_dim=64, sliding_window=4),
    _case("qwen2-bias-gqa2", "qwen2", 8, vocab_size=103, hidden_size=40, intermediate_size=68,
          num_attention_heads=4, num_key_value_heads=2),
    _case("qwen2-layer-types-window6-tied", "qwen2", 9, vocab_size=107, hidden_size=48, intermediate_size=60,
          num_attention_heads=6, num_key_value_heads=3, use_sliding_window=True, sliding_window=6,
          max_window_layers=1, tie_word_embeddings=True),
    _case("phi3-fused-gqa2", "phi3", 10, vocab_size=99, hidden_size=48, intermediate_size=70,
          num_attention_heads=4, num_key_value_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2),
    _case("phi3-partial-rotary-gqa4", "phi3", 11, vocab_size=109, hidden_size=96, intermediate_size=52,
          num_attention_heads=4, num_key_value_heads=1, partial_rotary_factor=0.5, sliding_window=6,
          pad_token_id=0, bos_token_id=1, eos_token_id=2),
    _case("gpt2-hd24", "gpt2", 12, vocab_size=113, n_embd=72, n_head=3, bos_token_id=0, eos_token_id=1),
    _case("gpt2-gelu-inner", "gpt2", 13, vocab_size=91, n_embd=40, n_head=4, n_inner=100,
          activation_function="gelu", bos_token_id=0, eos_token_id=1),
]
CASES_BY_NAME = {c.name: c for c in CASES}
