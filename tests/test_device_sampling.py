"""The device sampler (``inferx.runtime.device_sampling``) against the reference ``sample_row``, in
Triton's interpreter (CPU, seconds; TRITON_INTERPRET=1 comes from conftest.py, set before Triton
is imported) and on a GPU (``-m gpu``, TRITON_INTERPRET=0): its generator is the reference's
Philox word for word, each kind of row draws the reference's token, and bad inputs name themselves.

Tokens must be equal, except where fp32 (the kernel) against float64 (the reference) could
legitimately flip a draw: two kept scores within a relative 1e-5, or a filter's boundary within
1e-5 (``fp32_could_pick``). Such rows are counted and must stay rare, so that a kernel drawing
from the wrong set or with the wrong scores still fails.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from inferx.runtime.device_sampling import (
    RowParams,
    _exponential,
    _philox,
    pack_params,
    sample_kernel,
    sample_on_device,
)
from inferx.runtime.sampling import GREEDY, SamplingParams, kept, penalized, philox, sample_row, uniforms

# Triton's interpreter turns a kernel's integer argument into a one-element array and warns when a
# loop bound (range(0, vocab, BLOCK)) reads it back as an int: its own noise, not this kernel's
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")
REL = 1e-5  # how close fp32 and float64 may come before a draw may flip
INTERPRETED = type(sample_kernel).__name__ == "InterpretedFunction"
cpu_only = pytest.mark.skipif(not INTERPRETED, reason="CPU tensors need Triton's interpreter (TRITON_INTERPRET=1)")
gpu_only = pytest.mark.skipif(INTERPRETED or not torch.cuda.is_available(),
                              reason="the compiled kernel needs a CUDA GPU and TRITON_INTERPRET=0")


def fp32_could_pick(logits: np.ndarray, held: np.ndarray, p: SamplingParams, step: int) -> np.ndarray:
    """The tokens [vocab] (a mask) that fp32 arithmetic could draw where the reference's float64
    draws another: kept once each filter's boundary moves by REL its way (a top-k value within REL
    of the k-th, top_p + REL, min_p less REL of itself), and scored within REL of the best token
    kept once each boundary moves REL the other way."""
    z = penalized(np.asarray(logits, np.float64), held, p.repetition_penalty)
    if p.greedy:
        return z >= z.max() - REL * max(1.0, abs(z.max()))
    assert p.seed is not None
    scaled = z / p.temperature
    score = scaled - np.log(-np.log(uniforms(p.seed, step, z.size)))
    loose_k = p.top_k
    if 0 < p.top_k < z.size:
        kth = np.partition(scaled, z.size - p.top_k)[z.size - p.top_k]
        loose_k = int(np.count_nonzero(scaled >= kth - REL * abs(kth)))
    loose = kept(scaled, replace(p, top_k=loose_k, top_p=min(1.0, p.top_p + REL), min_p=p.min_p * (1 - REL)))
    tight = kept(scaled, replace(p, top_p=p.top_p if p.top_p == 1.0 else max(p.top_p - REL, REL),
                                 min_p=min(1.0, p.min_p * (1 + REL))))
    best = score[tight].max()
    return loose & (score >= best - REL * max(1.0, abs(best)))


def check_rows(logits: torch.Tensor, params: list[SamplingParams], steps: list[int],
               presence: torch.Tensor | None = None, block: int | None = None, case: str = "") -> None:
    """sample_on_device against sample_row on every row: tokens equal but for rare fp32 near-ties,
    log-probabilities within 1e-4."""
    tokens, logprobs = sample_on_device(logits, params, steps, presence, block=block)
    raw = logits.float().cpu().numpy()
    holds = presence.cpu().numpy() if presence is not None else np.zeros(raw.shape, bool)
    near = []
    for r, p in enumerate(params):
        held = np.flatnonzero(holds[r])
        want, want_lp = sample_row(raw[r], held, p, steps[r])
        got = int(tokens[r])
        repro = (f"repro: pytest tests/test_device_sampling.py -k '{case}': row {r} ({p}, step {steps[r]}) "
                 f"drew {got}, sample_row {want}")
        if got != want:
            assert fp32_could_pick(raw[r], held, p, steps[r])[got], repro
            near.append(r)
            want_lp = _logprob(raw[r], got)
        assert abs(float(logprobs[r]) - want_lp) < 1e-4, f"{repro}; logprob {float(logprobs[r])} vs {want_lp}"
    assert len(near) <= max(1, len(params) // 20), f"{len(near)} fp32 near-ties in {len(params)} rows: {near}"


def test_the_near_tie_allowance_is_narrow() -> None:
    """``fp32_could_pick`` admits the reference's own token and, on random rows of every kind,
    almost no other: the allowance cannot hide a kernel that draws wrongly."""
    rng = np.random.default_rng(9)
    kinds = [GREEDY, SamplingParams(seed=1), SamplingParams(0.9, top_k=20, seed=2),
             SamplingParams(1.1, top_p=0.8, seed=3), SamplingParams(0.7, min_p=0.1, seed=4),
             SamplingParams(1.0, top_k=30, top_p=0.9, repetition_penalty=1.2, seed=5)]
    others = 0
    for r in range(24):
        p, logits, held = kinds[r % len(kinds)], rng.standard_normal(300) * 2, rng.integers(0, 300, 40)
        admitted = fp32_could_pick(logits, held, p, r)
        want = sample_row(logits, held, p, r)[0]
        assert admitted[want]
        others += int(admitted.sum()) - 1
    assert others <= 1, f"{others} other tokens admitted over 24 rows"


def _logprob(raw: np.ndarray, token: int) -> float:
    x = raw.astype(np.float64)
    return float(x[token] - x.max() - np.log(np.exp(x - x.max()).sum()))


@triton.jit
def _words_kernel(keys, words, exps, N: tl.constexpr):  # type: ignore[no-untyped-def]
    """words[i]: Philox at counters (i, step) keyed keys[0:2] (keys = k0, k1, step as int32 bits);
    exps[i]: the kernel's E for the word in words[i] as given on entry."""
    i = tl.arange(0, N)
    k0 = tl.load(keys).to(tl.uint32, bitcast=True)
    k1 = tl.load(keys + 1).to(tl.uint32, bitcast=True)
    step = tl.load(keys + 2).to(tl.uint32, bitcast=True)
    given = tl.load(words + i).to(tl.uint32, bitcast=True)
    tl.store(exps + i, _exponential(given))
    tl.store(words + i, _philox(k0, k1, i.to(tl.uint32), step).to(tl.int32, bitcast=True))


