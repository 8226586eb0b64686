"""HF checkpoints quantized by GPTQ or AWQ, kept int4 (inferx/compiler/quant/hf_int4.py and
``quant="checkpoint"``).

Checkpoints are packed here, in each layout, from codes, zero points and fp16 scales drawn at
random (a tiny Llama, one layer): (1) what ``hf_int4`` reads is bit for bit the drawn codes,
scales and minimums, and dequantizes bit for bit as a direct numpy reading of the stored tensors;
(2) the artifact compiled with ``quant="checkpoint"`` (cpu, fp32) matches a ``transformers`` model
holding the dequantized weights within 1e-4 of the largest logit, prefill and decode, with the
float weight of an int4 linear never read; (3) every layout InferX does not read is one line
naming the config field or the tensor, and nothing is written.
Repro of a failure: the message carries the ``pytest -k`` line (fixed seeds).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers as T
from safetensors.numpy import load_file, save_file
from test_qgemm import _assert_close

import inferx
from inferx.compiler.options import CompileError
from inferx.compiler.quant import hf_int4
from inferx.compiler.quant.hf_int4 import HFQuantError, quant_config

MAX_SEQ_LEN = 32
PROMPT = [5, 17, 3, 88, 41, 9, 60, 2, 33, 71, 14]
STEPS = 3
CONFIG = dict(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64)
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # AutoAWQ's gemm packing: nibble i of a pack holds column AWQ_ORDER[i]
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj")

# name -> quantization_config (the fields the Hub's checkpoints carry)
LAYOUTS: dict[str, dict[str, Any]] = {
    "gptq-asym": {"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": False, "desc_act": False},
    "gptq-sym": {"quant_method": "gptq", "bits": 4, "group_size": 64, "sym": True, "desc_act": False},
    "gptq-desc-act-plain": {"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": False, "desc_act": True,
                            "static_groups": True},
    "gptq-v2": {"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": False, "desc_act": False,
                "checkpoint_format": "gptq_v2"},
    "awq": {"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True, "version": "gemm"},
}


# --- packing, written here from the layouts' descriptions ----------------------------------


def _pack8(a: np.ndarray) -> np.ndarray:
    """[..., 8] values 0..15 -> int32 [...], value i in bits 4i..4i+3."""
    out = np.zeros(a.shape[:-1], dtype=np.uint32)
    for i in range(8):
        out |= a[..., i].astype(np.uint32) << np.uint32(4 * i)
    return out.view(np.int32)


def _draw(rng: np.random.Generator, n: int, k: int, g: int, sym: bool) -> tuple[np.ndarray, ...]:
    """codes [N, K], zero points [N, K/g] (8 when symmetric; 1..15 else, so AutoGPTQ's stored
    z - 1 never wraps) and fp16 scales [N, K/g]."""
    q = rng.integers(0, 16, (n, k), dtype=np.uint8)
    z = np.full((n, k // g), 8) if sym else rng.integers(1, 16, (n, k // g))
    s = (rng.random((n, k // g)) * 0.008 + 0.004).astype(np.float16)
    return q, z, s


def pack_gptq(q: np.ndarray, z: np.ndarray, s: np.ndarray, g: int, v1: bool) -> dict[str, np.ndarray]:
    n, k = q.shape
    zs = (z - 1) & 0xF if v1 else z
    return {
        "qweight": _pack8(q.T.reshape(k // 8, 8, n).transpose(0, 2, 1)),  # [K/8, N], along K
        "qzeros": _pack8(zs.T.reshape(k // g, n // 8, 8)),  # [K/g, N/8], along N
        "scales": np.ascontiguousarray(s.T),
        "g_idx": (np.arange(k) // g).astype(np.int32),
    }


def pack_awq(q: np.ndarray, z: np.ndarray, s: np.ndarray, g: int) -> dict[str, np.ndarray]:
    n, k = q.shape
    return {
        "qweight": _pack8(q.T.reshape(k, n // 8, 8)[..., AWQ_ORDER]),  # [K, N/8], along N
        "qzeros": _pack8(z.T.reshape(k // g, n // 8, 8)[..., AWQ_ORDER]),
        "scales": np.ascontiguousarray(s.T),
    }


def dequantize_stored(t: dict[str, np.ndarray], method: str, g: int, v1: bool) -> np.ndarray:
    """The float32 weight [N, K] of stored tensors, element by element as the layouts define it:
    scale[grp, n] * (q[k, n] - z[grp, n])."""
    qw, qz = t["qweight"].view(np.uint32), t["qzeros"].view(np.uint32)
    if method == "gptq":
        k, n = qw.shape[0] * 8, qw.shape[1]
        kk, nn = np.meshgrid(np.arange(k), np.arange(n), indexing="ij")
        grp = t["g_idx"][kk]
        q = (qw[kk // 8, nn] >> (4 * (kk % 8)).astype(np.uint32)) & 0xF
        z = ((qz[grp, nn // 8] >> (4 * (nn % 8)).astype(np.uint32)) & 0xF) + int(v1)
    else:
        k, n = qw.shape[0], qw.shape[1] * 8
        kk, nn = np.meshgrid(np.arange(k), np.arange(n), indexing="ij")
        grp = kk // g
        pos = np.array([AWQ_ORDER.index(c) for c in range(8)], dtype=np.uint32)[nn % 8]
        q = (qw[kk, nn // 8] >> (4 * pos)) & 0xF
        z = (qz[grp, nn // 8] >> (4 * pos)) & 0xF
    s = t["scales"].astype(np.float32)[grp, nn]
    return (s * (q.astype(np.float32) - z.astype(np.float32))).T


def write_checkpoint(path: Path, layout: str, seed: int = 0) -> T.LlamaForCausalLM:
    """A one-layer Llama packed in ``layout`` at ``path`` (fp16 embeddings, norms and LM head, as
    checkpoints on the Hub store them); returns the float model holding the same weights."""
    qc = LAYOUTS[layout]
    method, g = qc["quant_method"], qc["group_size"]
    v1 = method == "gptq" and qc.get("checkpoint_format", "gptq") == "gptq"
    torch.manual_seed(seed)
    model = T.LlamaForCausalLM(T.LlamaConfig(**CONFIG)).eval()
    rng = np.random.default_rng(seed)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    tensors: dict[str, np.ndarray] = {}
    for key, w in state.items():
        prefix = key.removesuffix(".weight")
        if not any(prefix.endswith(lin) for lin in LINEARS):
            tensors[key] = w.astype(np.float16)
            state[key] = tensors[key].astype(np.float32)
            continue
        q, z, s = _draw(rng, *w.shape, g, qc.get("sym", False))
        stored = pack_gptq(q, z, s, g, v1) if method == "gptq" else pack_awq(q, z, s, g)
        tensors.update({f"{prefix}.{part}": a for part, a in stored.items()})
        state[key] = dequantize_stored(stored, method, g, v1)
    path.mkdir(parents=True)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    config = {**model.config.to_dict(), "torch_dtype": "float16", "quantization_config": qc}
    (path / "config.json").write_text(json.dumps(config))
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    return model


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, T.LlamaForCausalLM]]:
    root = tmp_path_factory.mktemp("quant_hf")
    return {layout: (root / layout, write_checkpoint(root / layout, layout)) for layout in LAYOUTS}


# --- (1) unpacking ----------------------------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_unpacking_is_bit_exact(layout: str) -> None:
    qc = LAYOUTS[layout]
    method, g, sym = qc["quant_method"], qc["group_size"], qc.get("sym", False)
    v1 = method == "gptq" and qc.get("checkpoint_format", "gptq") == "gptq"
    spec = quant_config({"quantization_config": qc}, "config.json")
    repro = f"repro: pytest tests/test_quant_hf.py -k 'bit_exact and {layout}'"
    for n, k, seed in ((32, 64, 1), (128, 256, 2)):
        q, z, s = _draw(np.random.default_rng(seed), n, k, g, sym)
        if method == "gptq":
            t = pack_gptq(q, z, s, g, v1)
            qw = hf_int4.int4_from_gptq(t["qweight"], t["qzeros"], t["scales"], t["g_idx"], spec, "w")
        else:
            t = pack_awq(q, z, s, g)
            qw = hf_int4.int4_from_awq(t["qweight"], t["qzeros"], t["scales"], spec, "w")
        assert qw.scheme.group == g and qw.scheme.symmetric == sym, repro
        assert np.array_equal(qw.codes, q), f"codes differ\n{repro}"
        assert np.array_equal(qw.scales, s.astype(np.float32)), f"scales differ\n{repro}"
        if sym:
            assert qw.mins is None, repro
        else:
            assert qw.mins is not None and np.array_equal(qw.mins, -(z * s.astype(np.float32))), f"mins\n{repro}"
        assert np.array_equal(qw.dequantize(), dequantize_stored(t, method, g, v1)), f"dequantized\n{repro}"


# --- (2) compiled, against transformers ------------------------------------------------------


@pytest.mark.parametrize("layout", ["gptq-asym", "gptq-sym", "awq"])
def test_compiled_checkpoint_matches_transformers(
    layout: str, checkpoints: dict[str, tuple[Path, T.LlamaForCausalLM]], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src, model = checkpoints[layout]
    read = hf_int4.CheckpointInt4.__getitem__

    def no_dequantize(self: hf_int4.CheckpointInt4, key: str) -> np.ndarray:
        assert key not in self.linears, f"{key}: an int4 linear read as float while compiling"
        return read(self, key)

    monkeypatch.setattr(hf_int4.CheckpointInt4, "__getitem__", no_dequantize)
    path = inferx.compile(src, target="cpu", dtype="f32", quant="checkpoint", output=tmp_path / "a",
                          max_seq_len=MAX_SEQ_LEN, max_batch=1)
    monkeypatch.undo()
    weights = json.loads((path / "manifest.json").read_text())["weights"]
    assert sum(w["dtype"] == "i4" for w in weights.values()) == 4  # q|k|v, o, gate|up, down
    repro = f"repro: pytest tests/test_quant_hf.py -k 'matches_transformers and {layout}'"
    session = inferx.load(path, device="cpu")
    seq = list(PROMPT)
    with torch.no_grad():
        want = model(torch.tensor([seq])).logits.numpy()
    got = session.prefill(np.array([seq]))
    _assert_close(got, want, "prefill logits", repro)
    for step in range(STEPS):
        seq.append(int(want[0, -1].argmax()))
        with torch.no_grad():
            want = model(torch.tensor([seq])).logits[:, -1:].numpy()
        _assert_close(session.decode(np.array([seq[-1:]])), want, f"decode step {step}", repro)


def test_import_reads_the_checkpoint_dequantized(checkpoints: dict[str, tuple[Path, T.LlamaForCausalLM]]) -> None:
    """``import_model`` (no compile) sees each int4 linear as its dequantized float weight, and
    the checkpoint's desc_act with a plain g_idx reads as groups in order."""
    src, model = checkpoints["gptq-desc-act-plain"]
    program = inferx.import_model(src, dtype="f32")
    want = model.state_dict()["model.layers.0.mlp.down_proj.weight"].numpy()
    assert np.array_equal(np.asarray(program.weights["model.layers.0.mlp.down_proj.weight"]), want)
    src, model = checkpoints["gptq-v2"]
    program = inferx.import_model(src, dtype="f32")
    want = model.state_dict()["model.layers.0.self_attn.k_proj.weight"].numpy()
    assert np.array_equal(np.asarray(program.weights["model.layers.0.self_attn.k_proj.weight"]), want)


