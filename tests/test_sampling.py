"""Sampling (``inferx.runtime.sampling``) and ``generate``'s sampling options (CPU, seconds): the
generator is Philox4x32-10 as Triton's ``tl.randint`` computes it, each filter keeps what its
definition says, draws follow the kept distribution, seeded generation repeats whatever the
batch, greedy is unchanged, logprobs are the model's, and bad parameters are clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers as T

import inferx
from inferx.runtime.kernel_source import KernelSource, Param
from inferx.runtime.sampling import (
    GREEDY,
    SamplingError,
    SamplingParams,
    kept,
    penalized,
    philox,
    sample_row,
    uniforms,
)
from inferx.runtime.session import SessionError
from inferx.runtime.triton_kernels import load_kernel

RANDINT = '''
import triton
import triton.language as tl


@triton.jit
def randint(out, seed, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out + i, tl.randint(seed, i))
'''


@pytest.mark.parametrize("seed", [0, 12345, (1 << 40) + 977])
def test_philox_is_tritons_randint(seed: int) -> None:
    """The generator a device kernel draws with (``tl.randint``: Philox4x32-10 at counters (i, 0,
    0, 0)) gives the same words as the host's, bit for bit (Triton's interpreter)."""
    ks = KernelSource("randint", "test", RANDINT, (Param("out", "out", index=0), Param("seed", "symbol")),
                      ("1",), {"N": 64})
    out = torch.zeros(64, dtype=torch.int32)
    load_kernel(ks, interpret=True)[(1,)](out, seed, N=64)
    np.testing.assert_array_equal(out.numpy().view(np.uint32), philox(seed, np.arange(64), 0))
    assert len(set(philox(seed, np.arange(64), 1)) & set(philox(seed, np.arange(64), 0))) == 0


def test_uniforms_are_in_the_open_interval_and_look_uniform() -> None:
    u = uniforms(7, 3, 200_000)
    assert u.min() > 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    assert not np.array_equal(uniforms(7, 3, 100), uniforms(7, 4, 100))
    assert np.array_equal(uniforms(7, 3, 100), uniforms(7, 3, 200)[:100])  # a token's draw ignores the vocab


def test_each_filter_keeps_what_its_definition_says() -> None:
    logits = np.log(np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04]))
    keep = lambda **kw: np.flatnonzero(kept(logits, SamplingParams(**kw))).tolist()  # noqa: E731
    assert keep(top_k=2) == [0, 1]
    assert keep(top_p=0.64) == [0, 1]  # 0.4 + 0.25 = 0.65 reaches 0.64
    assert keep(top_p=0.66) == [0, 1, 2]
    assert keep(top_p=1.0) == list(range(6))
    assert keep(min_p=0.5) == [0, 1]  # at least 0.2
    assert keep(top_k=3, min_p=0.5) == [0, 1]  # of the top 3 renormalized: 0.5, 0.31, 0.19
    # of the top 4 renormalized: 0.44, 0.28, 0.17, 0.11: three sum to 0.89
    assert keep(top_k=4, top_p=0.88) == [0, 1, 2]
    assert keep(top_k=4, top_p=0.9) == [0, 1, 2, 3]
    ties = np.zeros(5)
    assert np.flatnonzero(kept(ties, SamplingParams(top_k=2))).tolist() == [0, 1, 2, 3, 4]  # ties at the k-th kept


def test_the_repetition_penalty_is_transformers() -> None:
    logits = np.array([2.0, -1.0, 0.5, 3.0])
    got = penalized(logits, np.array([0, 1, 1]), 2.0)
    np.testing.assert_allclose(got, [1.0, -2.0, 0.5, 3.0])
    from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

    want = RepetitionPenaltyLogitsProcessor(2.0)(torch.tensor([[0, 1, 1]]), torch.from_numpy(logits[None]))
    np.testing.assert_allclose(got, want[0].numpy())


def test_draws_follow_the_kept_distribution() -> None:
    """20,000 draws (each its own seed) from softmax(logits / T) within top-k: frequencies within
    4 standard errors of the renormalized probabilities; filtered tokens never drawn."""
    logits = np.log(np.array([0.5, 0.2, 0.15, 0.1, 0.05]))
    p = SamplingParams(temperature=0.7, top_k=3)
    draws = np.array([sample_row(logits, np.zeros(0, np.int64), SamplingParams(0.7, 3, seed=s), 0)[0]
                      for s in range(20_000)])
    z = np.exp(logits[:3] / p.temperature)
    want = z / z.sum()
    freq = np.bincount(draws, minlength=5) / draws.size
    assert freq[3:].sum() == 0
    se = np.sqrt(want * (1 - want) / draws.size)
    assert np.all(np.abs(freq[:3] - want) < 4 * se), (freq, want)


def test_greedy_and_top_k_1_are_the_argmax() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        logits = rng.standard_normal(50)
        want = int(np.argmax(logits))
        assert sample_row(logits, np.zeros(0, np.int64), GREEDY, 0)[0] == want
        assert sample_row(logits, np.zeros(0, np.int64), SamplingParams(temperature=1.5, top_k=1, seed=3), 5)[0] == want


@pytest.mark.parametrize("kw, name", [
    (dict(temperature=-1), "temperature"), (dict(temperature=float("nan")), "temperature"),
    (dict(top_p=0), "top_p"), (dict(top_p=1.5), "top_p"), (dict(min_p=2), "min_p"), (dict(top_k=-1), "top_k"),
    (dict(top_k=2.5), "top_k"), (dict(repetition_penalty=0), "repetition_penalty"), (dict(seed=-1), "seed"),
    (dict(seed=1 << 64), "seed"), (dict(temperature="hot"), "temperature"),
])
def test_bad_parameters_name_themselves(kw: dict, name: str) -> None:
    with pytest.raises(SamplingError, match=name):
        SamplingParams(**kw)


@pytest.fixture(scope="module")
def session():  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = T.LlamaForCausalLM(cfg).eval()
    return inferx.import_model(model, dtype="f32").reference_session(max_batch=3, max_context=40)


PROMPTS = [[5, 17, 3, 88], [1, 2, 3, 4, 5, 6], [40, 41]]


def test_seeded_generation_repeats_whatever_the_batch(session) -> None:  # type: ignore[no-untyped-def]
    """A seeded sequence draws the same tokens in any row beside any others, again and again;
    other seeds draw others; one SamplingParams for a batch gives each row its own stream. (The
    batches compared have one shape, so their logits come by one computation path.)"""
    params = [SamplingParams(temperature=1.0, top_p=0.95, seed=s) for s in (11, 22, 33)]
    together = session.generate(PROMPTS, 12, sampling=params, stop_at_eos=False)
    again = session.generate(PROMPTS, 12, sampling=params, stop_at_eos=False)
    np.testing.assert_array_equal(together, again)
    moved = session.generate([PROMPTS[1], PROMPTS[2], PROMPTS[0]], 12, sampling=[params[1], params[2], params[0]],
                             stop_at_eos=False)
    np.testing.assert_array_equal(moved[0], together[1])
    other = session.generate(PROMPTS, 12, sampling=[SamplingParams(seed=s + 1) for s in (11, 22, 33)],
                             stop_at_eos=False)
    assert not np.array_equal(other, together)
    same = session.generate([PROMPTS[0], PROMPTS[0]], 12, sampling=SamplingParams(seed=5), stop_at_eos=False)
    assert not np.array_equal(same[0], same[1])  # seeds 5 and 6


def test_greedy_generation_and_logprobs(session) -> None:  # type: ignore[no-untyped-def]
    """Without sampling, generate is greedy as before; with logprobs, each token's
    log-probability is the model's (log-softmax of the logits a prefill of the whole row gives)."""
    plain = session.generate(PROMPTS, 6, stop_at_eos=False)
    tokens, lps = session.generate(PROMPTS, 6, stop_at_eos=False, logprobs=True, sampling=GREEDY)
    np.testing.assert_array_equal(plain, tokens)
    assert lps.shape == tokens.shape and np.all(lps <= 0)
    row = PROMPTS[2] + tokens[2].tolist()
    session.reset()
    logits = np.asarray(session.prefill(np.array([row])), dtype=np.float64)[0]
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    want = [logp[len(PROMPTS[2]) - 1 + i, t] for i, t in enumerate(tokens[2])]
    np.testing.assert_allclose(lps[2], want, atol=1e-4)


