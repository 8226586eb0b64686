"""Sampling the next token from a step's logits: the parameters a request states, their checks,
and the reference sampler every runtime's ``generate`` uses.

The order of the transforms (each optional): the repetition penalty on the logits of tokens the
sequence already holds (prompt and generated: a positive logit divided by it, a negative one
multiplied, as HF transformers does); the temperature; then the filters, each on the
distribution the previous left: top-k (tokens whose logit is at least the k-th largest: ties
at the k-th are all kept), top-p (the fewest most probable tokens whose probabilities sum to
``top_p`` or more: every token at least as probable as the last one taken), min-p (tokens at
least ``min_p`` times as probable as the most probable). Temperature 0 is greedy: the largest
logit after the penalty, the lowest id among equals; the filters do not change it.

The draw is a race of exponentials (equivalently, the Gumbel-max trick): token i's score is its
logit over the temperature minus ``log(E_i)``, with ``E_i = -log(u_i)`` and ``u_i`` uniform in
(0, 1), and the highest score among the kept tokens wins: a draw from the kept tokens'
renormalized distribution, with no sort and no prefix sum over the vocabulary, which is why a
device kernel can make the same draw. ``u_i`` comes from a counter-based generator, Philox4x32-10
(``philox``), keyed by the request's seed, its counter the token id and the step: a seeded request
draws the same tokens whatever its batch, its row, or the requests beside it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

MAX_SEED = (1 << 64) - 1


class SamplingError(ValueError):
    """A sampling parameter out of its range; the message names it and the value, ``param`` the
    parameter (None for a set of parameters that does not fit the batch)."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class SamplingParams:
    """How a request draws its tokens (module docstring). ``temperature`` 0 is greedy; ``top_k``
    0 and ``top_p`` 1 and ``min_p`` 0 and ``repetition_penalty`` 1 are off; ``seed`` (0 ..
    2^64 - 1) makes the draws repeat, None draws a seed from the operating system."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        def number(name: str, lo: float, hi: float, lo_open: bool = False) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
                raise SamplingError(f"{name} must be a number, got {v!r}", name)
            if v < lo or v > hi or (lo_open and v == lo):
                bound = f"({lo}, {hi}]" if lo_open else f"[{lo}, {hi}]"
                raise SamplingError(f"{name} must be in {bound}, got {v!r}", name)

        number("temperature", 0.0, 100.0)
        number("top_p", 0.0, 1.0, lo_open=True)
        number("min_p", 0.0, 1.0)
        number("repetition_penalty", 0.0, 100.0, lo_open=True)
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, (int, np.integer)) or self.top_k < 0:
            raise SamplingError(f"top_k must be a whole number >= 0 (0: off), got {self.top_k!r}", "top_k")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer))
                                      or not 0 <= self.seed <= MAX_SEED):
            raise SamplingError(f"seed must be a whole number in [0, 2^64 - 1] or None, got {self.seed!r}", "seed")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def seeded(self) -> SamplingParams:
        """These parameters with a seed: its own, or one drawn from the operating system."""
        return self if self.seed is not None else replace(self, seed=int.from_bytes(os.urandom(8), "little"))


GREEDY = SamplingParams(temperature=0.0)

# Philox4x32-10: the multipliers of its rounds and the Weyl increments of its key
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
MASK32 = 0xFFFFFFFF


def philox(seed: int, c0: np.ndarray, c1: int, c2: int = 0, c3: int = 0, rounds: int = 10) -> np.ndarray:
    """The first output word of Philox4x32-``rounds`` keyed by the 64-bit ``seed`` at counters
    (c0[i], c1, c2, c3), as uint32 [len(c0)]: the generator of Salmon et al. (2011), as CUDA's
    curand and Triton's ``tl.randint`` compute it."""
    k0 = np.uint64(seed & MASK32)
    k1 = np.uint64((seed >> 32) & MASK32)
    x0 = np.asarray(c0, dtype=np.uint64) & np.uint64(MASK32)
    x1 = np.full_like(x0, c1 & MASK32)
    x2 = np.full_like(x0, c2 & MASK32)
    x3 = np.full_like(x0, c3 & MASK32)
    m0, m1, mask = np.uint64(PHILOX_M0), np.uint64(PHILOX_M1), np.uint64(MASK32)
    for _ in range(rounds):
        p0, p1 = m0 * x0, m1 * x2  # 32 x 32 -> 64-bit products
        x0, x1, x2, x3 = ((p1 >> np.uint64(32)) ^ x1 ^ k0, p1 & mask, (p0 >> np.uint64(32)) ^ x3 ^ k1, p0 & mask)
        k0 = (k0 + np.uint64(PHILOX_W0)) & mask
        k1 = (k1 + np.uint64(PHILOX_W1)) & mask
    return x0.astype(np.uint32)


def uniforms(seed: int, step: int, n: int) -> np.ndarray:
    """n uniforms in (0, 1) for draw ``step`` of a request seeded ``seed``, one per token id:
    the top 24 bits of Philox's word plus half a unit (exact in fp32, never 0 or 1), float64."""
    words = philox(seed, np.arange(n, dtype=np.uint64), step)
    return ((words >> np.uint32(8)).astype(np.float64) + 0.5) * 2.0**-24