# --- (3) what is refused ---------------------------------------------------------------------


def _with_config(**fields: Any) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        config = json.loads((path / "config.json").read_text())
        config["quantization_config"].update(fields)
        (path / "config.json").write_text(json.dumps(config))
    return edit


def _permuted_g_idx(path: Path) -> None:
    tensors = load_file(str(path / "model.safetensors"))
    key = "model.layers.0.self_attn.o_proj.g_idx"
    tensors[key] = np.random.default_rng(0).permutation(tensors[key]).astype(np.int32)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})


def _without(key: str) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        tensors = load_file(str(path / "model.safetensors"))
        del tensors[key]
        save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    return edit


REFUSED: dict[str, tuple[str, Callable[[Path], None], str]] = {
    # name: (layout, edit, what the one line names)
    "desc-act-permuted": ("gptq-desc-act-plain", _permuted_g_idx,
                          r"'model.layers.0.self_attn.o_proj.g_idx': groups are not contiguous"),
    "bits-8": ("gptq-asym", _with_config(bits=8), r"quantization_config.bits is 8: .*4-bit"),
    "unknown-method": ("gptq-asym", _with_config(quant_method="bitsandbytes"),
                       r"quantization_config.quant_method 'bitsandbytes' is not supported"),
    "awq-gemv": ("awq", _with_config(version="gemv"), r"quantization_config.version 'gemv' is not supported"),
    "per-column": ("gptq-asym", _with_config(group_size=-1), r"quantization_config.group_size is -1 \(one group"),
    "exllama-v2": ("awq", _with_config(version="exllama"), r"quantization_config.version 'exllama'"),
    "marlin": ("gptq-asym", _with_config(checkpoint_format="marlin"), r"checkpoint_format 'marlin'"),
    "missing-qzeros": ("gptq-asym", _without("model.layers.0.mlp.up_proj.qzeros"),
                       r"tensor 'model.layers.0.mlp.up_proj.qzeros' is missing"),
    "missing-scales": ("awq", _without("model.layers.0.self_attn.v_proj.scales"),
                       r"tensor 'model.layers.0.self_attn.v_proj.scales' is missing"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_in_one_line(case: str, checkpoints: dict[str, tuple[Path, T.LlamaForCausalLM]],
                             tmp_path: Path) -> None:
    layout, edit, want = REFUSED[case]
    src = tmp_path / "src"
    shutil.copytree(checkpoints[layout][0], src)
    edit(src)
    out = tmp_path / "a"
    with pytest.raises(HFQuantError, match=want) as e:
        inferx.compile(src, target="cpu", dtype="f32", quant="checkpoint", output=out, max_seq_len=MAX_SEQ_LEN,
                       max_batch=1)
    assert "\n" not in str(e.value)
    assert not out.exists()


def test_a_quantized_checkpoint_needs_quant_checkpoint(
    checkpoints: dict[str, tuple[Path, T.LlamaForCausalLM]], tmp_path: Path
) -> None:
    src = checkpoints["gptq-asym"][0]
    for quant in (None, "int4-g32"):
        out = tmp_path / f"a-{quant}"
        with pytest.raises(CompileError, match=r"quantized \(gptq\): pass quant='checkpoint'") as e:
            inferx.compile(src, target="cpu", dtype="f32", quant=quant, output=out, max_seq_len=MAX_SEQ_LEN,
                           max_batch=1)
        assert "\n" not in str(e.value) and not out.exists()


def test_quant_checkpoint_needs_a_quantized_checkpoint(tmp_path: Path) -> None:
    torch.manual_seed(0)
    src = tmp_path / "float"
    T.LlamaForCausalLM(T.LlamaConfig(**CONFIG)).save_pretrained(src)
    out = tmp_path / "a"
    with pytest.raises(HFQuantError, match=r"config.json: no quantization_config: the checkpoint is not quantized"):
        inferx.compile(src, target="cpu", dtype="f32", quant="checkpoint", output=out, max_seq_len=MAX_SEQ_LEN,
                       max_batch=1)
    assert not out.exists()


def test_cli_says_to_pass_quant_checkpoint(checkpoints: dict[str, tuple[Path, T.LlamaForCausalLM]],
                                           tmp_path: Path) -> None:
    from click.testing import CliRunner

    from inferx.cli import main

    out = tmp_path / "a.ixa"
    args = ["compile", str(checkpoints["awq"][0]), "-o", str(out), "--target", "cpu", "--dtype", "fp32"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines()[-1].startswith("error: ") and "(--quant checkpoint)" in result.stderr
    assert "Traceback" not in result.output and not out.exists()
