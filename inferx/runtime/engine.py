"""The serving engine: requests that arrive, run and leave at any step over one session's rows
(continuous batching).

A session holds a KV cache of ``rows`` rows (``DecoderSession.hold_rows``); the engine gives each
running request a row of its own and hands it back when the request ends, so the rows in use
never exceed the cache and none is lost (``Engine.free_rows`` counts them). Every ``step``:

1. cancelled requests leave (their row is free again at once);
2. waiting requests take free rows, highest ``priority`` first, then oldest; where none is
   free and a waiting request outranks a running one, the lowest-ranked running request (the
   latest admitted among equals) is preempted: its row of the cache is copied to host memory
   (``DecoderSession.save_row``), and it waits again with its place in line, to be put back in
   whatever row frees (``restore_row``) and go on where it stopped. The prompts not yet in the
   cache run in one prefill (``prefill_last``), at most ``prefill_chunk`` tokens of each a step
   (chunked prefill: a long prompt takes several steps, and the others' decoding goes on
   meanwhile); a row not being filled has every position negative, so nothing is written to its
   cache and its logits are not read; a request whose prompt is all in draws its first token;
3. every other running request feeds its last token to one decode step and draws its next.
   A step runs the rows up to the highest one it moves (rows are given lowest first, so a light
   load steps a small batch); a row in that span without a request has position -1: nothing is
   written, its logits are not read;
4. a request that drew one of its stop tokens, or its ``max_new_tokens``-th token, ends.

A request's tokens depend on its own prompt, parameters and seed alone: rows do not mix in any
kernel, and its draws are numbered by its own step (``runtime.draw``), so it gives the
tokens it would give alone, whatever else runs beside it. Each step returns the ``Event``s of
the requests it moved.

A preempted request gives the tokens it would have given uninterrupted: its cache comes back
as it was, its draws keep their numbering.

Over a paged cache (``DecoderSession.pages``) a row holds blocks, not a whole context: a request
is admitted only when the pool can give it every block its prompt and output may write beside
what the running requests may still take (no step ever finds the pool empty); the full blocks of
each prompt, once in, go to a prefix cache keyed by the digest of their tokens, and a later prompt
that starts with the same whole blocks shares them instead of prefilling them; prefix blocks no
request holds are evicted least recently used first when a request needs the room. A preempted
request saves and restores only its blocks.
"""

from __future__ import annotations

import hashlib
import heapq
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inferx.runtime.draw import draw
from inferx.runtime.sampling import GREEDY, SamplingError, SamplingParams
from inferx.runtime.session import DecoderSession, SessionError, as_int_array

FINISH_REASONS = ("stop", "length", "cancelled")


@dataclass(frozen=True)
class Event:
    """What one step did for one request: the ``token`` it drew (None when it was cancelled) with
    its ``logprob`` (0 unless asked for), and ``finished``: None while it runs, else why it ended
    ("stop": a stop token, included; "length": ``max_new_tokens`` reached; "cancelled")."""

    request: int
    token: int | None
    logprob: float = 0.0
    finished: str | None = None


@dataclass
class Request:
    """One request as the engine holds it."""

    id: int
    prompt: np.ndarray  # int64 token ids
    max_new_tokens: int
    sampling: SamplingParams  # seeded, or greedy
    stop: frozenset[int]
    logprobs: bool
    priority: int = 0
    order: int = 0  # its place in line among requests of one priority
    tokens: list[int] = field(default_factory=list)
    row: int | None = None
    finished: str | None = None
    prefilled: int = 0  # prompt tokens in the cache
    saved: list[Any] | None = None  # its row of the cache while preempted
    held: int = 0  # tokens in its cache while preempted


