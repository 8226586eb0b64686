"""``inferx bench-serve``: a load of requests through the serving engine, and the same load
through transformers' own continuous batching (``generate_batch``) in the same process.

A load (``Load``) is ``requests`` requests whose prompt and output lengths are drawn uniformly
from stated ranges and whose prompts are random token ids, arriving as a Poisson process of
``rate`` requests a second (``inf``: all at the start), every draw from ``seed``. Every request
runs to its output length (no stop tokens), so both systems generate the same number of tokens.

Reported for each system: throughput (generated tokens over the time from the first arrival to
the last token), time to first token (from the request's arrival) and time per output token
(a request's tokens after its first, over the time they took) at P50, P90 and P99.
``generate_batch`` takes every request at once, so the peer runs only loads that arrive at the
start (``rate`` inf), from the time it is called; it is warmed up once on a small load first.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from inferx.runtime.engine import Engine


@dataclass(frozen=True)
class Arrival:
    at: float  # seconds after the start
    prompt: list[int]
    max_new_tokens: int


@dataclass(frozen=True)
class Load:
    requests: int = 64
    rate: float = math.inf  # requests a second
    prompt: tuple[int, int] = (128, 512)  # lengths, both ends included
    output: tuple[int, int] = (64, 256)
    seed: int = 0
    shared_prefix: int = 0  # tokens every prompt starts with (a system prompt), part of its length

    def __post_init__(self) -> None:
        if self.requests < 1:
            raise ValueError(f"requests must be at least 1, got {self.requests}")
        if not self.rate > 0:
            raise ValueError(f"rate must be above 0 requests a second (inf: all at once), got {self.rate}")
        for name in ("prompt", "output"):
            lo, hi = getattr(self, name)
            if not 1 <= lo <= hi:
                raise ValueError(f"{name} lengths {lo}:{hi}: want 1 <= low <= high")
        if not 0 <= self.shared_prefix < self.prompt[0]:
            raise ValueError(f"a shared prefix of {self.shared_prefix} tokens: want 0 to {self.prompt[0] - 1} "
                             "(shorter than the shortest prompt)")

    def draw(self, vocab: int) -> list[Arrival]:
        """The requests, by arrival."""
        rng = np.random.default_rng(self.seed)
        gaps = np.zeros(self.requests) if math.isinf(self.rate) else rng.exponential(1 / self.rate, self.requests)
        at = np.cumsum(gaps) - gaps[0]
        head = [int(x) for x in np.random.default_rng(self.seed + 1).integers(0, vocab, self.shared_prefix)]
        out = []
        for t in at:
            n = int(rng.integers(self.prompt[0], self.prompt[1] + 1))
            m = int(rng.integers(self.output[0], self.output[1] + 1))
            out.append(Arrival(float(t), head + [int(x) for x in rng.integers(0, vocab, n - len(head))], m))
        return out

    @property
    def max_context(self) -> int:
        """Positions the longest request needs."""
        return self.prompt[1] + self.output[1] - 1


def percentiles(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"p50": None, "p90": None, "p99": None}
    return {f"p{q}": float(np.percentile(xs, q)) for q in (50, 90, 99)}


def summary(arrivals: list[float], times: list[list[float]], seconds: float) -> dict[str, Any]:
    """Throughput, TTFT and TPOT of requests that arrived at ``arrivals`` and drew tokens at
    ``times`` (seconds from the start), the load taking ``seconds``."""
    tokens = sum(len(t) for t in times)
    ttft = [t[0] - a for a, t in zip(arrivals, times, strict=True) if t]
    tpot = [(t[-1] - t[0]) / (len(t) - 1) for t in times if len(t) > 1]
    return {"requests": len(times), "tokens": tokens, "seconds": seconds,
            "tokens_per_s": tokens / seconds if seconds > 0 else None,
            "ttft_s": percentiles(ttft), "tpot_s": percentiles(tpot)}


def run_engine(session: Any, load: Load, rows: int | None = None, prefill_chunk: int | None = None,
               clock: Callable[[], float] = time.perf_counter, say: Callable[[str], None] = lambda s: None
               ) -> dict[str, Any]:
    """The load through an ``Engine`` over ``session``, arrivals in real time."""
    arrivals = load.draw(session.info.vocab_size)
    engine = Engine(session, rows, prefill_chunk)
    pending = deque(arrivals)
    index: dict[int, int] = {}
    times: list[list[float]] = [[] for _ in arrivals]
    start = clock()
    last = 0.0
    while pending or not engine.idle():
        now = clock() - start
        while pending and pending[0].at <= now:
            a = pending.popleft()
            index[engine.submit(a.prompt, a.max_new_tokens, stop_token_ids=())] = len(index)
        if engine.idle():
            time.sleep(max(0.0, pending[0].at - now))
            continue
        events = engine.step()
        last = clock() - start
        for ev in events:
            if ev.token is not None:
                times[index[ev.request]].append(last)
        if engine.steps % 100 == 0:
            say(f"    step {engine.steps}: {engine.running} running, {engine.waiting} waiting, "
                f"{sum(map(len, times))} tokens")
    return {"system": "inferx", "rows": engine.rows, "prefill_chunk": prefill_chunk, "steps": engine.steps,
            **summary([a.at for a in arrivals], times, last)}


def run_generate_batch(model: Any, load: Load, vocab: int) -> dict[str, Any]:
    """The load through transformers' ``generate_batch`` (all requests at once; ``load.rate``
    must be inf), greedy, timed from the call; per-token times where it records them."""
    import torch
    from transformers import GenerationConfig

    if not math.isinf(load.rate):
        raise ValueError("generate_batch takes every request at once: the peer runs loads of rate inf only")
    arrivals = load.draw(vocab)

    def config(n: int) -> Any:
        return GenerationConfig(max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0)

    lengths = {a.max_new_tokens for a in arrivals}
    if len(lengths) > 1:
        raise ValueError("generate_batch takes one max_new_tokens a call: give the peer one output length (N:N)")
    n = lengths.pop()
    model.generate_batch(inputs=[a.prompt[:16] for a in arrivals[:4]], generation_config=config(4))  # warm-up
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()  # the clock generate_batch's timestamps are read on
    try:
        out = model.generate_batch(inputs=[a.prompt for a in arrivals], generation_config=config(n),
                                   record_timestamps=True)
    except TypeError:  # a version without record_timestamps
        out = model.generate_batch(inputs=[a.prompt for a in arrivals], generation_config=config(n))
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    times = []
    stamped = True
    for r in out.values():
        generated = list(getattr(r, "generated_tokens", []))
        stamps = getattr(r, "timestamps", None)
        stamped = stamped and bool(stamps)
        times.append([float(s) - start for s in stamps][: len(generated)] if stamps else [seconds] * len(generated))
    return {"system": "transformers generate_batch", "timestamps": stamped,
            **summary([0.0] * len(times), times, seconds)}


def load_json(load: Load) -> dict[str, Any]:
    d = asdict(load)
    d["rate"] = "inf" if math.isinf(load.rate) else load.rate
    return d


def bench_serve(model: Any, workdir: Any, load: Load, *, rows: int, device: str = "cuda", target: str = "h200",
                dtype: str = "bf16", prefill_chunk: int | None = None, peers: tuple[str, ...] = ("generate_batch",),
                kv_block_size: int | None = None, say: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """``model`` (a ``transformers`` causal LM) compiled for ``target`` with ``rows`` rows and the
    load's context (a paged KV cache with ``kv_block_size``), its session on ``device`` under the
    load, then each peer on the same model: the results of each system and the load."""
    from pathlib import Path

    import inferx
    from inferx.benchmark.shapes import is_complete, save_checkpoint

    work = Path(workdir)
    ckpt = work / "checkpoint"
    if not is_complete(ckpt):
        say(f"writing the checkpoint to {ckpt}")
        save_checkpoint(model, ckpt)
    say(f"compiling for {target} ({rows} rows, context {load.max_context})")
    art = inferx.compile(str(ckpt), target=target, output=str(work / "serve.ixa"), dtype=dtype,
                         max_seq_len=load.max_context, max_batch=rows, kv_block_size=kv_block_size,
                         progress=lambda line: say(f"  {line}"))
    vocab = model.config.vocab_size
    out: dict[str, Any] = {"load": load_json(load), "systems": []}
    session = inferx.load(str(art), device=device, **({"outputs": "torch"} if device == "cuda" else {}))
    say(f"inferx: {load.requests} requests")
    out["systems"].append(run_engine(session, load, rows, prefill_chunk, say=say))
    del session
    for peer in peers:
        if peer != "generate_batch":
            raise ValueError(f"unknown peer {peer!r}: the peer is generate_batch")
        say("transformers generate_batch")
        out["systems"].append(run_generate_batch(model, load, vocab))
    return out


def table(result: dict[str, Any]) -> str:
    """The systems' figures as a Markdown table."""

    def ms(d: dict[str, float | None], q: str) -> str:
        v = d.get(q)
        return "-" if v is None else f"{v * 1e3:.1f}"

    lines = ["| system | tokens/s | TTFT P50/P90/P99 ms | TPOT P50/P90/P99 ms | requests | tokens | s |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for s in result["systems"]:
        lines.append(f"| {s['system']} | {s['tokens_per_s']:.1f} | "
                     + "/".join(ms(s["ttft_s"], q) for q in ("p50", "p90", "p99")) + " | "
                     + "/".join(ms(s["tpot_s"], q) for q in ("p50", "p90", "p99"))
                     + f" | {s['requests']} | {s['tokens']} | {s['seconds']:.2f} |")
    return "\n".join(lines)