def _bits32(v: int) -> int:
    return v - (1 << 32) if v >= 1 << 31 else v


@pytest.mark.parametrize("device", [pytest.param("cpu", marks=cpu_only),
                                    pytest.param("cuda", marks=[pytest.mark.gpu, gpu_only])])
@pytest.mark.parametrize("seed, step", [(0, 0), (12345, 7), ((1 << 40) + 977, 3), ((1 << 64) - 1, (1 << 32) - 1)])
def test_the_generator_is_the_references(device: str, seed: int, step: int) -> None:
    """The kernel's Philox words at counters (token, step) are ``philox``'s bit for bit, and its
    E = -log(u) is within 4 ulps of float64's, at both ends of u and across the 1/2 split."""
    n = 64
    edges = [0, 255, 256, (1 << 31) - 256, (1 << 31) - 1, 1 << 31, (1 << 31) + 256, (1 << 32) - 257, (1 << 32) - 1]
    given = np.array(edges + [int(w) for w in philox(seed ^ 1, np.arange(n - len(edges)), 0)], dtype=np.uint64)
    keys = torch.tensor([_bits32(seed & 0xFFFFFFFF), _bits32(seed >> 32), _bits32(step)], dtype=torch.int32)
    words = torch.from_numpy(given.astype(np.uint32).view(np.int32).copy()).to(device)
    exps = torch.zeros(n, dtype=torch.float32, device=device)
    _words_kernel[(1,)](keys.to(device), words, exps, N=n)
    np.testing.assert_array_equal(words.cpu().numpy().view(np.uint32), philox(seed, np.arange(n), step))
    u = ((given >> np.uint64(8)).astype(np.float64) + 0.5) * 2.0**-24
    np.testing.assert_allclose(exps.cpu().numpy(), -np.log(u), rtol=4 * 2.0**-23)


def _logits(rng: np.random.Generator, rows: int, vocab: int, scale: float = 2.0) -> torch.Tensor:
    return torch.from_numpy((rng.standard_normal((rows, vocab)) * scale).astype(np.float32))