def penalized(logits: np.ndarray, held: np.ndarray, penalty: float) -> np.ndarray:
    """``logits`` [vocab] (float64) with the repetition penalty applied to the token ids in
    ``held`` (the sequence so far)."""
    out = np.array(logits, dtype=np.float64)
    if penalty != 1.0 and held.size:
        ids = np.unique(held)
        v = out[ids]
        out[ids] = np.where(v > 0, v / penalty, v * penalty)
    return out


def kept(scaled: np.ndarray, p: SamplingParams) -> np.ndarray:
    """The mask of tokens the filters keep, given the logits over the temperature [vocab]."""
    keep = np.ones(scaled.shape, dtype=bool)
    if 0 < p.top_k < scaled.size:
        kth = np.partition(scaled, scaled.size - p.top_k)[scaled.size - p.top_k]
        keep &= scaled >= kth
    if p.top_p < 1.0 or p.min_p > 0.0:
        z = np.where(keep, scaled, -np.inf)
        prob = np.exp(z - z.max())
        prob /= prob.sum()
        if p.top_p < 1.0:
            order = np.argsort(-prob, kind="stable")
            cum = np.cumsum(prob[order])
            last = int(np.searchsorted(cum, p.top_p))  # the first place the sum reaches top_p
            threshold = prob[order[min(last, order.size - 1)]]
            keep &= prob >= threshold
            prob = np.where(keep, prob, 0.0)
            prob /= prob.sum()
        if p.min_p > 0.0:
            keep &= prob >= p.min_p * prob.max()
    return keep


def sample_row(logits: Any, held: np.ndarray, p: SamplingParams, step: int,
               logprob: bool = True) -> tuple[int, float]:
    """The next token of one sequence (``p`` seeded, or greedy) from its logits [vocab] and the
    token ids it holds, at draw ``step``; and, with ``logprob`` (else 0), that token's
    log-probability under the model's own distribution (log-softmax of the logits as given)."""
    raw = np.asarray(logits, dtype=np.float64)
    z = penalized(raw, held, p.repetition_penalty)
    if p.greedy:
        token = int(np.argmax(z))
    else:
        assert p.seed is not None, "sample_row takes seeded parameters (SamplingParams.seeded)"
        scaled = z / p.temperature
        keep = kept(scaled, p)
        u = uniforms(p.seed, step, raw.size)
        score = np.where(keep, scaled - np.log(-np.log(u)), -np.inf)
        token = int(np.argmax(score))
    if not logprob:
        return token, 0.0
    top = raw.max()
    return token, float(raw[token] - top - np.log(np.exp(raw - top).sum()))


def sample_rows(logits: Any, held: Sequence[np.ndarray], params: Sequence[SamplingParams], steps: Sequence[int],
                logprobs: bool | Sequence[bool] = False) -> tuple[np.ndarray, np.ndarray]:
    """``sample_row`` for each row of ``logits`` [n, vocab] (a host array): the tokens (int64
    [n]) and their log-probabilities (float64 [n], 0 where not asked). Greedy rows without the
    penalty take one argmax over all of them (the lowest id among equals, as ``sample_row``);
    the others draw row by row."""
    x = np.asarray(logits)
    n = x.shape[0]
    want = [bool(logprobs)] * n if isinstance(logprobs, (bool, np.bool_)) else [bool(w) for w in logprobs]
    tokens = np.zeros(n, dtype=np.int64)
    lps = np.zeros(n, dtype=np.float64)
    plain = np.array([p.greedy and p.repetition_penalty == 1.0 for p in params], dtype=bool)
    if plain.any():
        tokens[plain] = x[plain].argmax(-1)
    for i in np.flatnonzero(~plain):
        tokens[i], lps[i] = sample_row(x[i], held[i], params[i], steps[i], want[i])
    for i in np.flatnonzero(plain & np.array(want, dtype=bool)):
        raw = np.asarray(x[i], dtype=np.float64)
        top = raw.max()
        lps[i] = float(raw[tokens[i]] - top - np.log(np.exp(raw - top).sum()))
    return tokens, lps


def per_row(params: SamplingParams | Sequence[SamplingParams] | None, batch: int) -> list[SamplingParams]:
    """One seeded SamplingParams per row: None is greedy for every row; one SamplingParams
    serves every row, each row drawing from its own seed (the seed plus the row, so that equal
    prompts in one batch differ); a sequence gives each row its own."""
    if params is None:
        return [GREEDY] * batch
    if isinstance(params, SamplingParams):
        base = params.seeded()
        assert base.seed is not None
        return [replace(base, seed=(base.seed + i) & MAX_SEED) for i in range(batch)]
    rows = list(params)
    if len(rows) != batch:
        raise SamplingError(f"sampling gives {len(rows)} parameter sets for {batch} sequences")
    for i, r in enumerate(rows):
        if not isinstance(r, SamplingParams):
            raise SamplingError(f"sampling[{i}] must be a SamplingParams, got {type(r).__name__}")
    return [r.seeded() for r in rows]