def test_generate_refuses_bad_sampling(session) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SessionError, match="2 parameter sets for 3 sequences"):
        session.generate(PROMPTS, 2, sampling=[GREEDY, GREEDY])
    with pytest.raises(SessionError, match=r"sampling\[1\] must be a SamplingParams"):
        session.generate(PROMPTS, 2, sampling=[GREEDY, {"temperature": 1}, GREEDY])
    with pytest.raises(SessionError, match="logprobs must be True or False"):
        session.generate(PROMPTS, 2, logprobs="yes")


def test_a_step_draws_the_same_tokens_on_the_host_and_through_the_device_sampler() -> None:
    """``draw``'s two ways for a step's logits [n, 1, vocab]: host arrays row by row
    (``sampling.sample_rows``) and a torch tensor through the device sampler's kernel (here in Triton's
    interpreter): the same tokens for the rows asked, in their order, greedy, sampled, filtered
    and penalized, and log-probabilities only where asked."""
    from inferx.runtime.draw import draw, draw_on_device

    rng = np.random.default_rng(3)
    logits = (rng.standard_normal((6, 1, 300)) * 3).astype(np.float32)
    rows = [4, 0, 2, 5]
    params = [GREEDY, SamplingParams(0.8, seed=7), SamplingParams(1.2, top_k=20, top_p=0.9, seed=9),
              SamplingParams(0.7, min_p=0.05, repetition_penalty=1.3, seed=11)]
    held = [np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.array([3, 17, 17, 250])]
    steps, want = [0, 3, 1, 8], [True, False, True, True]
    host_t, host_lp = draw(logits, rows, held, params, steps, want)
    dev_t, dev_lp = draw_on_device(torch.from_numpy(logits), rows, held, params, steps, want)
    alone = [sample_row(logits[r, 0], h, p, s)[0] for r, h, p, s in zip(rows, held, params, steps, strict=True)]
    repro = "repro: pytest tests/test_sampling.py -k device_sampler"
    assert host_t.tolist() == alone and dev_t.tolist() == alone, (host_t, dev_t, alone, repro)
    assert host_lp[1] == 0.0 and dev_lp[1] == 0.0 and np.all(host_lp[[0, 2, 3]] < 0), (host_lp, repro)
    assert np.allclose(host_lp, dev_lp, atol=1e-4), (host_lp, dev_lp, repro)
