"""Drawing each row's next token on the device: the reference sampler (``sample_row`` in
``inferx.runtime.sampling``) as one Triton kernel, so that a decode step can return token ids
instead of the vocabulary's logits.

Contract. ``sample_on_device(logits [rows, vocab], params, steps, presence)`` gives, for each row,
the token ``sample_row(logits[row], held, params[row], steps[row])`` gives (``held``: the ids where
``presence[row]`` is nonzero) and that token's log-probability under the logits as given
(log-softmax before penalty and temperature), as int32 [rows] and float32 [rows]. The transforms,
in the reference's order: the repetition penalty on held tokens (a positive logit divided by it, a
negative one multiplied); temperature 0 is greedy (the largest penalized logit, the lowest id among
equals); else top-k (every token at least the k-th largest value: ties at the k-th kept), top-p
(every token at least as probable as the last one the sorted cumulative sum takes, over the top-k
survivors), min-p (tokens at least ``min_p`` times as probable as the most probable), then the
race of exponentials: the kept token with the highest ``z / T - log(E)`` wins, ``E = -log(u)``,
``u`` the reference's uniform: Philox4x32-10 keyed by the row's 64-bit seed (k0 its low 32 bits,
k1 its high) at counters (token id, step, 0, 0), its word's top 24 bits plus one half, times
2^-24. One launch serves rows with different parameters: they sit in device tensors
(``pack_params``), which a CUDA-graph caller refills in place between replays.

How. One program per row loops over the vocabulary in blocks of ``BLOCK`` (never a whole row in
registers), one loop a *pass*. Thresholds are found on the penalized logit ``z`` itself (a
monotone map of its fp32 bits to uint32 keys), never by sorting:

- pass 1 (every row): the raw logits' max and sum of exponentials (the log-probability), the
  largest ``z`` and its lowest id (greedy), and, for a row with no filter, the draw itself;
- top-k: the k-th largest key by a radix search over the 32 key bits, ``RADIX_BITS`` bits a pass
  (each pass counts the tokens at or above 2^RADIX_BITS candidate keys at once);
- top-p: one pass for the kept mass ``S`` (the sum of ``exp((z - zmax) / T)`` over the top-k
  survivors), then the same radix search for the largest key whose tokens at or above it weigh
  ``top_p * S`` or more: the probability value where the reference's cumulative sum first reaches
  ``top_p``;
- the draw (a row with any filter): the score argmax over the kept tokens, min-p tested there
  (``exp((z - zmax) / T) >= min_p``, the reference's test once its normalizations cancel). Blocks
  with no kept token skip the generator.

Passes per row, with ``P = 32 / RADIX_BITS`` (8 by default): greedy or unfiltered 1; min-p alone
2; top-k 2 + P; top-p 3 + P; top-k and top-p 3 + 2P (19 at most by default). A pass reads the
row's logits (and its presence mask where the penalty is on).

Numerics: fp32 throughout, where the reference computes in float64. Penalty, temperature and the
scores are each a few fp32 roundings from the reference's values, so a draw can differ only where
two kept scores lie within about 1e-6 (relative) of each other; top-k compares the fp32 logits
themselves, exact without a penalty (a penalty's rounding can merge two values into a tie at the
k-th, keeping both). The top-p sums accumulate in fp32 block by block (each block summed as a
tree, the blocks in order: relative error a few times 1e-7 for a 152k vocabulary) where the
reference takes a float64 cumulative sum over the sorted probabilities: the threshold can differ
only where a partial sum at the boundary lies within that error of ``top_p`` (where the sums never
reach ``top_p * S`` the filter keeps every top-k survivor, as the reference's ``searchsorted``
past the end does). Probabilities below fp32's range (``exp`` underflows under about 1e-38)
count as 0. The uniform's logarithm near 1 comes from a series for ``log1p`` (a fp32 ``u`` would
lose the last bit of ``1 - u``), so each ``E`` is within a few ulps. Counts are exact in fp32 up
to 2^24 tokens, the vocabulary's bound here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral

import torch
import triton
import triton.language as tl

from inferx.runtime.sampling import MASK32, PHILOX_M0, PHILOX_M1, PHILOX_W0, PHILOX_W1, SamplingParams

MAX_VOCAB = 1 << 24  # token counts stay exact in fp32
RADIX_BITS = 4  # key bits one search pass settles: 2^4 candidate thresholds a pass, 8 passes a search
GPU_BLOCK = 1024  # vocabulary entries a program handles per loop step on the GPU
LOGIT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# columns of RowParams.floats and RowParams.ints
TEMPERATURE, TOP_P, MIN_P, PENALTY = range(4)
TOP_K, SEED_LO, SEED_HI, STEP = range(4)

_M0: tl.constexpr = tl.constexpr(PHILOX_M0)
_M1: tl.constexpr = tl.constexpr(PHILOX_M1)
_W0: tl.constexpr = tl.constexpr(PHILOX_W0)
_W1: tl.constexpr = tl.constexpr(PHILOX_W1)


@triton.jit
def _philox(k0, k1, c0, c1):  # type: ignore[no-untyped-def]
    """The first word of Philox4x32-10 keyed (k0, k1) at counters (c0, c1, 0, 0), uint32: the
    reference's ``philox``, round for round."""
    zero = c0 * 0
    x0, x1, x2, x3 = c0, zero + c1, zero, zero
    for _ in tl.static_range(10):
        hi0 = tl.umulhi(x0, _M0)
        lo0 = x0 * _M0
        hi1 = tl.umulhi(x2, _M1)
        lo1 = x2 * _M1
        x0, x1, x2, x3 = hi1 ^ x1 ^ k0, lo1, hi0 ^ x3 ^ k1, lo0
        k0 = k0 + _W0
        k1 = k1 + _W1
    return x0


