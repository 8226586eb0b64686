"""Session inputs from a hostile or careless caller, for every session kind (the reference
interpreter, a CPU artifact session, a CUDA session on the fake driver of tests/fake_cuda.py):
each bad input is one SessionError naming the argument and the value, refused before the
session's state changes or any kernel runs; valid numpy, torch and list inputs give the same
numbers; generate's budget and stop conditions (DecoderSession's logic, on a scripted backend)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers as T

import inferx
from inferx.runtime.artifact import load_artifact
from inferx.runtime.cuda_session import CudaSession
from inferx.runtime.manifest import Manifest
from inferx.runtime.model_info import ModelInfo
from inferx.runtime.session import DecoderSession, SessionError
from tests.fake_cuda import FakeDriver

VOCAB, CONTEXT, BATCH = 64, 16, 4
KINDS = ("reference", "cpu", "cuda")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[inferx.Program, Path]:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    program = inferx.import_model(T.LlamaForCausalLM(cfg).eval())
    art = inferx.compile(
        program,
        target="cpu",
        output=tmp_path_factory.mktemp("session") / "a",
        dtype="fp32",
        max_seq_len=CONTEXT,
        max_batch=BATCH,
    )
    return program, art


def _open(kind: str, built: tuple[inferx.Program, Path], **options: Any) -> DecoderSession:
    program, art = built
    if kind == "reference":
        return program.reference_session(**({"max_batch": BATCH, "max_context": CONTEXT} | options))
    if kind == "cpu":
        return inferx.load(art, device="cpu", **options)
    return CudaSession(load_artifact(art), driver=FakeDriver(), **options)


@pytest.fixture(scope="module")
def sessions(built: tuple[inferx.Program, Path]) -> dict[str, DecoderSession]:
    return {kind: _open(kind, built) for kind in KINDS}


@pytest.fixture(params=KINDS)
def session(request: pytest.FixtureRequest, sessions: dict[str, DecoderSession]) -> Iterator[DecoderSession]:
    s = sessions[request.param]
    s.reset()
    yield s
    s.reset()


def _launches(s: DecoderSession) -> int:
    """Kernels the CUDA session's fake driver has launched (0 for the others)."""
    drv = getattr(s, "drv", None)
    return drv.launches if isinstance(drv, FakeDriver) else 0


def _refused(call: Callable[[], Any], s: DecoderSession, match: str) -> None:
    """``call`` raises one SessionError matching ``match`` and leaves the session as it was."""
    held = None if s.lengths is None else s.lengths.copy()
    launches = _launches(s)
    with pytest.raises(SessionError, match=match):
        call()
    assert (s.lengths is None) == (held is None) and (held is None or np.array_equal(s.lengths, held))
    assert _launches(s) == launches


# input_ids ----------------------------------------------------------------------------------

BAD_PROMPTS = [
    ("floats", np.array([[1.0, 2.0]]), r"input_ids must hold integer token ids, got dtype float64 \(first value 1.0\)"),
    ("torch floats", torch.tensor([[1.0, 2.0]]), r"input_ids must hold integer .* tensor of dtype float32"),
    ("torch bf16", torch.tensor([[1, 2]], dtype=torch.bfloat16), r"input_ids .* tensor of dtype bfloat16"),
    ("strings", [["1", "2"]], r"input_ids\[0\] must hold integer token ids, got dtype <U1 \(first value '1'\)"),
    ("string", "12", r"input_ids must hold integer token ids, got dtype <U2"),
    ("bools", np.array([[True, False]]), r"input_ids must hold integer token ids, got dtype bool"),
    ("torch bools", torch.tensor([[True]]), r"input_ids .* tensor of dtype bool"),
    ("None", None, r"input_ids must hold integer token ids, got dtype object"),
    ("huge python int", [[2**70]], r"input_ids\[0\] must hold integer token ids, got dtype object"),
    ("rank 3", np.zeros((1, 1, 2), np.int64), r"input_ids must be \[batch, seq\] or \[seq\], got shape \[1, 1, 2\]"),
    ("rank 0", np.int64(3), r"input_ids must be \[batch, seq\] or \[seq\], got shape \[\]"),
    ("mixed nesting", [1, [2, 3]], r"input_ids is not an array of integer token ids"),
    ("nested row", [[[1, 2]], [3]], r"input_ids\[0\] must be a list of token ids, got shape \[1, 2\]"),
    ("empty list", [], r"input_ids has no tokens \(shape \[1, 0\]\)"),
    ("empty rows", [[], []], r"input_ids has no tokens \(shape \[2, 0\]\)"),
    ("empty batch", np.zeros((0, 3), np.int64), r"input_ids holds no prompt \(shape \[0, 3\]\)"),
    ("one empty row", [[1, 2], []], r"input_ids\[1\] is empty"),
    (
        "id = vocab",
        np.array([[1, 2, VOCAB]]),
        rf"input_ids: token id {VOCAB} at \[0, 2\] is outside the vocabulary \[0, {VOCAB}\)",
    ),
    ("negative id", [[1, -1], [2]], rf"input_ids\[0\]: token id -1 at \[1\] is outside .*\[0, {VOCAB}\)"),
    ("uint64 past int64", np.array([[2**63 + 5]], np.uint64), rf"token id {2**63 + 5} at \[0, 0\] is outside"),
    ("torch id = vocab", torch.tensor([[VOCAB]]), rf"token id {VOCAB} at \[0, 0\]"),
    ("batch over max", [[1]] * (BATCH + 1), rf"batch of {BATCH + 1} exceeds the maximum batch {BATCH}"),
    (
        "row over context",
        [list(range(CONTEXT + 1))],
        rf"{CONTEXT + 1} tokens per row; the maximum context is {CONTEXT}",
    ),
]


