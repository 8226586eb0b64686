"""HF decoder families against transformers in fp32: prefill logits, greedy decoding, ragged
batches; import errors that name the file and the key; session input checks.

Every numeric failure message carries a one-line repro (case, family, seed, config kwargs).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.torch import load_file, save_file

import inferx
from inferx.compiler.frontend.weights import SafetensorsStore
from inferx.runtime.session import SessionError
from tests.hf_models import CASES, CASES_BY_NAME, Case, build, hf_greedy, hf_logits, prompts, save

TOL = 1e-4
STEPS = 8
PROMPT_LEN = 11
BATCH_LENS = (10, 3, 7)


def assert_close(got: Any, want: np.ndarray, what: str, case: Case) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}\n{case.repro()}"
    err = float(np.abs(got - want).max())
    assert err <= TOL, f"{what}: max abs error {err:.3g} > {TOL}\n{case.repro()}"


def assert_tokens(got: Any, want: list[int], what: str, case: Case) -> None:
    got = [int(t) for t in np.asarray(got).reshape(-1)]
    assert got == want, f"{what}: tokens {got} != HF {want}\n{case.repro()}"


@dataclass
class Loaded:
    case: Case
    model: Any
    program: inferx.Program
    prompt: list[int]
    greedy: tuple[list[int], np.ndarray]  # HF greedy tokens and logits from `prompt`

    def session(self, **options: Any) -> Any:
        return self.program.reference_session(**options)


@pytest.fixture(scope="module", params=CASES, ids=[c.name for c in CASES])
def loaded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    case: Case = request.param
    model = build(case)
    path = save(model, tmp_path_factory.mktemp(case.name))
    program = inferx.import_model(path)
    (prompt,) = prompts(case, [PROMPT_LEN])
    return Loaded(case, model, program, prompt, hf_greedy(model, prompt, STEPS))


# numerics against transformers -------------------------------------------------------------


def test_prefill_matches_hf(loaded: Loaded) -> None:
    logits = loaded.session().prefill(np.array([loaded.prompt]))
    assert_close(logits[0], hf_logits(loaded.model, loaded.prompt), "prefill logits", loaded.case)


def test_generate_matches_hf_greedy(loaded: Loaded) -> None:
    tokens = loaded.session().generate(np.array([loaded.prompt]), STEPS, stop_at_eos=False)
    assert_tokens(tokens, loaded.greedy[0], "generate", loaded.case)


def test_prefill_decode_loop_matches_hf_greedy(loaded: Loaded) -> None:
    want_tokens, want_logits = loaded.greedy
    session = loaded.session()
    logits = session.prefill(np.array([loaded.prompt]))[:, -1]
    for step in range(STEPS):
        assert_close(logits[0], want_logits[step], f"step {step} logits", loaded.case)
        token = int(logits[0].argmax())
        assert_tokens([token], [want_tokens[step]], f"step {step}", loaded.case)
        if step + 1 < STEPS:
            logits = session.decode(np.array([[token]]))[:, 0]


def test_ragged_batch_matches_each_prompt_alone(loaded: Loaded) -> None:
    case = loaded.case
    rows = prompts(case, BATCH_LENS)
    session = loaded.session()
    logits = session.prefill(rows)
    assert logits.shape[:2] == (len(rows), max(BATCH_LENS))
    want = [hf_greedy(loaded.model, row, STEPS) for row in rows]
    for b, row in enumerate(rows):
        assert_close(logits[b, : len(row)], hf_logits(loaded.model, row), f"row {b} prefill logits", case)
    last = logits[np.arange(len(rows)), np.array(BATCH_LENS) - 1]
    for step in range(STEPS):
        for b in range(len(rows)):
            assert_close(last[b], want[b][1][step], f"row {b} step {step} logits", case)
        tokens = last.argmax(-1)
        assert_tokens(tokens, [w[0][step] for w in want], f"step {step}", case)
        if step + 1 < STEPS:
            last = session.decode(tokens[:, None])[:, 0]


def test_reset_starts_over(loaded: Loaded) -> None:
    session = loaded.session()
    session.prefill(prompts(loaded.case, [5, 4]))
    session.reset()
    logits = session.prefill(np.array([loaded.prompt]))
    assert_close(logits[0], hf_logits(loaded.model, loaded.prompt), "prefill after reset", loaded.case)


@pytest.mark.parametrize("name", ["llama32-tied-gqa2", "gpt2-hd24"])
def test_import_transformers_model_object(name: str) -> None:
    case = CASES_BY_NAME[name]
    model = build(case)
    program = inferx.import_model(model)
    (prompt,) = prompts(case, [PROMPT_LEN])
    session = program.reference_session()
    assert_close(session.prefill([prompt])[0], hf_logits(model, prompt), "prefill logits", case)
    tokens = session.generate([prompt], STEPS, stop_at_eos=False)
    assert_tokens(tokens, hf_greedy(model, prompt, STEPS)[0], "generate", case)


def test_sharded_checkpoint_imports_and_matches(tmp_path: Path) -> None:
    case = CASES_BY_NAME["qwen2-bias-gqa2"]
    model = build(case)
    path = save(model, tmp_path / "sharded", max_shard_size="20KB")
    assert (path / "model.safetensors.index.json").is_file()
    assert len(list(path.glob("*.safetensors"))) > 2
    session = inferx.import_model(path).reference_session()
    (prompt,) = prompts(case, [PROMPT_LEN])
    assert_close(session.prefill([prompt])[0], hf_logits(model, prompt), "prefill logits", case)
    tokens = session.generate([prompt], STEPS, stop_at_eos=False)
    assert_tokens(tokens, hf_greedy(model, prompt, STEPS)[0], "generate", case)


# bad checkpoints: clear errors naming the file and the key, before any weight is read ---------

BAD_CASE = CASES_BY_NAME["llama-gqa2-hd40"]


@pytest.fixture(scope="module")
def good_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save(build(BAD_CASE), tmp_path_factory.mktemp("good"))


@pytest.fixture
def checkpoint(good_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of a good checkpoint to break; reading any weight fails the test."""

    def no_reads(self: SafetensorsStore, key: str) -> np.ndarray:
        raise AssertionError(f"weight '{key}' was read before the checkpoint was validated")

    monkeypatch.setattr(SafetensorsStore, "__getitem__", no_reads)
    return Path(shutil.copytree(good_dir, tmp_path / "ckpt"))