@triton.jit
def _exponential(word):  # type: ignore[no-untyped-def]
    """E = -log(u), u = ((word >> 8) + 1/2) * 2^-24, in fp32 within a few ulps. Below 1/2, u is
    exact in fp32; above, 1 - u is (u itself is not), and -log(1 - v) = 2 atanh(v / (2 - v)),
    whose series in s = v / (2 - v) <= 1/3 is summed to 1e-8."""
    m = (word >> 8).to(tl.int32)
    u = (2 * m + 1).to(tl.float32) * 2.0**-25
    v = (2 * ((1 << 24) - 1 - m) + 1).to(tl.float32) * 2.0**-25
    s = v / (2.0 - v)
    t = s * s
    series = 1.0 + t * (1.0 / 3 + t * (1.0 / 5 + t * (1.0 / 7 + t * (1.0 / 9 + t * (1.0 / 11 + t * (1.0 / 13))))))
    return tl.where(m < (1 << 23), -tl.log(u), 2.0 * s * series)


@triton.jit
def _load_row(x_row, held_row, offs, vocab, penalty):  # type: ignore[no-untyped-def]
    """The raw logits at ``offs`` in fp32 and the penalized ones ``z`` (-inf past the vocabulary;
    -0 made +0 so that keys order them as equal). The presence mask is read only under a penalty."""
    valid = offs < vocab
    x = tl.load(x_row + offs, mask=valid, other=float("-inf")).to(tl.float32)
    z = x
    if penalty != 1.0:
        held = tl.load(held_row + offs, mask=valid, other=0)
        z = tl.where(held != 0, tl.where(x > 0, tl.div_rn(x, penalty), x * penalty), x)
    return x, tl.where(z == 0.0, 0.0, z)


@triton.jit
def _key(z):  # type: ignore[no-untyped-def]
    """fp32 -> uint32, monotone: flip every bit of a negative value, the sign bit of the rest."""
    bits = z.to(tl.uint32, bitcast=True)
    return bits ^ tl.where((bits >> 31) != 0, 0xFFFFFFFF, 0x80000000).to(tl.uint32)