@pytest.mark.parametrize(("ids", "match"), [c[1:] for c in BAD_PROMPTS], ids=[c[0] for c in BAD_PROMPTS])
def test_prefill_refuses_bad_input_ids(session: DecoderSession, ids: Any, match: str) -> None:
    _refused(lambda: session.prefill(ids), session, match)
    _refused(lambda: session.generate(ids, 2), session, match)


BAD_LENGTHS = [
    ("wrong count", [3], r"lengths must give one length for each of the 2 rows of input_ids, got shape \[1\]"),
    ("2-D", [[3], [3]], r"lengths must give one length for each of the 2 rows .* got shape \[2, 1\]"),
    ("floats", [1.5, 2.0], r"lengths must hold integer token ids, got dtype float64"),
    ("strings", ["3", "3"], r"lengths must hold integer token ids, got dtype <U1"),
    ("zero", [0, 3], r"lengths\[0\] = 0 is outside \[1, 3\]"),
    ("negative", [3, -2], r"lengths\[1\] = -2 is outside \[1, 3\]"),
    ("past the columns", [4, 1], r"lengths\[0\] = 4 is outside \[1, 3\] \(input_ids has 3 columns\)"),
]


@pytest.mark.parametrize(("lengths", "match"), [c[1:] for c in BAD_LENGTHS], ids=[c[0] for c in BAD_LENGTHS])
def test_prefill_refuses_bad_lengths(session: DecoderSession, lengths: Any, match: str) -> None:
    _refused(lambda: session.prefill(np.array([[1, 2, 3], [4, 5, 6]]), lengths), session, match)


def test_lengths_do_not_apply_to_ragged_rows(session: DecoderSession) -> None:
    _refused(
        lambda: session.prefill([[1, 2, 3], [4]], [2, 1]),
        session,
        r"lengths is for a padded \[batch, seq\] array; input_ids is a list of rows of lengths \[3, 1\]",
    )


def test_padding_past_lengths_is_not_a_token(session: DecoderSession) -> None:
    """Whatever fills a padded row past its length (here -100, as HF pads labels) is no token:
    it is neither refused nor read, so the prompts' logits equal those padded with 0."""
    lengths = [3, 1]
    want = np.asarray(session.prefill(np.array([[1, 2, 3], [4, 0, 0]]), lengths))
    session.reset()
    got = np.asarray(session.prefill(np.array([[1, 2, 3], [4, -100, VOCAB + 7]]), lengths))
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1, :1], want[1, :1])


def test_prefill_refuses_more_than_the_context_left(session: DecoderSession) -> None:
    session.prefill([list(range(CONTEXT - 2))])
    _refused(
        lambda: session.prefill([[1, 2, 3]]),
        session,
        rf"prefill: sequence 0 would hold {CONTEXT + 1} tokens; the maximum context is {CONTEXT}",
    )
    _refused(lambda: session.prefill([[1], [2]]), session, r"prefill of 2 sequences; the session holds 1")