def _edit_config(path: Path, **changes: Any) -> Path:
    config_path = path / "config.json"
    raw = json.loads(config_path.read_text())
    for key, value in changes.items():
        if value is None:
            del raw[key]
        else:
            raw[key] = value
    config_path.write_text(json.dumps(raw))
    return config_path


def _rewrite_weights(path: Path, edit: Any) -> Path:
    file = path / "model.safetensors"
    tensors = load_file(str(file))
    edit(tensors)
    save_file(tensors, str(file), metadata={"format": "pt"})
    return file


def _import_error(path: Path) -> str:
    with pytest.raises(ValueError) as info:
        inferx.import_model(path)
    return str(info.value)


def test_directory_without_config(checkpoint: Path) -> None:
    (checkpoint / "config.json").unlink()
    msg = _import_error(checkpoint)
    assert str(checkpoint) in msg and "config.json" in msg


def test_config_missing_required_key(checkpoint: Path) -> None:
    config_path = _edit_config(checkpoint, hidden_size=None)
    msg = _import_error(checkpoint)
    assert str(config_path) in msg and "'hidden_size'" in msg


def test_unknown_architecture_lists_supported(checkpoint: Path) -> None:
    config_path = _edit_config(checkpoint, model_type="falcon", architectures=["FalconForCausalLM"])
    msg = _import_error(checkpoint)
    assert str(config_path) in msg and "falcon" in msg
    for supported in ("llama", "mistral", "qwen2", "phi3", "gpt2", "LlamaForCausalLM"):
        assert supported in msg


def test_missing_weight(checkpoint: Path) -> None:
    key = "model.layers.1.mlp.down_proj.weight"
    file = _rewrite_weights(checkpoint, lambda t: t.pop(key))
    msg = _import_error(checkpoint)
    assert file.name in msg and f"'{key}'" in msg