class Engine:
    """Continuous batching over ``session`` (module docstring); ``rows``: the requests that run at
    once, at most the session's ``max_batch`` (its default); ``prefill_chunk``: the most prompt
    tokens of one request a step prefills (None: whole prompts)."""

    def __init__(self, session: DecoderSession, rows: int | None = None, prefill_chunk: int | None = None):
        rows = session.max_batch if rows is None else rows
        if prefill_chunk is not None and (isinstance(prefill_chunk, bool) or not isinstance(prefill_chunk, int)
                                          or prefill_chunk < 1):
            raise SessionError(f"prefill_chunk must be a whole number >= 1 or None, got {prefill_chunk!r}")
        session.hold_rows(rows)
        self.prefill_chunk = prefill_chunk
        self.session = session
        self.rows = rows
        self._free = list(range(rows))  # a heap: the lowest free row first
        self._lengths = np.zeros(rows, dtype=np.int64)  # tokens each row's cache holds
        self._waiting: list[tuple[int, int, Request]] = []  # a heap: (-priority, order, request)
        self._running: dict[int, Request] = {}  # by row
        self._requests: dict[int, Request] = {}  # every request not yet reported finished
        self._cancelled: list[Request] = []
        self._next_id = 0
        self.steps = 0
        self.preemptions = 0
        self.pool = session.pages  # a paged cache's blocks (None: rows of a contiguous cache)
        # full blocks of prompts, by the digest of every token up to each block's end: a later
        # prompt that starts with those tokens shares them (least recently used first)
        self._prefix: OrderedDict[bytes, int] = OrderedDict()
        self.shared_blocks = 0  # prompt blocks requests took from the prefix cache instead of prefilling

    # --- what callers see -----------------------------------------------------------------
    @property
    def free_rows(self) -> int:
        return len(self._free)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def running(self) -> int:
        return len(self._running)

    def idle(self) -> bool:
        """Nothing waits, runs or has an event still to report."""
        return not self._requests

    def submit(self, prompt: Any, max_new_tokens: int = 16, *, sampling: SamplingParams | None = None,
               stop_token_ids: Iterable[int] | None = None, logprobs: bool = False, priority: int = 0) -> int:
        """Queues a request; returns its id. ``prompt``: token ids (one at least); its length
        plus ``max_new_tokens`` - 1 must fit the session's context. ``sampling`` None is greedy;
        a SamplingParams without a seed draws one. ``stop_token_ids``: the tokens that end it
        (default: the model's EOS ids; empty: none). ``priority``: a higher one runs first and
        may preempt a lower one. SessionError naming the argument at fault."""
        ids = as_int_array(prompt, "prompt")
        if ids.ndim != 1 or ids.size == 0:
            raise SessionError(f"prompt must be a non-empty list of token ids, got shape {list(ids.shape)}")
        vocab = self.session.info.vocab_size
        if ids.min() < 0 or ids.max() >= vocab:
            bad = int(ids[(ids < 0) | (ids >= vocab)][0])
            raise SessionError(f"prompt holds {bad}, not a token id in [0, {vocab})")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 1:
            raise SessionError(f"max_new_tokens must be a whole number >= 1, got {max_new_tokens!r}")
        need = ids.size + int(max_new_tokens) - 1
        if need > self.session.max_context:
            raise SessionError(f"a prompt of {ids.size} tokens and max_new_tokens {max_new_tokens} need {need} "
                               f"positions; the context holds {self.session.max_context}")
        if self.pool is not None and self.pool.paging.blocks_for(need) > self.pool.paging.blocks:
            raise SessionError(f"a prompt of {ids.size} tokens and max_new_tokens {max_new_tokens} need "
                               f"{self.pool.paging.blocks_for(need)} blocks of the KV cache; it holds "
                               f"{self.pool.paging.blocks}")
        if sampling is not None and not isinstance(sampling, SamplingParams):
            raise SessionError(f"sampling must be a SamplingParams or None, got {type(sampling).__name__}")
        stop = self.session.info.eos_token_ids if stop_token_ids is None else list(stop_token_ids)
        for t in stop:
            if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 0 <= t < vocab:
                raise SessionError(f"stop_token_ids holds {t!r}, not a token id in [0, {vocab})")
        if not isinstance(logprobs, (bool, np.bool_)):
            raise SessionError(f"logprobs must be True or False, got {logprobs!r}")
        if isinstance(priority, bool) or not isinstance(priority, (int, np.integer)):
            raise SessionError(f"priority must be a whole number, got {priority!r}")
        try:
            params = GREEDY if sampling is None else sampling.seeded()
        except SamplingError as e:
            raise SessionError(str(e)) from None
        rid = self._next_id
        self._next_id += 1
        req = Request(rid, ids.astype(np.int64), int(max_new_tokens), params, frozenset(int(t) for t in stop),
                      bool(logprobs), int(priority), rid)
        heapq.heappush(self._waiting, (-req.priority, req.order, req))
        self._requests[rid] = req
        return rid

    def cancel(self, request: int) -> bool:
        """Ends a waiting or running request (its row is free at once; the next step reports it
        "cancelled"); False if it is unknown or already finished."""
        req = self._requests.get(request)
        if req is None or req.finished is not None:
            return False
        req.finished = "cancelled"
        if req.row is None:
            self._waiting = [w for w in self._waiting if w[2] is not req]
            heapq.heapify(self._waiting)
            req.saved = None
        else:
            self._release(req)
        self._cancelled.append(req)
        return True

    def tokens(self, request: int) -> list[int]:
        """The tokens a request not yet reported finished has drawn so far."""
        req = self._requests.get(request)
        if req is None:
            raise SessionError(f"no request {request} (unknown, or reported finished)")
        return list(req.tokens)

    def step(self) -> list[Event]:
        """One step (module docstring): the events of every request it moved."""
        events = [Event(r.id, None, 0.0, "cancelled") for r in self._cancelled]
        for r in self._cancelled:
            del self._requests[r.id]
        self._cancelled = []
        self._admit()
        filling = [r for r in self._running.values() if r.prefilled < r.prompt.size]
        decoding = [r for r in self._running.values() if r.prefilled == r.prompt.size]
        if filling:
            events += self._prefill(filling)
        if decoding:
            events += self._decode(decoding)
        self.steps += 1
        return events

    def run(self, max_steps: int | None = None) -> dict[int, list[int]]:
        """Steps until nothing waits or runs (or ``max_steps``): the tokens of every request that
        finished meanwhile."""
        out: dict[int, list[int]] = {}
        drawn: dict[int, list[int]] = {}
        n = 0
        while not self.idle() and (max_steps is None or n < max_steps):
            for ev in self.step():
                if ev.token is not None:
                    drawn.setdefault(ev.request, []).append(ev.token)
                if ev.finished is not None:
                    out[ev.request] = drawn.pop(ev.request, [])
            n += 1
        return out

    # --- the steps ------------------------------------------------------------------------
    def _admit(self) -> None:
        while self._waiting:
            if not self._free:
                victim = min(self._running.values(), key=lambda r: (r.priority, -r.order))
                if victim.priority >= self._waiting[0][2].priority:
                    return
                self._preempt(victim)
            req = self._waiting[0][2]
            shared = self._shared_prefix(req) if req.saved is None else []
            if not self._blocks_for(req, shared):
                return  # the head of the line waits for blocks (those of requests that end)
            heapq.heappop(self._waiting)
            req.row = heapq.heappop(self._free)
            self._running[req.row] = req
            if req.saved is not None:  # preempted before: its cache back as it was
                self.session.restore_row(req.row, req.saved)
                self._lengths[req.row] = req.held
                req.saved = None
            elif shared:
                assert self.pool is not None
                self.pool.share(req.row, shared)
                req.prefilled = len(shared) * self.pool.paging.block_size
                self._lengths[req.row] = req.prefilled
                self.shared_blocks += len(shared)

    # --- a paged cache's blocks -------------------------------------------------------------
    def _digests(self, prompt: np.ndarray, blocks: int) -> list[bytes]:
        """The digest of every token up to the end of each of the prompt's first ``blocks``
        blocks (each chained to the one before)."""
        assert self.pool is not None
        bs, out, h = self.pool.paging.block_size, [], b""
        for j in range(blocks):
            h = hashlib.sha256(h + prompt[j * bs:(j + 1) * bs].astype("<i8").tobytes()).digest()
            out.append(h)
        return out

    def _shared_prefix(self, r: Request) -> list[int]:
        """The cached blocks that hold the longest prefix of ``r``'s prompt in whole blocks,
        leaving at least its last token to prefill (its logits draw the first token)."""
        if self.pool is None:
            return []
        blocks: list[int] = []
        for d in self._digests(r.prompt, (r.prompt.size - 1) // self.pool.paging.block_size):
            b = self._prefix.get(d)
            if b is None:
                break
            self._prefix.move_to_end(d)
            blocks.append(b)
        return blocks

    def _blocks_for(self, r: Request, shared: list[int]) -> bool:
        """Whether the pool can give ``r`` every block it may write (its prompt and output, less
        the ``shared`` blocks it will share) beside what the running requests may still take;
        prefix blocks no request holds (``shared`` aside) are evicted for it, least recently used
        first. Admission never promises more blocks than the pool has."""
        if self.pool is None:
            return True
        pool = self.pool

        def want(q: Request) -> int:
            return pool.paging.blocks_for(q.prompt.size + q.max_new_tokens - 1)

        promised = sum(max(want(q) - len(pool.row_blocks(q.row)), 0) for q in self._running.values()
                       if q.row is not None)
        need = want(r) - len(shared)
        while pool.free - promised < need and self._evict(set(shared)):
            pass
        return pool.free - promised >= need

    def _evict(self, keep: set[int]) -> bool:
        """Frees the least recently used prefix block that only the prefix cache holds (not one
        of ``keep``)."""
        assert self.pool is not None
        for d, b in self._prefix.items():
            if self.pool.refs[b] == 1 and b not in keep:
                del self._prefix[d]
                self.pool.drop([b])
                return True
        return False

    def _keep_prefix(self, r: Request) -> None:
        """Puts the full blocks of ``r``'s prompt (all in its cache now) in the prefix cache."""
        assert self.pool is not None and r.row is not None
        held = self.pool.row_blocks(r.row)
        for d, b in zip(self._digests(r.prompt, r.prompt.size // self.pool.paging.block_size), held, strict=False):
            if d not in self._prefix:
                self._prefix[d] = b
                self.pool.hold([b])

    @property
    def cached_blocks(self) -> int:
        """Blocks the prefix cache holds."""
        return len(self._prefix)

    def _preempt(self, r: Request) -> None:
        assert r.row is not None
        r.saved, r.held = self.session.save_row(r.row), int(self._lengths[r.row])
        self._release(r)
        heapq.heappush(self._waiting, (-r.priority, r.order, r))
        self.preemptions += 1

    def _prefill(self, filling: Sequence[Request]) -> list[Event]:
        chunk = self.prefill_chunk or max(r.prompt.size for r in filling)
        parts = [r.prompt[r.prefilled:r.prefilled + chunk] for r in filling]
        seq = max(p.size for p in parts)
        n = self._span(filling)
        ids = np.zeros((n, seq), dtype=np.int64)
        positions = np.full((n, seq), -1, dtype=np.int64)
        kv_lens = np.maximum(self._lengths[:n], 1)
        for r, part in zip(filling, parts, strict=True):
            assert r.row is not None
            ids[r.row, :part.size] = part
            positions[r.row, :part.size] = r.prefilled + np.arange(part.size)
            r.prefilled += part.size
            kv_lens[r.row] = self._lengths[r.row] = r.prefilled
        logits = self.session.step_rows("prefill_last", ids, positions, kv_lens)
        done = [r for r in filling if r.prefilled == r.prompt.size]
        if self.pool is not None:
            for r in done:
                self._keep_prefix(r)
        return self._draw(done, logits)

    def _decode(self, running: Sequence[Request]) -> list[Event]:
        """One token for each of ``running`` (their prompts in; the first token drawn)."""
        n = self._span(running)
        ids = np.zeros((n, 1), dtype=np.int64)
        positions = np.full((n, 1), -1, dtype=np.int64)
        kv_lens = np.maximum(self._lengths[:n], 1)
        for r in running:
            assert r.row is not None
            ids[r.row, 0] = r.tokens[-1]
            positions[r.row, 0] = self._lengths[r.row]
            kv_lens[r.row] = self._lengths[r.row] = self._lengths[r.row] + 1
        return self._draw(running, self.session.step_rows("decode", ids, positions, kv_lens))

    @staticmethod
    def _span(reqs: Sequence[Request]) -> int:
        """The rows a step runs: up to the highest row of ``reqs`` (rows go lowest first, so a
        light load steps a small batch)."""
        return max(r.row for r in reqs if r.row is not None) + 1

    def _draw(self, reqs: Sequence[Request], logits: Any) -> list[Event]:
        """Each of ``reqs`` draws its next token from its row of a step's ``logits`` [n, 1, vocab]
        (``runtime.draw``: one launch on the device where the session left them there) and ends
        on a stop token or its budget."""
        if not reqs:
            return []
        held = [np.concatenate([r.prompt, np.asarray(r.tokens, dtype=np.int64)])
                if r.sampling.repetition_penalty != 1.0 else r.prompt[:0] for r in reqs]
        tokens, logprobs = draw(logits, [r.row for r in reqs], held, [r.sampling for r in reqs],  # type: ignore[misc]
                                [len(r.tokens) for r in reqs], [r.logprobs for r in reqs])
        return [self._took(r, int(t), float(lp)) for r, t, lp in zip(reqs, tokens, logprobs, strict=True)]

    def _took(self, r: Request, token: int, logprob: float) -> Event:
        r.tokens.append(token)
        if token in r.stop:
            r.finished = "stop"
        elif len(r.tokens) >= r.max_new_tokens:
            r.finished = "length"
        if r.finished is not None:
            self._release(r)
            del self._requests[r.id]
        return Event(r.id, token, logprob, r.finished)

    def _release(self, r: Request) -> None:
        assert r.row is not None
        self.session.release_row(r.row)
        del self._running[r.row]
        self._lengths[r.row] = 0
        heapq.heappush(self._free, r.row)
        r.row = None