# decode -------------------------------------------------------------------------------------

BAD_STEPS = [
    (
        "[1, 2] is two tokens of one sequence",
        np.array([[4, 5]]),
        r"decode takes one token per sequence, input_ids of shape \[batch\] or \[batch, 1\]; got shape \[1, 2\]",
    ),
    ("rank 3", np.zeros((1, 1, 1), np.int64), r"got shape \[1, 1, 1\]"),
    ("rank 0", 4, r"got shape \[\]"),
    ("floats", [[4.0]], r"input_ids must hold integer token ids, got dtype float64"),
    ("torch floats", torch.tensor([4.0]), r"input_ids .* tensor of dtype float32"),
    ("strings", ["4"], r"input_ids must hold integer token ids, got dtype <U1"),
    ("two sequences for one", [4, 5], r"decode got 2 sequences; the session holds 1"),
    ("empty", [], r"decode got 0 sequences; the session holds 1"),
    ("id = vocab", [VOCAB], rf"input_ids: token id {VOCAB} at \[0, 0\] is outside the vocabulary"),
    ("negative id", torch.tensor([[-3]]), r"input_ids: token id -3 at \[0, 0\]"),
]


@pytest.mark.parametrize(("ids", "match"), [c[1:] for c in BAD_STEPS], ids=[c[0] for c in BAD_STEPS])
def test_decode_refuses_bad_input_ids(session: DecoderSession, ids: Any, match: str) -> None:
    session.prefill([[1, 2, 3]])
    _refused(lambda: session.decode(ids), session, match)


def test_decode_refuses_a_full_sequence(session: DecoderSession) -> None:
    session.prefill([list(range(CONTEXT - 1))])
    session.decode([3])
    _refused(
        lambda: session.decode([3]),
        session,
        rf"decode: sequence 0 would hold {CONTEXT + 1} tokens; the maximum context is {CONTEXT}",
    )


# generate -----------------------------------------------------------------------------------

BAD_BUDGETS = [
    (-1, r"max_new_tokens must be at least 0, got -1"),
    (1.5, r"max_new_tokens must be an integer, got 1.5"),
    (2.0, r"max_new_tokens must be an integer, got 2.0"),
    ("3", r"max_new_tokens must be an integer, got '3'"),
    (True, r"max_new_tokens must be an integer, got True"),
    (None, r"max_new_tokens must be an integer, got None"),
]


@pytest.mark.parametrize(("budget", "match"), BAD_BUDGETS, ids=[repr(b) for b, _ in BAD_BUDGETS])
def test_generate_refuses_bad_max_new_tokens(session: DecoderSession, budget: Any, match: str) -> None:
    session.prefill([[1, 2]])  # a refused generate keeps what the session holds
    _refused(lambda: session.generate([[1, 2, 3]], budget), session, match)


def test_generate_of_zero_tokens_runs_nothing(session: DecoderSession) -> None:
    launches = _launches(session)
    out = session.generate([[1, 2, 3], [4]], 0)
    assert out.shape == (2, 0) and out.dtype == np.int64
    assert _launches(session) == launches and session.lengths is None


def test_generate_refuses_a_budget_past_the_context_before_running(session: DecoderSession) -> None:
    prompt = list(range(CONTEXT - 3))  # 13 tokens + 4 new need 16 positions (the last is not decoded)
    assert session.generate([prompt], 4, stop_at_eos=False).shape == (1, 4)
    session.reset()
    _refused(
        lambda: session.generate([prompt], 5, stop_at_eos=False),
        session,
        rf"generate with max_new_tokens 5: sequence 0 would hold {CONTEXT + 1} tokens; the maximum context is",
    )
    _refused(lambda: session.generate([[1]], 10**12), session, r"max_new_tokens 1000000000000: sequence 0 would hold")
    _refused(lambda: session.generate([[1]], 3, stop_at_eos="no"), session, r"stop_at_eos must be True or False")