def test_weight_shape_disagrees_with_config(checkpoint: Path) -> None:
    key = "model.layers.0.mlp.up_proj.weight"

    def shrink(t: dict[str, Any]) -> None:
        t[key] = t[key][:-1].contiguous()

    file = _rewrite_weights(checkpoint, shrink)
    msg = _import_error(checkpoint)
    inter, hidden = BAD_CASE.kwargs["intermediate_size"], BAD_CASE.kwargs["hidden_size"]
    assert file.name in msg and f"'{key}'" in msg
    assert f"[{inter - 1}, {hidden}]" in msg and f"[{inter}, {hidden}]" in msg


def test_truncated_safetensors(checkpoint: Path) -> None:
    file = checkpoint / "model.safetensors"
    size = file.stat().st_size
    with file.open("r+b") as f:
        f.truncate(size - 1000)
    msg = _import_error(checkpoint)
    assert str(file) in msg and "truncated" in msg and "'" in msg  # names the tensor cut short


def test_truncated_header(checkpoint: Path) -> None:
    file = checkpoint / "model.safetensors"
    with file.open("r+b") as f:
        f.truncate(100)
    msg = _import_error(checkpoint)
    assert str(file) in msg and "truncated" in msg


def test_path_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        inferx.import_model(missing)


def test_bin_only_checkpoint(checkpoint: Path) -> None:
    import torch

    file = checkpoint / "model.safetensors"
    torch.save(load_file(str(file)), checkpoint / "pytorch_model.bin")
    file.unlink()
    msg = _import_error(checkpoint)
    assert str(checkpoint) in msg and "pytorch_model.bin" in msg and "safetensors" in msg


# session input checks ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_program() -> inferx.Program:
    return inferx.import_model(build(CASES_BY_NAME["qwen2-bias-gqa2"]))


def test_token_outside_vocabulary(small_program: inferx.Program) -> None:
    vocab = CASES_BY_NAME["qwen2-bias-gqa2"].vocab_size
    session = small_program.reference_session()
    with pytest.raises(SessionError, match=rf"token id {vocab} .*\[0, {vocab}\)"):
        session.prefill([[1, 2, vocab]])
    with pytest.raises(SessionError, match=rf"token id -1 .*\[0, {vocab}\)"):
        session.prefill([[1, -1]])
    session.prefill([[1, 2, 3]])
    with pytest.raises(SessionError, match=rf"token id {vocab + 5} .*\[0, {vocab}\)"):
        session.decode([vocab + 5])


def test_prompt_longer_than_max_context(small_program: inferx.Program) -> None:
    session = small_program.reference_session(max_context=16)
    with pytest.raises(SessionError, match=r"17 tokens.*maximum context is 16"):
        session.prefill([list(range(17))])
    session.reset()
    session.prefill([list(range(16))])
    with pytest.raises(SessionError, match=r"maximum context is 16"):
        session.decode([3])


def test_max_context_over_the_model_limit(small_program: inferx.Program) -> None:
    with pytest.raises(SessionError, match=r"max_context 65 exceeds the model's 64"):
        small_program.reference_session(max_context=65)


def test_batch_over_max_batch(small_program: inferx.Program) -> None:
    session = small_program.reference_session(max_batch=2)
    with pytest.raises(SessionError, match=r"batch of 3 exceeds the maximum batch 2"):
        session.prefill([[1], [2, 3], [4]])
    with pytest.raises(SessionError, match=r"batch of 3 exceeds the maximum batch 2"):
        session.generate(np.ones((3, 4), dtype=np.int64), 2)


def test_decode_before_prefill(small_program: inferx.Program) -> None:
    session = small_program.reference_session()
    with pytest.raises(SessionError, match="decode before prefill"):
        session.decode([1])
    session.prefill([[1, 2]])
    session.reset()
    with pytest.raises(SessionError, match="decode before prefill"):
        session.decode([1])