@cpu_only
def test_greedy_rows_are_the_argmax() -> None:
    """Greedy rows, ties included (integer logits, many equal maxima: the lowest id wins, across
    blocks too); fp16 logits beside fp32."""
    rng = np.random.default_rng(1)
    logits = torch.cat([_logits(rng, 6, 200), torch.from_numpy(rng.integers(-3, 4, (6, 200)).astype(np.float32))])
    check_rows(logits, [GREEDY] * 12, [0] * 12, case="greedy")
    check_rows(logits[6:], [GREEDY] * 6, [0] * 6, block=64, case="greedy")
    check_rows(logits[:6].half(), [GREEDY, SamplingParams(seed=3)] * 3, [0] * 6, case="greedy")  # fp16 logits


@cpu_only
def test_temperature_rows_draw_the_references_token() -> None:
    rng = np.random.default_rng(2)
    params = [SamplingParams(temperature=t, seed=int(rng.integers(1 << 63)) * 2 + 1) for t in (0.3, 0.7, 1.0, 1.6)] * 2
    check_rows(_logits(rng, 8, 256), params, [int(s) for s in rng.integers(0, 1000, 8)], case="temperature")


@cpu_only
def test_top_k_rows_keep_ties_at_the_kth() -> None:
    """top-k on normal logits and on integer ones, where the k-th value is shared and every token
    holding it stays in the race."""
    rng = np.random.default_rng(3)
    logits = torch.cat([_logits(rng, 4, 160), torch.from_numpy(rng.integers(-2, 3, (4, 160)).astype(np.float32))])
    params = [SamplingParams(temperature=t, top_k=k, seed=s) for s, (t, k) in
              enumerate([(1.0, 1), (0.8, 5), (1.5, 40), (2.0, 159)] * 2)]
    check_rows(logits, params, list(range(8)), case="top_k")
    check_rows(logits[:2], [SamplingParams(top_k=160, seed=1), SamplingParams(top_k=500, seed=2)], [0, 0],
               case="top_k")  # k at or past the vocabulary: off


@cpu_only
def test_top_p_rows_stop_where_the_sorted_sum_does() -> None:
    rng = np.random.default_rng(4)
    logits = torch.cat([_logits(rng, 4, 200, 3.0), torch.from_numpy(rng.integers(-2, 3, (3, 200)).astype(np.float32))])
    params = [SamplingParams(temperature=t, top_p=q, seed=100 + i) for i, (t, q) in
              enumerate([(1.0, 0.5), (0.7, 0.9), (1.3, 0.999), (1.0, 0.1), (1.0, 0.3), (1.0, 0.6), (0.8, 0.85)])]
    check_rows(logits, params, [5] * 7, case="top_p")


@cpu_only
def test_min_p_rows() -> None:
    rng = np.random.default_rng(5)
    params = [SamplingParams(temperature=t, min_p=m, seed=7 + i) for i, (t, m) in
              enumerate([(1.0, 0.05), (0.8, 0.2), (1.5, 0.5), (1.0, 1.0)] * 2)]
    check_rows(_logits(rng, 8, 256), params, list(range(8)), case="min_p")


@cpu_only
def test_repetition_penalty_rows() -> None:
    """The penalty on held tokens (a quarter of the vocabulary), greedy and drawn, above and below 1."""
    rng = np.random.default_rng(6)
    presence = torch.from_numpy(rng.random((12, 200)) < 0.25)
    params = [SamplingParams(temperature=t, repetition_penalty=r, seed=30 + i) for i, (t, r) in
              enumerate([(0.0, 1.3), (0.0, 0.7), (1.0, 1.2), (0.8, 2.0), (1.2, 0.9), (1.0, 1.0)] * 2)]
    check_rows(_logits(rng, 12, 200), params, list(range(12)), presence=presence, case="repetition")


@cpu_only
def test_mixed_rows_in_one_launch() -> None:
    """Every kind of row beside the others in one launch, over several blocks of a vocabulary that
    is no multiple of the block, with a presence mask as uint8."""
    rng = np.random.default_rng(7)
    kinds = [GREEDY, SamplingParams(seed=1), SamplingParams(0.9, top_k=20, seed=2),
             SamplingParams(1.1, top_p=0.8, seed=3), SamplingParams(0.7, min_p=0.1, seed=4),
             SamplingParams(1.0, top_k=30, top_p=0.9, min_p=0.02, repetition_penalty=1.15, seed=(1 << 63) + 5),
             SamplingParams(0.0, repetition_penalty=1.5), SamplingParams(1.3, top_k=200, top_p=1.0, seed=6)]
    presence = torch.from_numpy((rng.random((8, 200)) < 0.1).astype(np.uint8))
    check_rows(_logits(rng, 8, 200), kinds, [int(s) for s in rng.integers(0, 1 << 31, 8)], presence=presence,
               block=128, case="mixed")