def test_numpy_torch_and_list_inputs_give_the_same_numbers(session: DecoderSession) -> None:
    prompts = [[5, 9, 2], [7, 1, 3]]
    variants = [
        np.array(prompts, np.int32),
        np.array(prompts, np.uint8),
        torch.tensor(prompts, dtype=torch.int32),
        torch.tensor(prompts, dtype=torch.int64),
    ]
    steps = [
        [[6], [8]],
        np.array([6, 8], np.int32),
        np.array([[6], [8]], np.int64),
        torch.tensor([6, 8], dtype=torch.int32),
        torch.tensor([[6], [8]]),
    ]
    want_prefill = np.asarray(session.prefill(prompts))
    want_decode = np.asarray(session.decode(steps[0]))
    for ids, step in zip(variants, steps[1:], strict=True):  # each prefill form, then one decode form in turn
        session.reset()
        np.testing.assert_array_equal(np.asarray(session.prefill(ids)), want_prefill, err_msg=repr(ids))
        np.testing.assert_array_equal(np.asarray(session.decode(step)), want_decode, err_msg=repr(step))
    session.reset()
    tokens = session.generate(np.array(prompts, np.int32), 2, stop_at_eos=False)
    session.reset()
    np.testing.assert_array_equal(session.generate(torch.tensor(prompts), 2, stop_at_eos=False), tokens)


# session options ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("max_batch", "match"),
    [
        (-1, r"max_batch must be at least 1, got -1"),
        (0, r"max_batch must be at least 1, got 0"),
        (2.5, r"max_batch must be an integer, got 2.5"),
        (True, r"max_batch must be an integer, got True"),
        ("4", r"max_batch must be an integer, got '4'"),
    ],
)
def test_bad_max_batch_is_refused(built: tuple[inferx.Program, Path], kind: str, max_batch: Any, match: str) -> None:
    with pytest.raises(SessionError, match=match):
        _open(kind, built, max_batch=max_batch)


@pytest.mark.parametrize(
    ("max_context", "match"),
    [
        (0, r"max_context must be at least 1, got 0"),
        (-5, r"max_context must be at least 1, got -5"),
        (8.0, r"max_context must be an integer, got 8.0"),
        (65, r"max_context 65 exceeds the model's 64"),
    ],
)
def test_bad_max_context_of_a_reference_session_is_refused(
    built: tuple[inferx.Program, Path], max_context: Any, match: str
) -> None:
    with pytest.raises(SessionError, match=match):
        _open("reference", built, max_context=max_context)