def test_decode_batch_differs_from_prefill(small_program: inferx.Program) -> None:
    session = small_program.reference_session()
    session.prefill([[1, 2], [3]])
    with pytest.raises(SessionError, match=r"decode got 3 sequences; the session holds 2"):
        session.decode([1, 2, 3])


def test_rope_scaling_without_factor(checkpoint: Path) -> None:
    config_path = _edit_config(checkpoint, rope_parameters={"rope_type": "linear", "rope_theta": 10000.0})
    msg = _import_error(checkpoint)
    assert str(config_path) in msg and "'factor'" in msg and "linear" in msg


def test_unsupported_rope_type_lists_supported(checkpoint: Path) -> None:
    rope = {"rope_type": "yarn", "factor": 2.0, "rope_theta": 10000.0}
    config_path = _edit_config(checkpoint, rope_parameters=rope)
    msg = _import_error(checkpoint)
    assert str(config_path) in msg and "'yarn'" in msg and "llama3" in msg


def test_heads_not_a_multiple_of_kv_heads(checkpoint: Path) -> None:
    config_path = _edit_config(checkpoint, num_key_value_heads=3)
    msg = _import_error(checkpoint)
    assert str(config_path) in msg and "num_key_value_heads (3)" in msg


# more of the session contract, against transformers ----------------------------------------


def test_chunked_prefill_and_torch_input(loaded: Loaded) -> None:
    import torch

    session = loaded.session()
    head = session.prefill(torch.tensor([loaded.prompt[:6]]))
    tail = session.prefill(torch.tensor([loaded.prompt[6:]]))
    want = hf_logits(loaded.model, loaded.prompt)
    assert_close(np.concatenate([head[0], tail[0]]), want, "chunked prefill logits", loaded.case)
    logits = session.decode(torch.tensor([loaded.greedy[0][0]]))
    assert_close(logits[0, 0], loaded.greedy[1][1], "decode after chunked prefill", loaded.case)


def test_generate_stops_at_eos() -> None:
    from dataclasses import replace

    case = CASES_BY_NAME["phi3-fused-gqa2"]
    model = build(case)
    program = inferx.import_model(model)
    (prompt,) = prompts(case, [PROMPT_LEN])
    tokens, _ = hf_greedy(model, prompt, STEPS)
    eos = tokens[2]
    assert eos not in tokens[:2], case.repro()
    assert program.info is not None
    program.info = replace(program.info, eos_token_ids=(eos,))
    session = program.reference_session()
    assert_tokens(session.generate([prompt], STEPS), tokens[:3], "generate to eos", case)
    # a batch runs until every row is done; a finished row repeats its EOS
    (other,) = prompts(replace(case, seed=99), [5])
    other_tokens, _ = hf_greedy(model, other, STEPS)
    out = session.generate([prompt, other], STEPS)
    rows = out.shape[1]
    assert_tokens(out[0], (tokens[:3] + [eos] * STEPS)[:rows], "row 0", case)
    stop = other_tokens.index(eos) + 1 if eos in other_tokens else STEPS
    assert rows == max(3, stop), case.repro()
    assert_tokens(out[1, :stop], other_tokens[:stop], "row 1", case)


@pytest.mark.parametrize("name, legacy", [
    ("llama2-linear-gqa1", {"type": "linear", "factor": 4.0}),
    ("llama3-rope-gqa4-hd64", {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
])
def test_legacy_rope_scaling_config(name: str, legacy: dict[str, Any], tmp_path: Path) -> None:
    """Checkpoints saved before transformers 5 carry ``rope_theta`` and ``rope_scaling``."""
    import transformers

    case = CASES_BY_NAME[name]
    path = save(build(case), tmp_path / name)
    theta = case.kwargs["rope_parameters"]["rope_theta"]
    _edit_config(path, rope_parameters=None, rope_theta=theta, rope_scaling=legacy)
    model = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
    assert model.config.rope_parameters["rope_type"] == case.kwargs["rope_parameters"]["rope_type"]
    (prompt,) = prompts(case, [PROMPT_LEN])
    logits = inferx.import_model(path).reference_session().prefill([prompt])
    assert_close(logits[0], hf_logits(model, prompt), "prefill logits (legacy config)", case)
