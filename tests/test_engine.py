"""The serving engine (``inferx.runtime.engine``): continuous batching over a session's rows.

A request's tokens must not depend on what runs beside it: checked on a stand-in session whose
"model" reads only its own row of the cache (every row write and read the engine does is
visible in its tokens; 1,000 seeded random requests, arrivals, cancellations, no row leaked),
then on the reference interpreter of every tiny family and on a compiled artifact (Triton's
interpreter) against each request alone (``generate``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hf_models import CASES, build

import inferx
from inferx.runtime.engine import Engine, Event
from inferx.runtime.kv_blocks import Paging
from inferx.runtime.model_info import ModelInfo
from inferx.runtime.sampling import SamplingParams
from inferx.runtime.session import DecoderSession, SessionError

VOCAB = 50


class RowModel(DecoderSession):
    """A stand-in session: its cache keeps each row's token at each position it was given, and a
    row's logits favour ``(sum of the row's held tokens * 7 + its length) % VOCAB``, a function of
    that row's cache alone (its first ``kv_len`` positions)."""

    def __init__(self, rows: int = 4, context: int = 64):
        info = ModelInfo(architecture="RowModel", vocab_size=VOCAB, max_context=context, eos_token_ids=(0,),
                         num_layers=1, num_kv_heads=1, head_dim=1)
        super().__init__(info, max_batch=rows, max_context=context)
        self.entry_points = frozenset({"prefill", "prefill_last", "decode"})
        self.cache = np.zeros((0, context), dtype=np.int64)
        self.batches: list[int] = []  # the rows of each step

    def _reset_cache(self, batch: int) -> None:
        self.cache = np.full((batch, self.max_context), -7, dtype=np.int64)  # stale values poison sums

    def _row_caches(self, row: int) -> list:
        return [self.cache[row].copy(), np.zeros(1)]  # num_layers 1: a K and a V

    def _set_row_caches(self, row: int, saved: list) -> None:
        self.cache[row] = saved[0]

    def _step(self, entry, input_ids, positions, kv_lens, rows=None):  # type: ignore[no-untyped-def]
        assert entry in ("prefill_last", "decode"), entry
        self.batches.append(len(input_ids))
        for r in range(len(input_ids)):
            for t, p in zip(input_ids[r], positions[r], strict=True):
                if p >= 0:
                    self.cache[r, p] = t
        out = np.zeros((len(input_ids), 1, VOCAB))
        for r in range(len(input_ids)):
            n = int(kv_lens[r])
            out[r, 0, (int(self.cache[r, :n].sum()) * 7 + n) % VOCAB] = 2.0
            out[r, 0, :] += np.linspace(0.0, 1.0, VOCAB)  # a spread for sampling
        return out


