"""The fused decode MLP (``fuse_mlp``: the fuse-decode-mlp pass and the mlp template): one kernel
per decode layer's MLP on the gated families, computed by Triton's interpreter against HF
transformers in fp32 with the CPU's and the GPU's schedules, correct when a launch replays on
the scratch its last launch left (as a captured graph does), and refused clearly where it does
not apply."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as T

import inferx
from inferx.compiler.driver import CompileError
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.passes import registry
from inferx.passes.pipeline import PassManager, parse
from inferx.runtime.artifact import load_artifact
from inferx.runtime.cuda_session import CudaSession
from tests.fake_cuda import FakeDriver

GATED = {
    "llama": (T.LlamaConfig, T.LlamaForCausalLM, {}),
    "mistral": (T.MistralConfig, T.MistralForCausalLM, {"sliding_window": 4}),
    "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM, {}),
    "phi3": (T.Phi3Config, T.Phi3ForCausalLM, {"pad_token_id": 0}),
}
PIPELINE = "canonicalize,cse,dce,merge-gemms,interleave-pairs,fold-norm-weights,dce,fuse,norm-stats"


def _model(family: str, layers: int = 2, intermediate: int = 40):
    cfg_cls, model_cls, extra = GATED[family]
    torch.manual_seed(0)
    cfg = cfg_cls(vocab_size=67, hidden_size=32, intermediate_size=intermediate, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **extra)
    return model_cls(cfg).eval()


def _kernels(program) -> dict[str, collections.Counter]:
    return {f.sym_name.data: collections.Counter(k.template.data for k in f.body.block.ops if isinstance(k, KernelOp))
            for f in program.module.ops}


@pytest.mark.parametrize("family", sorted(GATED))
def test_each_decode_mlp_is_one_kernel_and_computes_the_same(family: str) -> None:
    model = _model(family, layers=3)
    plain = inferx.import_model(model)
    PassManager(parse(PIPELINE, registry())).run(plain.module)
    fused = inferx.import_model(model)
    PassManager(parse(PIPELINE + ",fuse-decode-mlp", registry())).run(fused.module)
    before, after = _kernels(plain), _kernels(fused)
    assert after["decode"]["mlp"] == 3, after
    assert sum(after["decode"].values()) == sum(before["decode"].values()) - 3
    assert after["prefill"] == before["prefill"], "prefill MLPs stay two GEMMs"
    a, b = plain.reference_session(), fused.reference_session()
    ids = np.random.default_rng(1).integers(0, 67, (2, 5))
    a.prefill(ids)
    b.prefill(ids)
    np.testing.assert_allclose(b.decode(ids[:, :1]), a.decode(ids[:, :1]), atol=1e-6,
                               err_msg=f"repro: pytest {__file__} -k '{family}'")


@pytest.mark.parametrize(("family", "schedules", "intermediate"),
                         [("llama", "cpu", 40), ("llama", "sm_90", 40), ("phi3", "sm_90", 72), ("qwen2", "cpu", 48)])
def test_fused_mlp_matches_hf(family: str, schedules: str, intermediate: int, tmp_path: Path) -> None:
    """Three sequences in the batch-4 bucket: with the GPU's schedules a kernel per batch bucket,
    four rows per program at 4 (one masked), with the CPU's one kernel of one row per program; I
    of 40 and 72 leave the last program's columns ragged."""
    model = _model(family, intermediate=intermediate)
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=24, max_batch=4,
                         schedules=schedules, fuse_mlp=True)
    kernels = load_artifact(art).manifest["kernels"]
    mlps = [k for k in kernels.values() if k["template"] == "mlp"]
    assert {k["constexprs"]["BM"] for k in mlps} == ({1, 4} if schedules == "sm_90" else {1})  # buckets 1 and 4
    session = inferx.load(art)
    ids = torch.randint(0, 67, (3, 8), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = model(ids).logits.numpy()
    repro = f"repro: pytest {__file__} -k 'matches_hf and {family} and {schedules}'"
    np.testing.assert_allclose(session.prefill(ids[:, :5]), want[:, :5], atol=1e-4, err_msg=repro)
    for step in range(5, 8):
        np.testing.assert_allclose(session.decode(ids[:, step : step + 1]), want[:, step : step + 1], atol=1e-4,
                                   err_msg=repro)


def test_graph_replay_equals_plain_launches(tmp_path: Path) -> None:
    """CUDA sessions on the fake driver (kernels interpreted on the CPU): a replayed decode graph
    reuses its scratch, so each launch must leave its sums and arrival counters zeroed; replayed
    steps equal plain launches and HF, and the kernel table counts the fused MLP's two weights."""
    model = _model("llama")
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=24, max_batch=2,
                         schedules="sm_90", fuse_mlp=True)
    replayed = CudaSession(load_artifact(art), driver=FakeDriver())  # type: ignore[arg-type]
    plain = CudaSession(load_artifact(art), driver=FakeDriver(), graphs=False)  # type: ignore[arg-type]
    prompts = [[3, 4, 5], [6, 7, 8, 9]]
    replayed.prefill(prompts)
    plain.prefill(prompts)
    seqs = [list(p) for p in prompts]
    rng = np.random.default_rng(0)
    for step in range(3):
        tok = rng.integers(0, 67, (2, 1))
        a, b = replayed.decode(tok), plain.decode(tok)
        repro = f"repro: pytest {__file__} -k graph_replay (step {step})"
        np.testing.assert_array_equal(a, b, err_msg=repro)
        for i in range(2):
            seqs[i].append(int(tok[i, 0]))
            with torch.no_grad():
                want = model(torch.tensor([seqs[i]])).logits[0, -1].numpy()
            np.testing.assert_allclose(a[i, 0], want, atol=1e-4, err_msg=repro)
    rows = replayed.time_kernels("decode", 1, 1, 8, warmup=0, iters=1)
    (mlp,) = [r for r in rows if r["template"] == "mlp"]
    weights = 2 * 40 * 32 * 4 + 32 * 40 * 4  # gate|up and down, fp32
    assert mlp["launches"] == 2 and mlp["flops_per_launch"] == 2 * weights // 4
    assert mlp["bytes_per_launch"] >= weights


def test_fuse_mlp_refuses_what_it_cannot_fuse(tmp_path: Path) -> None:
    with pytest.raises(CompileError, match="at most 8 rows"):
        inferx.compile(_model("llama"), target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=24,
                       max_batch=16, fuse_mlp=True)
    torch.manual_seed(0)
    gpt2 = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=67, n_embd=32, n_layer=1, n_head=4, n_positions=64)).eval()
    with pytest.raises(CompileError, match="0 of the 1 decode MLPs fused; the mlp template takes a gated MLP"):
        inferx.compile(gpt2, target="cpu", output=tmp_path / "b", dtype="fp32", max_seq_len=24, max_batch=2,
                       fuse_mlp=True)
    assert not (tmp_path / "b").exists()
