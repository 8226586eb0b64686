"""A paged KV cache (``kv_block_size``: the page-kv pass, ``inferx.runtime.kv_blocks``): the same
numbers as the contiguous cache on the reference interpreter of every tiny family, a compiled
artifact's kernels (Triton's interpreter, the GPU's schedules) reading and writing blocks through
the table against the reference, the CUDA session's plan on the fake driver (graphs, padded
rows), the engine sharing a prompt prefix's blocks, and the pool's accounting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hf_models import CASES, Case, build

import inferx
from inferx.compiler.options import CompileError, CompileOptions
from inferx.compiler.paging import page_program, paging_for
from inferx.runtime.artifact import load_artifact
from inferx.runtime.cuda_session import CudaSession
from inferx.runtime.engine import Engine
from inferx.runtime.kv_blocks import BlockPool, Paging, PoolFull
from inferx.runtime.session import SessionError
from tests.fake_cuda import FakeDriver

TINY = Case("llama-paged", "llama", dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))


def _rel(a: object, b: object) -> float:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(x - y) / np.linalg.norm(y))


def _first_of_each_family() -> list[Case]:
    seen: dict[str, Case] = {}
    for c in CASES:
        seen.setdefault(c.family, c)
    return list(seen.values())


def test_the_pool_gives_takes_back_and_shares_blocks() -> None:
    pool = BlockPool(Paging(block_size=4, blocks=6, blocks_per_seq=3), rows=2)
    pool.cover(0, 5)  # two blocks
    assert pool.row_blocks(0) == [0, 1] and pool.free == 4
    pool.cover(0, 8)  # still two
    assert pool.row_blocks(0) == [0, 1]
    pool.hold([0])  # a prefix cache keeps block 0
    pool.share(1, [0])
    pool.cover(1, 9)
    assert pool.row_blocks(1) == [0, 2, 3] and pool.refs[0] == 3
    taken = [pool.take(), pool.take()]
    with pytest.raises(PoolFull, match="row 0 needs 1 more blocks of 4 positions for 12 tokens; 0 of the pool's 6"):
        pool.cover(0, 12)
    assert pool.row_blocks(0) == [0, 1]  # nothing taken
    pool.drop(taken)
    pool.release(0)
    pool.release(1)
    assert pool.refs[0] == 1 and (pool.table == -1).all()
    with pytest.raises(ValueError, match="need 4 blocks; a table row holds 3"):
        pool.cover(0, 13)


@pytest.mark.parametrize("case", _first_of_each_family(), ids=lambda c: c.family)
def test_paged_reference_gives_the_contiguous_numbers(case: Case) -> None:
    """Blocks of 4 positions, given as each sequence grows (prompts of 5, 9 and 3 tokens, then 6
    greedy steps): the same tokens and logits as the contiguous cache."""
    model = build(case)
    plain = inferx.import_model(model, dtype="f32").reference_session(max_batch=3, max_context=24)
    paged = page_program(inferx.import_model(model, dtype="f32"), paging_for(4, 40, 24, 3))
    session = paged.reference_session(max_batch=3, max_context=24)
    rng = np.random.default_rng(0)
    prompts = [[int(t) for t in rng.integers(0, case.vocab_size, n)] for n in (5, 9, 3)]
    assert _rel(session.prefill(prompts), plain.prefill(prompts)) < 1e-6, case.repro()
    plain.reset()
    want = plain.generate(prompts, 6, stop_at_eos=False)
    assert session.generate(prompts, 6, stop_at_eos=False).tolist() == want.tolist(), case.repro()
    assert session.pages is not None and session.pages.held == sum(-(-(len(p) + 5) // 4) for p in prompts)


@pytest.fixture(scope="module")
def paged_artifact(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    model = build(TINY)
    art = inferx.compile(model, target="cpu", output=tmp_path_factory.mktemp("paged") / "a", dtype="fp32",
                         max_seq_len=24, max_batch=4, schedules="sm_90", kv_block_size=4, kv_blocks=40)
    return model, art


def test_a_paged_artifact_matches_the_reference(paged_artifact) -> None:  # type: ignore[no-untyped-def]
    """The compiled kernels (the GPU's schedules in Triton's interpreter: split-KV decode, tiled
    prefill, the qkv GEMM's kv_write epilogue) through a block table, on the artifact session and
    on the CUDA session's plan (fake driver; decode by graph replay; a batch of 3 in bucket 4, the
    padded row with no block): prefill of 5, 9 and 3 tokens and 3 greedy steps against the paged
    reference, relative error under 1e-4."""
    model, art = paged_artifact
    ref = page_program(inferx.import_model(model, dtype="f32"), paging_for(4, 40, 24, 4)).reference_session(
        max_batch=4, max_context=24)
    sessions = [inferx.load(art, device="cpu"),
                CudaSession(load_artifact(art), driver=FakeDriver(), graphs=True)]  # type: ignore[arg-type]
    rng = np.random.default_rng(1)
    prompts = [[int(t) for t in rng.integers(0, 64, n)] for n in (5, 9, 3)]
    repro = "repro: pytest tests/test_paged_kv.py -k matches_the_reference"
    want = [np.asarray(ref.prefill(prompts, logits="last"))]
    for _ in range(3):
        want.append(np.asarray(ref.decode(want[-1][:, -1].argmax(-1))))
    for s in sessions:
        got = np.asarray(s.prefill(prompts, logits="last"))
        assert _rel(got, want[0]) < 1e-4, (type(s).__name__, "prefill", _rel(got, want[0]), repro)
        for step in range(3):
            got = np.asarray(s.decode(want[step][:, -1].argmax(-1)))
            assert _rel(got, want[step + 1]) < 1e-4, (type(s).__name__, step, _rel(got, want[step + 1]), repro)
        assert s.pages is not None and s.pages.row_blocks(1) == ref.pages.row_blocks(1)  # type: ignore[union-attr]
    from click.testing import CliRunner

    from inferx.cli import main

    shown = CliRunner().invoke(main, ["inspect", str(art)]).output
    assert "KV cache paged: 40 blocks of 4 positions, 6 a sequence" in shown, shown


@pytest.mark.thorough  # the engine's blocks on a stand-in model: tests/test_engine.py (1,000 requests)
def test_the_engine_shares_a_prompt_prefix_on_a_paged_artifact(paged_artifact) -> None:  # type: ignore[no-untyped-def]
    """Three requests whose prompts start with the same 9 tokens (two blocks of 4): the second and
    third, arriving after the first is in, share its two blocks instead of prefilling them, one
    is preempted by a higher priority and resumes; every request gives the tokens it gives alone,
    and at the end the pool holds the prefix cache's blocks alone."""
    _, art = paged_artifact
    rng = np.random.default_rng(2)
    head = [int(t) for t in rng.integers(0, 64, 9)]
    prompts = [head + [int(t) for t in rng.integers(0, 64, n)] for n in (2, 4, 1)]
    eng = Engine(inferx.load(art, device="cpu"), rows=2)
    ids = {eng.submit(prompts[0], 4, stop_token_ids=()): 0}
    got: dict[int, list[int]] = {}
    for step in range(60):
        if step == 1:
            ids[eng.submit(prompts[1], 4, stop_token_ids=())] = 1
        if step == 2:
            ids[eng.submit(prompts[2], 4, stop_token_ids=(), priority=1)] = 2
        for ev in eng.step():
            if ev.token is not None:
                got.setdefault(ids[ev.request], []).append(ev.token)
        if step > 2 and eng.idle():
            break
    assert eng.idle() and eng.shared_blocks >= 4 and eng.preemptions >= 1, (eng.shared_blocks, eng.preemptions)
    assert eng.pool is not None and eng.pool.held == eng.cached_blocks
    alone = inferx.load(art, device="cpu")
    for i, p in enumerate(prompts):
        want = alone.generate([p], 4, stop_at_eos=False)[0].tolist()
        assert got[i] == want, (i, got[i], want, "repro: pytest tests/test_paged_kv.py -k shares_a_prompt_prefix")


def test_a_full_pool_and_bad_options_are_clear_errors() -> None:
    with pytest.raises(CompileError, match="kv_blocks is the size of a paged KV cache's pool: give kv_block_size"):
        CompileOptions(kv_blocks=8)
    with pytest.raises(CompileError, match="kv_block_size must be between 1 and"):
        CompileOptions(kv_block_size=0)
    small = page_program(inferx.import_model(build(TINY), dtype="f32"), paging_for(4, 3, 24, 4))
    session = small.reference_session(max_batch=4, max_context=24)
    with pytest.raises(SessionError, match="the paged KV cache is full: row 1 needs 2 more blocks"):
        session.prefill([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
    eng = Engine(small.reference_session(max_batch=2, max_context=24))
    with pytest.raises(SessionError, match="max_new_tokens 4 need 4 blocks of the KV cache; it holds 3"):
        eng.submit(list(range(10)), 4)