class PagedRowModel(RowModel):
    """RowModel over a paged cache: a pool of ``blocks`` blocks of 4 positions, each row's tokens
    written and read through the block table the session keeps (``DecoderSession.pages``)."""

    BLOCK = 4

    def __init__(self, rows: int = 4, context: int = 64, blocks: int = 24):
        super().__init__(rows, context)
        self.info = replace(self.info, kv_paging=Paging(self.BLOCK, blocks, context // self.BLOCK))
        self.pool = np.zeros((0, self.BLOCK), dtype=np.int64)

    def _reset_cache(self, batch: int) -> None:
        assert self.info.kv_paging is not None
        self.pool = np.full((self.info.kv_paging.blocks, self.BLOCK), -7, dtype=np.int64)

    def _block_caches(self, blocks: list[int]) -> list:
        return [self.pool[blocks].copy(), np.zeros(1)]

    def _set_block_caches(self, blocks: list[int], saved: list) -> None:
        self.pool[blocks] = saved[0]

    def _step(self, entry, input_ids, positions, kv_lens, rows=None):  # type: ignore[no-untyped-def]
        table, bs = self.block_table(len(input_ids)), self.BLOCK
        self.batches.append(len(input_ids))
        for r in range(len(input_ids)):
            for t, p in zip(input_ids[r], positions[r], strict=True):
                if p >= 0:
                    assert table[r, p // bs] >= 0, f"row {r} writes position {p} with no block"
                    self.pool[table[r, p // bs], p % bs] = t
        out = np.zeros((len(input_ids), 1, VOCAB))
        for r in range(len(input_ids)):
            n = int(kv_lens[r]) if (positions[r] >= 0).any() else 0
            held = sum(int(self.pool[table[r, j // bs], j % bs]) for j in range(n))
            out[r, 0, (held * 7 + n) % VOCAB] = 2.0
            out[r, 0, :] += np.linspace(0.0, 1.0, VOCAB)
        return out


def alone(prompt: list[int], max_new: int, stop: tuple[int, ...], sampling: SamplingParams | None = None) -> list[int]:
    """The request run by itself on a fresh RowModel engine."""
    eng = Engine(RowModel())
    rid = eng.submit(prompt, max_new, stop_token_ids=stop, sampling=sampling)
    return eng.run()[rid]


@pytest.mark.parametrize("model, chunk", [(RowModel, None), (RowModel, 3), (PagedRowModel, 3)],
                         ids=["rows", "rows-chunks", "paged-chunks"])
def test_requests_arriving_and_cancelled_give_their_tokens_alone(model: type, chunk: int | None) -> None:
    """1,000 seeded random requests (1-20 prompt tokens, half of them starting with one of three
    shared prefixes, 1-12 new, greedy or seeded sampling, stop tokens, priorities 0-2: higher ones
    preempt lower ones, which resume later) arrive at random steps, a tenth cancelled at a random
    later step: every finished request's tokens are those it gives alone, the cancelled ones a
    prefix of theirs, every request is reported finished once, and the engine ends with every row
    free. With ``prefill_chunk`` 3, prompts go in over several steps while the others decode. On
    a paged cache (24 blocks of 4 for 4 rows: requests wait for blocks too), prompts share their
    prefixes' blocks, and at the end the pool holds only the prefix cache's blocks, each once."""
    rng = np.random.default_rng(0)
    prefixes = [[int(t) for t in rng.integers(1, VOCAB, 12)] for _ in range(3)]
    eng = Engine(model(rows=4), prefill_chunk=chunk)
    specs: dict[int, tuple[list[int], int, tuple[int, ...], SamplingParams | None]] = {}
    drawn: dict[int, list[int]] = {}
    finished: dict[int, str] = {}
    cancel_at: dict[int, list[int]] = {}
    arrivals = sorted(int(s) for s in rng.integers(0, 2500, 1000))
    step = 0
    while arrivals or not eng.idle():
        while arrivals and arrivals[0] <= step:
            arrivals.pop(0)
            prompt = [int(t) for t in rng.integers(1, VOCAB, int(rng.integers(1, 21)))]
            if rng.random() < 0.5:
                prompt = (prefixes[int(rng.integers(3))] + prompt)[:20]
            max_new = int(rng.integers(1, 13))
            stop = (int(rng.integers(1, VOCAB)),) if rng.random() < 0.5 else ()
            sampling = SamplingParams(temperature=0.8, top_k=10, seed=int(rng.integers(1 << 30))) \
                if rng.random() < 0.3 else None
            rid = eng.submit(prompt, max_new, stop_token_ids=stop, sampling=sampling,
                             priority=int(rng.choice(3, p=[0.8, 0.15, 0.05])))
            specs[rid] = (prompt, max_new, stop, sampling)
            if rng.random() < 0.1:
                cancel_at.setdefault(step + int(rng.integers(0, 6)), []).append(rid)
        for rid in cancel_at.pop(step, []):
            eng.cancel(rid)
        assert eng.running + eng.free_rows == 4
        for ev in eng.step():
            assert ev.request not in finished, ev
            if ev.token is not None:
                drawn.setdefault(ev.request, []).append(ev.token)
            if ev.finished is not None:
                finished[ev.request] = ev.finished
        step += 1
    assert len(finished) == 1000 and eng.free_rows == 4 and eng.waiting == 0 and eng.running == 0
    assert eng.preemptions > 10, eng.preemptions
    if eng.pool is not None:
        assert eng.pool.held == eng.cached_blocks and (eng.pool.table == -1).all(), (eng.pool.held, eng.cached_blocks)
        assert all(eng.pool.refs[b] == 1 for b in eng._prefix.values())
        assert eng.shared_blocks > 100, eng.shared_blocks
    assert {"stop", "length", "cancelled"} <= set(finished.values())
    for rid in rng.choice(1000, 150, replace=False).tolist():
        prompt, max_new, stop, sampling = specs[rid]
        want, got = alone(prompt, max_new, stop, sampling), drawn.get(rid, [])
        if finished[rid] == "cancelled":
            assert got == want[: len(got)], f"request {rid}: {got} vs alone {want}"
        else:
            assert got == want, f"request {rid} ({finished[rid]}): {got} vs alone {want}"
            assert (want[-1] in stop) == (finished[rid] == "stop")


def test_a_light_load_steps_a_small_batch() -> None:
    """Rows go lowest first and a step runs up to the highest row it moves: one request on an
    engine of 4 rows steps 1 row; a second, then 2."""
    model = RowModel(rows=4)
    eng = Engine(model)
    eng.submit([1, 2, 3], 4, stop_token_ids=())
    eng.step()
    eng.step()
    eng.submit([4, 5], 3, stop_token_ids=())
    eng.run()
    assert model.batches[:2] == [1, 1] and max(model.batches) == 2, model.batches


def test_seeded_requests_repeat_and_stop_tokens_end_them() -> None:
    sampling = SamplingParams(temperature=1.0, seed=7)
    runs = [alone([3, 4, 5], 12, (), sampling) for _ in range(2)]
    assert runs[0] == runs[1] and len(runs[0]) == 12
    assert alone([3, 4, 5], 12, (), SamplingParams(temperature=1.0, seed=8)) != runs[0]
    greedy = alone([3, 4, 5], 12, ())
    stop = greedy[4]
    assert alone([3, 4, 5], 12, (stop,)) == greedy[: greedy.index(stop) + 1]


def test_events_and_bad_requests() -> None:
    assert inferx.Engine is Engine
    eng = Engine(RowModel(rows=2, context=16))
    a = eng.submit([1, 2], 3, stop_token_ids=())
    evs = eng.step()
    assert [(e.request, e.finished) for e in evs] == [(a, None)] and isinstance(evs[0], Event)
    assert eng.tokens(a) == [evs[0].token]
    assert eng.cancel(a) and not eng.cancel(a) and not eng.cancel(99)
    assert eng.free_rows == 2
    assert eng.step() == [Event(a, None, 0.0, "cancelled")] and eng.idle()
    for bad, match in (([], "non-empty"), ([1, 50], "not a token id"), ([[1]], "non-empty list")):
        with pytest.raises(SessionError, match=match):
            eng.submit(bad)
    with pytest.raises(SessionError, match="need 17 positions; the context holds 16"):
        eng.submit([1] * 10, 8)
    with pytest.raises(SessionError, match="max_new_tokens"):
        eng.submit([1], 0)
    with pytest.raises(SessionError, match="prefill_chunk"):
        Engine(RowModel(), prefill_chunk=0)
    with pytest.raises(SessionError, match="stop_token_ids"):
        eng.submit([1], 2, stop_token_ids=[50])
    with pytest.raises(SessionError, match="hold_rows"):
        RowModel().step_rows("decode", np.zeros((4, 1), np.int64), np.zeros((4, 1), np.int64), np.ones(4, np.int64))


def _first_of_each_family() -> list:
    seen: dict[str, object] = {}
    for c in CASES:
        seen.setdefault(c.family, c)
    return list(seen.values())


def _concurrent(session_of, case, prompts: list[list[int]], chunk: int | None = None) -> None:  # type: ignore[no-untyped-def]
    """Requests arriving at steps 0, 0, 1, 3 and 4 on an engine of 3 rows (so some wait), the
    third cancelled at step 2: each finished request's tokens are those ``generate`` gives it
    alone, greedy, without stopping at EOS."""
    eng = Engine(session_of(), rows=3, prefill_chunk=chunk)
    arrive = {0: [0, 1], 1: [2], 3: [3], 4: [4]}
    ids: dict[int, int] = {}
    got: dict[int, list[int]] = {}
    done: dict[int, str] = {}
    step = 0
    while step <= 4 or not eng.idle():
        for i in arrive.get(step, []):
            ids[eng.submit(prompts[i], 5, stop_token_ids=())] = i
        if step == 2:
            eng.cancel(next(r for r, i in ids.items() if i == 2))
        for ev in eng.step():
            if ev.token is not None:
                got.setdefault(ids[ev.request], []).append(ev.token)
            if ev.finished:
                done[ids[ev.request]] = ev.finished
        step += 1
    assert done == {0: "length", 1: "length", 2: "cancelled", 3: "length", 4: "length"}
    single = session_of()
    for i in (0, 1, 3, 4):
        want = single.generate([prompts[i]], 5, stop_at_eos=False)[0].tolist()
        assert got[i] == want, f"request {i}: {got[i]} vs alone {want}; {case.repro()}"


@pytest.mark.parametrize("case", _first_of_each_family(), ids=lambda c: c.family)
def test_every_family_batches_requests_as_they_run_alone(case) -> None:  # type: ignore[no-untyped-def]
    """Whole prompts, and prompts in chunks of 4 tokens (the first family); then on a paged cache
    with a shared prefix."""
    program = inferx.import_model(build(case), dtype="f32")
    rng = np.random.default_rng(1)
    prompts = [[int(t) for t in rng.integers(0, case.vocab_size, n)] for n in (5, 9, 3, 7, 4)]
    for chunk in (None, 4) if case is _first_of_each_family()[0] else (None,):
        _concurrent(lambda: program.reference_session(max_batch=3, max_context=24), case, prompts, chunk)
    # a paged cache (blocks of 4), prompts sharing their first two blocks: as each runs alone
    from inferx.compiler.paging import page_program, paging_for

    paged = page_program(inferx.import_model(build(case), dtype="f32"), paging_for(4, 18, 24, 3))
    head = prompts[1][:8]
    shared = [head + p[:2] for p in prompts]
    _concurrent(lambda: paged.reference_session(max_batch=3, max_context=24), case, shared)


@pytest.mark.thorough  # tests/test_serve.py runs the engine on a compiled artifact in CI
def test_a_compiled_artifact_batches_requests_as_they_run_alone(tmp_path: Path) -> None:
    """The same on a compiled artifact (the cpu target: Triton's interpreter), whose prefill_last
    and decode entries take rows without tokens (negative positions)."""
    from hf_models import Case

    case = Case("llama-1-layer", "llama", dict(vocab_size=64, hidden_size=32, intermediate_size=48,
                                               num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                                               max_position_embeddings=64))
    art = inferx.compile(build(case), target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=16,
                         max_batch=3)
    rng = np.random.default_rng(2)
    prompts = [[int(t) for t in rng.integers(0, case.vocab_size, n)] for n in (6, 2, 8, 3, 5)]
    _concurrent(lambda: inferx.load(art, device="cpu"), case, prompts)


def test_a_preempted_request_resumes_where_it_stopped() -> None:
    """Two rows busy with priority-0 requests; a priority-1 request preempts the later one (its
    row saved to the host), which resumes once a row frees: every request gives its tokens
    alone, on the reference interpreter of a tiny Llama."""
    case = _first_of_each_family()[0]
    program = inferx.import_model(build(case), dtype="f32")
    rng = np.random.default_rng(3)
    prompts = [[int(t) for t in rng.integers(0, case.vocab_size, n)] for n in (6, 4, 5)]
    eng = Engine(program.reference_session(max_batch=2, max_context=24))
    low = [eng.submit(p, 6, stop_token_ids=()) for p in prompts[:2]]
    got: dict[int, list[int]] = {}
    for step in range(40):
        if step == 2:
            high = eng.submit(prompts[2], 3, stop_token_ids=(), priority=1)
        for ev in eng.step():
            got.setdefault(ev.request, []).append(ev.token)  # type: ignore[arg-type]
        if step == 2:
            assert eng.preemptions == 1 and eng.waiting == 1
        if eng.idle():
            break
    assert eng.idle() and eng.free_rows == 2
    alone = program.reference_session(max_batch=1, max_context=24)
    for rid, prompt, n in ((low[0], prompts[0], 6), (low[1], prompts[1], 6), (high, prompts[2], 3)):
        want = alone.generate([prompt], n, stop_at_eos=False)[0].tolist()
        assert got[rid] == want, f"request {rid}: {got[rid]} vs alone {want}; {case.repro()}"
    with pytest.raises(SessionError, match="held rows"):
        eng.session.save_row(2)