@triton.jit
def _search(x_row, held_row, vocab, penalty, floor, zmax, inv_t, target,  # type: ignore[no-untyped-def]
            WEIGHTED: tl.constexpr, BLOCK: tl.constexpr, RADIX_BITS: tl.constexpr):
    """The largest key c whose tokens (those keyed c or above, and ``floor`` or above) weigh
    ``target`` or more; ``floor`` where none does. A token weighs 1 (top-k: the k-th largest key)
    or, with WEIGHTED, exp((z - zmax) / T) (top-p). The key is built RADIX_BITS bits a pass, high
    bits first: each pass sums the weight at or above every candidate for the next digit, and
    keeps the largest candidate that still reaches ``target``."""
    R: tl.constexpr = 1 << RADIX_BITS
    digits = tl.arange(0, R).to(tl.uint32)
    prefix = tl.full([], 0, tl.uint32)
    for p in range(32 // RADIX_BITS):
        shift = 32 - RADIX_BITS - RADIX_BITS * p
        cand = prefix | (digits << shift)
        mass = tl.zeros((R,), dtype=tl.float32)
        for start in range(0, vocab, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            _, z = _load_row(x_row, held_row, offs, vocab, penalty)
            key = _key(z)
            if WEIGHTED:
                w = tl.exp((z - zmax) * inv_t)
            else:
                w = tl.full((BLOCK,), 1.0, tl.float32)
            w = tl.where((offs < vocab) & (key >= floor), w, 0.0)
            mass += tl.sum(tl.where(key[:, None] >= cand[None, :], w[:, None], 0.0), axis=0)
        # sums over nested sets, added in one order: nonincreasing in the digit
        digit = tl.max(tl.where(mass >= target, digits, 0), axis=0)
        prefix = prefix | (digit << shift)
    return tl.maximum(prefix, floor)


@triton.jit
def _kept_mass(x_row, held_row, vocab, penalty, floor, zmax, inv_t, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    """The sum of exp((z - zmax) / T) over the tokens keyed ``floor`` or above."""
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, vocab, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        _, z = _load_row(x_row, held_row, offs, vocab, penalty)
        total += tl.where((offs < vocab) & (_key(z) >= floor), tl.exp((z - zmax) * inv_t), 0.0)
    return tl.sum(total, axis=0)


@triton.jit
def _scores(z, offs, temperature, k0, k1, step):  # type: ignore[no-untyped-def]
    """The race's scores, times the temperature: z - T log(E) (the reference's z / T - log(E)
    scaled by T > 0, which keeps its order and spares a division)."""
    return z - temperature * tl.log(_exponential(_philox(k0, k1, offs.to(tl.uint32), step)))


@triton.jit
def _draw(x_row, held_row, vocab, penalty, floor, zmax, inv_t, min_p, temperature, k0, k1, step,  # type: ignore[no-untyped-def]
          BLOCK: tl.constexpr):
    """The kept token of highest score (the lowest id among equals): keyed ``floor`` or above and,
    under min-p, exp((z - zmax) / T) >= min_p."""
    best = tl.full([], float("-inf"), tl.float32)
    token = tl.full([], 0, tl.int32)
    for start in range(0, vocab, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        _, z = _load_row(x_row, held_row, offs, vocab, penalty)
        keep = (offs < vocab) & (_key(z) >= floor) & (tl.exp((z - zmax) * inv_t) >= min_p)
        if tl.max(keep.to(tl.int32), axis=0) > 0:
            score = tl.where(keep, _scores(z, offs, temperature, k0, k1, step), float("-inf"))
            top = tl.max(score, axis=0)
            if top > best:
                best = top
                token = tl.min(tl.where(score == top, offs, vocab), axis=0)
    return token


@triton.jit
def sample_kernel(logits, stride_logits, presence, stride_presence, floats, ints, tokens, logprobs,  # type: ignore[no-untyped-def]
                  vocab, BLOCK: tl.constexpr, RADIX_BITS: tl.constexpr):
    """Program r draws row r's token into tokens[r] and its log-probability into logprobs[r]
    (module docstring): parameters from floats[r, :4] and ints[r, :4] (RowParams' columns)."""
    row = tl.program_id(0)
    x_row = logits + row.to(tl.int64) * stride_logits
    held_row = presence + row.to(tl.int64) * stride_presence
    temperature = tl.load(floats + row * 4 + 0)
    top_p = tl.load(floats + row * 4 + 1)
    min_p = tl.load(floats + row * 4 + 2)
    penalty = tl.load(floats + row * 4 + 3)
    top_k = tl.load(ints + row * 4 + 0)
    k0 = tl.load(ints + row * 4 + 1).to(tl.uint32, bitcast=True)
    k1 = tl.load(ints + row * 4 + 2).to(tl.uint32, bitcast=True)
    step = tl.load(ints + row * 4 + 3).to(tl.uint32, bitcast=True)
    use_top_k = (top_k > 0) & (top_k < vocab)
    plain = (temperature > 0) & ((top_k <= 0) | (top_k >= vocab)) & (top_p >= 1.0) & (min_p <= 0.0)

    # pass 1: raw max and sum of exponentials, the greedy token, and an unfiltered row's draw
    raw_max = tl.full([], float("-inf"), tl.float32)
    raw_sum = tl.full([], 0.0, tl.float32)
    zmax = tl.full([], float("-inf"), tl.float32)
    greedy = tl.full([], 0, tl.int32)
    best = tl.full([], float("-inf"), tl.float32)
    token = tl.full([], 0, tl.int32)
    for start in range(0, vocab, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x, z = _load_row(x_row, held_row, offs, vocab, penalty)
        new_max = tl.maximum(raw_max, tl.max(x, axis=0))
        base = tl.where(new_max == float("-inf"), 0.0, new_max)  # no nan from -inf - -inf
        raw_sum = raw_sum * tl.exp(raw_max - base) + tl.sum(tl.exp(x - base), axis=0)
        raw_max = new_max
        top_z = tl.max(z, axis=0)
        if top_z > zmax:
            zmax = top_z
            greedy = tl.min(tl.where(z == top_z, offs, vocab), axis=0)
        if plain:
            score = tl.where(offs < vocab, _scores(z, offs, temperature, k0, k1, step), float("-inf"))
            top = tl.max(score, axis=0)
            if top > best:
                best = top
                token = tl.min(tl.where(score == top, offs, vocab), axis=0)

    if temperature <= 0:
        token = greedy
    elif plain == 0:
        inv_t = 1.0 / temperature
        floor = tl.full([], 0, tl.uint32)  # every key is at or above it
        if use_top_k:
            floor = _search(x_row, held_row, vocab, penalty, floor, zmax, inv_t, top_k.to(tl.float32),
                            False, BLOCK, RADIX_BITS)
        if top_p < 1.0:
            total = _kept_mass(x_row, held_row, vocab, penalty, floor, zmax, inv_t, BLOCK)
            floor = _search(x_row, held_row, vocab, penalty, floor, zmax, inv_t, top_p * total,
                            True, BLOCK, RADIX_BITS)
        token = _draw(x_row, held_row, vocab, penalty, floor, zmax, inv_t, min_p, temperature, k0, k1, step,
                      BLOCK)
    chosen = tl.load(x_row + token).to(tl.float32)
    tl.store(tokens + row, token)
    tl.store(logprobs + row, chosen - raw_max - tl.log(raw_sum))


@dataclass(frozen=True)
class RowParams:
    """The per-row parameters the kernel reads, on the logits' device: ``floats`` float32 [rows, 4]
    (temperature, 0 greedy; top_p, 1 off; min_p, 0 off; repetition penalty, 1 off) and ``ints``
    int32 [rows, 4] (top_k, 0 off; the seed's low and high 32 bits; the step), the columns named
    by this module's TEMPERATURE ... STEP. A graph-captured caller keeps one and refills it with
    ``pack_params(..., out=it)``."""

    floats: torch.Tensor
    ints: torch.Tensor

    @property
    def rows(self) -> int:
        return int(self.floats.shape[0])


def _int32(v: int) -> int:
    """A uint32 as the int32 of the same bits."""
    return v - (1 << 32) if v >= 1 << 31 else v


def pack_params(params: Sequence[SamplingParams], steps: Sequence[int], device: torch.device | str = "cpu",
                out: RowParams | None = None) -> RowParams:
    """``params`` and ``steps`` (one each per row) as RowParams: new tensors on ``device``, or
    written into ``out`` in place (its device; no allocation there). A drawing row (temperature >
    0) must be seeded (``SamplingParams.seeded``). ValueError naming the argument otherwise."""
    if len(steps) != len(params):
        raise ValueError(f"steps gives {len(steps)} steps for {len(params)} rows of params")
    floats: list[list[float]] = []
    ints: list[list[int]] = []
    for i, (p, step) in enumerate(zip(params, steps, strict=True)):
        if not isinstance(p, SamplingParams):
            raise ValueError(f"params[{i}] must be a SamplingParams, got {type(p).__name__}")
        if not p.greedy and p.seed is None:
            raise ValueError(f"params[{i}] draws (temperature {p.temperature}) but has no seed: "
                             "pass SamplingParams.seeded()")
        if isinstance(step, bool) or not isinstance(step, Integral) or not 0 <= step <= MASK32:
            raise ValueError(f"steps[{i}] must be a whole number in [0, 2^32 - 1], got {step!r}")
        seed = p.seed or 0
        floats.append([p.temperature, p.top_p, p.min_p, p.repetition_penalty])
        ints.append([min(p.top_k, MAX_VOCAB), _int32(seed & MASK32), _int32(seed >> 32), _int32(int(step))])
    host_f = torch.tensor(floats, dtype=torch.float32).reshape(len(params), 4)
    host_i = torch.tensor(ints, dtype=torch.int32).reshape(len(params), 4)
    if out is None:
        return RowParams(host_f.to(device), host_i.to(device))
    if out.rows != len(params):
        raise ValueError(f"out holds {out.rows} rows for {len(params)} rows of params")
    out.floats.copy_(host_f)
    out.ints.copy_(host_i)
    return out


def _interpreted() -> bool:
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(sample_kernel, InterpretedFunction)


def launch(logits: torch.Tensor, packed: RowParams, presence: torch.Tensor | None, tokens: torch.Tensor,
           logprobs: torch.Tensor, block: int | None = None, radix_bits: int = RADIX_BITS) -> None:
    """One launch of ``sample_kernel`` over checked tensors (``sample_on_device`` checks them):
    writes tokens int32 [rows] and logprobs float32 [rows]. No host synchronization, and nothing
    allocated but a one-byte stand-in for an absent presence mask: a CUDA graph can capture it."""
    rows, vocab = logits.shape
    if block is None:
        block = min(triton.next_power_of_2(vocab), 4096 if _interpreted() else GPU_BLOCK)
    if presence is None:
        presence, stride_presence = torch.zeros(1, dtype=torch.uint8, device=logits.device), 0
    else:
        stride_presence = presence.stride(0)
    sample_kernel[(rows,)](logits, logits.stride(0), presence, stride_presence, packed.floats, packed.ints, tokens,
                           logprobs, vocab, BLOCK=block, RADIX_BITS=radix_bits, num_warps=8)


def sample_on_device(logits: torch.Tensor, params: Sequence[SamplingParams], steps: Sequence[int],
                     presence: torch.Tensor | None = None,
                     block: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's next token and its log-probability (module docstring), as int32 [rows] and
    float32 [rows] on the logits' device. ``logits`` [rows, vocab] float32/float16/bfloat16 (a CUDA
    tensor, or a CPU one under TRITON_INTERPRET=1); ``params`` and ``steps`` one per row;
    ``presence`` [rows, vocab] uint8 or bool, nonzero where the row holds the token, needed where a
    row's repetition penalty is on. ValueError naming the argument for anything else."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2:
        raise ValueError(f"logits must be a 2-D torch tensor [rows, vocab], got {_describe(logits)}")
    if logits.dtype not in LOGIT_DTYPES:
        raise ValueError(f"logits must be float32, float16 or bfloat16, got {logits.dtype}")
    rows, vocab = logits.shape
    if rows == 0 or not 0 < vocab <= MAX_VOCAB:
        raise ValueError(f"logits must have at least one row and 1 to {MAX_VOCAB} columns, got {list(logits.shape)}")
    if logits.stride(1) != 1:
        raise ValueError("logits must be contiguous along the vocabulary (stride 1)")
    if isinstance(params, SamplingParams) or len(params) != rows:
        n = 1 if isinstance(params, SamplingParams) else len(params)
        raise ValueError(f"params gives {n} parameter sets for {rows} rows of logits")
    if isinstance(steps, torch.Tensor):
        steps = [int(s) for s in steps.tolist()]
    if len(steps) != rows:
        raise ValueError(f"steps gives {len(steps)} steps for {rows} rows of logits")
    if presence is not None:
        if not isinstance(presence, torch.Tensor) or tuple(presence.shape) != (rows, vocab):
            raise ValueError(f"presence must be a tensor [rows, vocab] = {[rows, vocab]}, got {_describe(presence)}")
        if presence.dtype not in (torch.uint8, torch.bool):
            raise ValueError(f"presence must be uint8 or bool, got {presence.dtype}")
        if presence.device != logits.device or presence.stride(1) != 1:
            raise ValueError(f"presence must be on the logits' device ({logits.device}) with stride 1 along "
                             f"the vocabulary, got {presence.device} with strides {presence.stride()}")
        presence = presence.view(torch.uint8)
    elif any(p.repetition_penalty != 1.0 for p in params if isinstance(p, SamplingParams)):
        raise ValueError("presence is needed: a row of params has a repetition penalty")
    packed = pack_params(params, steps, logits.device)
    if logits.device.type == "cpu" and not _interpreted():
        raise ValueError("logits is on the CPU but Triton is not in interpreter mode (TRITON_INTERPRET=1)")
    tokens = torch.empty(rows, dtype=torch.int32, device=logits.device)
    logprobs = torch.empty(rows, dtype=torch.float32, device=logits.device)
    launch(logits, packed, presence, tokens, logprobs, block)
    return tokens, logprobs


def _describe(x: object) -> str:
    if isinstance(x, torch.Tensor):
        return f"{x.dtype} tensor of shape {list(x.shape)}"
    return type(x).__name__


def benchmark(rows: int = 64, vocab: int = 128256, dtype: torch.dtype = torch.bfloat16) -> dict[str, float]:
    """Microseconds per launch on the GPU for rows of one kind each: greedy, plain sampling,
    top-k 50, top-p 0.9, and top-k 50 with top-p 0.9 (random normal logits scaled by 3)."""
    from triton.testing import do_bench

    logits = (torch.randn(rows, vocab, device="cuda") * 3).to(dtype)
    kinds = {
        "greedy": SamplingParams(temperature=0.0),
        "plain": SamplingParams(temperature=0.8, seed=1),
        "top_k": SamplingParams(temperature=0.8, top_k=50, seed=1),
        "top_p": SamplingParams(temperature=0.8, top_p=0.9, seed=1),
        "top_k_top_p": SamplingParams(temperature=0.8, top_k=50, top_p=0.9, seed=1),
    }
    out: dict[str, float] = {}
    for name, p in kinds.items():
        packed = pack_params([p] * rows, [0] * rows, "cuda")
        tokens = torch.empty(rows, dtype=torch.int32, device="cuda")
        logprobs = torch.empty(rows, dtype=torch.float32, device="cuda")
        out[name] = 1e3 * do_bench(lambda: launch(logits, packed, None, tokens, logprobs))  # noqa: B023
    return out
