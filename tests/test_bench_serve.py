"""``inferx bench-serve``'s load and its run through the engine and the peer (a tiny model on the
CPU: the figures mean nothing here, the bookkeeping does)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import transformers as T
from click.testing import CliRunner

from inferx.benchmark.serve_load import Load, bench_serve, table
from inferx.cli import main


def test_loads_draw_from_their_seed() -> None:
    load = Load(requests=50, rate=20.0, prompt=(3, 9), output=(2, 5), seed=4)
    a, b = load.draw(100), load.draw(100)
    assert a == b and a != Load(50, 20.0, (3, 9), (2, 5), seed=5).draw(100)
    assert a[0].at == 0.0 and all(x.at <= y.at for x, y in zip(a, a[1:], strict=False))
    assert 0.5 < a[-1].at / (49 / 20.0) < 2.0  # Poisson arrivals at 20 a second
    assert all(3 <= len(r.prompt) <= 9 and 2 <= r.max_new_tokens <= 5 for r in a)
    assert all(r.at == 0.0 for r in Load(5, math.inf).draw(10))
    assert Load(5, prompt=(4, 9), output=(3, 7)).max_context == 15
    shared = Load(6, prompt=(5, 9), shared_prefix=4).draw(100)
    assert all(r.prompt[:4] == shared[0].prompt[:4] and 5 <= len(r.prompt) <= 9 for r in shared)
    for bad in (dict(requests=0), dict(rate=0.0), dict(prompt=(5, 4)), dict(output=(0, 3)),
                dict(prompt=(5, 9), shared_prefix=5)):
        with pytest.raises(ValueError):
            Load(**bad)  # type: ignore[arg-type]


def _tiny() -> T.LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return T.LlamaForCausalLM(cfg).eval()


def test_bench_serve_runs_the_engine(tmp_path: Path) -> None:
    """On a paged cache, prompts with a shared prefix of two blocks."""
    load = Load(requests=5, rate=200.0, prompt=(9, 12), output=(2, 4), seed=1, shared_prefix=8)
    lines: list[str] = []
    result = bench_serve(_tiny(), tmp_path, load, rows=2, device="cpu", target="cpu", dtype="fp32", peers=(),
                         kv_block_size=4, say=lines.append)
    (inferx,) = result["systems"]
    assert inferx["system"] == "inferx" and inferx["requests"] == 5
    assert inferx["tokens"] == sum(a.max_new_tokens for a in load.draw(64))
    assert inferx["ttft_s"]["p50"] is not None and inferx["tpot_s"]["p99"] is not None
    assert "| inferx |" in table(result) and any("compiling" in line for line in lines)


@pytest.mark.thorough
def test_bench_serve_runs_the_peer(tmp_path: Path) -> None:
    """transformers' generate_batch on the same load (all at once, one output length)."""
    load = Load(requests=5, rate=math.inf, prompt=(2, 6), output=(3, 3), seed=1)
    result = bench_serve(_tiny(), tmp_path, load, rows=2, device="cpu", target="cpu", dtype="fp32",
                         peers=("generate_batch",))
    inferx, peer = result["systems"]
    assert inferx["tokens"] == 15 and peer["system"] == "transformers generate_batch" and peer["tokens"] == 15


def test_bench_serve_options_are_checked() -> None:
    for args, name in ((["--prompt-len", "9:3"], "--prompt-len"), (["--output-len", "x"], "--output-len"),
                       (["--rate", "fast"], "--rate"), (["--rate", "0"], "--rate"),
                       (["--prompt-len", "4:8", "--shared-prefix", "4"], "--shared-prefix")):
        result = CliRunner().invoke(main, ["bench-serve", *args])
        assert result.exit_code == 1 and result.stderr.strip().startswith("error: ") and name in result.stderr, \
            result.output