def test_max_batch_smaller_than_compiled_caps_the_batch(built: tuple[inferx.Program, Path]) -> None:
    for kind in KINDS:
        s = _open(kind, built, max_batch=1)
        _refused(lambda s=s: s.prefill([[1], [2]]), s, r"batch of 2 exceeds the maximum batch 1")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("eos", "match"),
    [
        (("2",), r"the model's eos_token_ids\[0\] = '2' is not a token id \(an integer >= 0\)"),
        ((2, -1), r"the model's eos_token_ids\[1\] = -1 is not a token id"),
        ((True,), r"the model's eos_token_ids\[0\] = True is not a token id"),
        ((2.0,), r"the model's eos_token_ids\[0\] = 2.0 is not a token id"),
        ((2, VOCAB), None),  # never emitted: generation runs its budget (tests/test_fused_decode's phi3)
    ],
)
def test_model_eos_ids_that_are_not_token_ids_are_refused(
    built: tuple[inferx.Program, Path],
    kind: str,
    eos: tuple[Any, ...],
    match: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model whose EOS ids are strings or negative would never stop at them: the session is
    refused, whether the ids come from a Program or from an artifact's manifest."""
    program, art = built
    assert program.info is not None
    if kind == "reference":
        program = replace(program, info=replace(program.info, eos_token_ids=eos))
    else:
        parse = Manifest.from_sections

        def with_eos(d: Any, where: Any) -> Manifest:
            m = parse(d, where)
            return replace(m, model=replace(m.model, eos_token_ids=eos))

        monkeypatch.setattr(Manifest, "from_sections", staticmethod(with_eos))
    if match is None:
        assert _open(kind, (program, art)).info.eos_token_ids == eos
        return
    with pytest.raises(SessionError, match=match):
        _open(kind, (program, art))


BAD_EOS = [
    (["2"], rf"eos_token_ids\[0\] = '2' is not a token id in \[0, {VOCAB}\)"),
    ("2", r"eos_token_ids must be a token id or a list of them, got '2'"),
    ([1, VOCAB], rf"eos_token_ids\[1\] = {VOCAB} is not a token id in \[0, {VOCAB}\)"),
    (-1, r"eos_token_ids\[0\] = -1 is not a token id"),
    ([True], r"eos_token_ids\[0\] = True is not a token id"),
    (2.5, r"eos_token_ids must be a token id or a list of them, got 2.5"),
    (np.array([1.0]), r"eos_token_ids\[0\] = 1.0 is not a token id"),
    (torch.tensor([VOCAB]), rf"eos_token_ids\[0\] = {VOCAB} is not a token id"),
]


@pytest.mark.parametrize(("eos", "match"), BAD_EOS, ids=[repr(e) for e, _ in BAD_EOS])
def test_generate_refuses_eos_ids_that_are_not_token_ids(session: DecoderSession, eos: Any, match: str) -> None:
    _refused(lambda: session.generate([[1, 2]], 3, eos_token_ids=eos), session, match)


# generate's stop conditions, on a scripted backend ------------------------------------------


class Scripted(DecoderSession):
    """A backend whose greedy token for sequence b at its n-th generated token is script[b][n]."""

    def __init__(self, script: list[list[int]], eos: tuple[int, ...] = (9,), vocab: int = 10):
        info = ModelInfo("toy", vocab, 64, eos, num_layers=1, num_kv_heads=1, head_dim=1)
        super().__init__(info, max_batch=4, max_context=64)
        self.script, self.prompt, self.steps = script, np.zeros(0, np.int64), 0

    def _reset_cache(self, batch: int) -> None:
        self.steps = 0

    def _step(
        self,
        entry: str,
        input_ids: np.ndarray,
        positions: np.ndarray,
        kv_lens: np.ndarray,
        rows: np.ndarray | None = None,
    ) -> np.ndarray:
        k = self.steps
        self.steps += 1
        out = np.zeros((len(self.script), 1, self.info.vocab_size), np.float32)
        for b, tokens in enumerate(self.script):
            out[b, 0, tokens[k]] = 1.0
        return out


def test_generate_stops_when_every_sequence_has_emitted_eos() -> None:
    s = Scripted([[1, 9, 3, 4, 5], [2, 3, 4, 9, 6]])
    out = s.generate([[1], [2]], 5)
    np.testing.assert_array_equal(out, [[1, 9, 9, 9], [2, 3, 4, 9]])  # a finished sequence repeats EOS
    assert s.steps == 4  # the prefill and three decodes; the fifth token is not asked for


def test_generate_without_stop_at_eos_spends_the_whole_budget() -> None:
    s = Scripted([[9, 9, 3, 4, 5]])
    np.testing.assert_array_equal(s.generate([[1]], 5, stop_at_eos=False), [[9, 9, 3, 4, 5]])
    np.testing.assert_array_equal(s.generate([[1]], 5), [[9]])  # EOS first: one token
    np.testing.assert_array_equal(s.generate([[1]], np.int64(1), stop_at_eos=False), [[9]])


def test_generate_with_a_model_without_eos_spends_the_whole_budget() -> None:
    for eos in ((), (10,)):  # none, or one past the vocabulary: never emitted
        s = Scripted([[9, 1, 2]], eos=eos)
        np.testing.assert_array_equal(s.generate([[1]], 3), [[9, 1, 2]])


def test_generate_stops_at_the_eos_ids_given() -> None:
    s = Scripted([[1, 2, 3, 4], [5, 6, 7, 8]])
    np.testing.assert_array_equal(s.generate([[1], [1]], 4, eos_token_ids=[2, 7]), [[1, 2, 2], [5, 6, 7]])
    np.testing.assert_array_equal(s.generate([[1], [1]], 4, eos_token_ids=np.int64(1)), [[1, 1, 1, 1], [5, 6, 7, 8]])
    np.testing.assert_array_equal(s.generate([[1], [1]], 4, eos_token_ids=[]), [[1, 2, 3, 4], [5, 6, 7, 8]])
    np.testing.assert_array_equal(
        s.generate([[1], [1]], 4, eos_token_ids=torch.tensor(2)), [[1, 2, 2, 2], [5, 6, 7, 8]]
    )
    np.testing.assert_array_equal(
        s.generate([[1], [1]], 4, eos_token_ids=[2, 7], stop_at_eos=False), [[1, 2, 3, 4], [5, 6, 7, 8]]
    )