@cpu_only
def test_packed_parameters_refill_in_place() -> None:
    """``pack_params(..., out=)`` writes the same tensors (what a replayed CUDA graph reads), with
    the seed split as ``philox`` splits it and the step in its column."""
    first = pack_params([GREEDY, SamplingParams(top_k=3, seed=(7 << 32) + 9)], [0, 0])
    ptrs = (first.floats.data_ptr(), first.ints.data_ptr())
    again = pack_params([SamplingParams(0.5, seed=1), GREEDY], [4, (1 << 32) - 1], out=first)
    assert isinstance(again, RowParams) and (again.floats.data_ptr(), again.ints.data_ptr()) == ptrs
    assert again.floats[:, 0].tolist() == [0.5, 0.0]
    assert again.ints.tolist() == [[0, 1, 0, 4], [0, 0, 0, -1]]
    assert pack_params([SamplingParams(top_k=3, seed=(7 << 32) + 9)], [2]).ints.tolist() == [[3, 9, 7, 2]]


@pytest.mark.parametrize("call, name", [
    (lambda x: sample_on_device(x.double(), [GREEDY] * 2, [0, 0]), "logits"),
    (lambda x: sample_on_device(x[0], [GREEDY] * 2, [0, 0]), "logits"),
    (lambda x: sample_on_device(x.t(), [GREEDY] * 8, [0] * 8), "logits"),
    (lambda x: sample_on_device(x, [GREEDY] * 3, [0, 0]), "params"),
    (lambda x: sample_on_device(x, GREEDY, [0, 0]), "params"),  # type: ignore[arg-type]
    (lambda x: sample_on_device(x, [GREEDY, {"temperature": 1}], [0, 0]), r"params\[1\]"),  # type: ignore[list-item]
    (lambda x: sample_on_device(x, [GREEDY, SamplingParams(0.5)], [0, 0]), r"params\[1\]"),
    (lambda x: sample_on_device(x, [GREEDY] * 2, [0]), "steps"),
    (lambda x: sample_on_device(x, [GREEDY] * 2, [0, -1]), r"steps\[1\]"),
    (lambda x: sample_on_device(x, [GREEDY] * 2, [0, 1 << 32]), r"steps\[1\]"),
    (lambda x: sample_on_device(x, [GREEDY] * 2, [0, 0], torch.zeros(2, 7, dtype=torch.uint8)), "presence"),
    (lambda x: sample_on_device(x, [GREEDY] * 2, [0, 0], torch.zeros(2, 8, dtype=torch.int32)), "presence"),
    (lambda x: sample_on_device(x, [GREEDY, SamplingParams(0.0, repetition_penalty=1.2)], [0, 0]), "presence"),
])
def test_bad_inputs_name_the_argument(call, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=name):
        call(torch.zeros(2, 8))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.gpu
@gpu_only
def test_rows_match_the_reference_on_gpu(dtype: torch.dtype) -> None:
    """A 64-row batch at Llama 3's vocabulary (128256), every kind of row, in bf16 and fp32: the
    compiled kernel (fast exp/log, GPU reductions) draws the reference's tokens."""
    rng = np.random.default_rng(8)
    rows, vocab = 64, 128256
    kinds = [GREEDY, SamplingParams(0.8), SamplingParams(1.0, top_k=50), SamplingParams(0.7, top_p=0.9),
             SamplingParams(1.0, min_p=0.05), SamplingParams(0.9, top_k=40, top_p=0.95, min_p=0.01),
             SamplingParams(1.0, top_k=1000, repetition_penalty=1.2), SamplingParams(0.0, repetition_penalty=1.3)]
    params = [replace(kinds[r % len(kinds)], seed=int(rng.integers(1 << 63)) * 2 + r) for r in range(rows)]
    # peaked rows like a model's (a few large logits over a broad floor) and flat ones
    floor = rng.standard_normal((rows, vocab)) * 2.0
    floor[::2, rng.integers(0, vocab, 20)] += 12.0
    logits = torch.from_numpy(floor.astype(np.float32)).to(dtype).cuda()
    presence = torch.from_numpy(rng.random((rows, vocab)) < 0.001).cuda()
    check_rows(logits, params, [int(s) for s in rng.integers(0, 4096, rows)], presence=presence,
               case=f"on_gpu and {'bf16' if dtype == torch.bfloat16 else 'fp32'}")
