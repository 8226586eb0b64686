"""The fused decode kernels: ``fuse_mlp`` (the fuse-decode-mlp pass and the mlp template: a
layer's MLP as one kernel) and ``fuse_attention_o`` (fuse-decode-attention-o and the attention_o
template: its attention and o projection as one), alone and together. One kernel fewer per
decode layer for each, on the families they take; computed by Triton's interpreter against HF
transformers in fp32 with the CPU's and the GPU's schedules (output tiles finished by different
programs included); correct when a launch replays on the scratch its last launch left (as a
captured graph does); refused clearly where they do not apply."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as T

import inferx
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.options import CompileError
from inferx.compiler.pipeline import registry
from inferx.passes.pipeline import PassManager, parse
from inferx.runtime.artifact import load_artifact
from inferx.runtime.cuda_session import CudaSession
from tests.fake_cuda import FakeDriver

FAMILIES = {
    "llama": (T.LlamaConfig, T.LlamaForCausalLM, {}),
    "mistral": (T.MistralConfig, T.MistralForCausalLM, {"sliding_window": 4}),
    "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM, {}),
    "phi3": (T.Phi3Config, T.Phi3ForCausalLM, {"pad_token_id": 0}),
}
PIPELINE = "canonicalize,cse,dce,merge-gemms,interleave-pairs,fold-norm-weights,dce,fuse,norm-stats"
# option -> (template, pass)
FUSIONS = {"fuse_mlp": ("mlp", "fuse-decode-mlp"), "fuse_attention_o": ("attention_o", "fuse-decode-attention-o")}
BOTH = ("fuse_mlp", "fuse_attention_o")


def _model(family: str, layers: int = 2, intermediate: int = 40):
    cfg_cls, model_cls, extra = FAMILIES[family]
    torch.manual_seed(0)
    cfg = cfg_cls(vocab_size=67, hidden_size=32, intermediate_size=intermediate, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **extra)
    return model_cls(cfg).eval()


def _kernels(program) -> dict[str, collections.Counter]:
    return {f.sym_name.data: collections.Counter(k.template.data for k in f.body.block.ops if isinstance(k, KernelOp))
            for f in program.module.ops}


@pytest.mark.parametrize("option", sorted(FUSIONS))
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_layer_fuses_and_computes_the_same(family: str, option: str) -> None:
    template, pass_name = FUSIONS[option]
    model = _model(family, layers=3)
    plain = inferx.import_model(model)
    PassManager(parse(PIPELINE, registry())).run(plain.module)
    fused = inferx.import_model(model)
    PassManager(parse(f"{PIPELINE},{pass_name}", registry())).run(fused.module)
    before, after = _kernels(plain), _kernels(fused)
    assert after["decode"][template] == 3, after
    assert sum(after["decode"].values()) == sum(before["decode"].values()) - 3
    assert after["prefill"] == before["prefill"], "prefill keeps its kernels"
    a, b = plain.reference_session(), fused.reference_session()
    ids = np.random.default_rng(1).integers(0, 67, (2, 5))
    a.prefill(ids)
    b.prefill(ids)
    np.testing.assert_allclose(b.decode(ids[:, :1]), a.decode(ids[:, :1]), atol=1e-6,
                               err_msg=f"repro: pytest {__file__} -k '{family} and {option}'")


SLOW = pytest.mark.slow
THOROUGH = (pytest.mark.slow, pytest.mark.thorough)  # a further variant: not in CI's run
# family, schedules, intermediate size, options. CI runs both fusions together on the GPU's
# schedules (qwen2); each alone on the GPU's schedules is a further variant of it.
CASES = [
    pytest.param("llama", "cpu", 40, ("fuse_mlp",), marks=THOROUGH),
    pytest.param("llama", "sm_90", 40, ("fuse_mlp",), marks=THOROUGH),
    pytest.param("phi3", "sm_90", 72, ("fuse_mlp",), marks=THOROUGH),
    pytest.param("qwen2", "cpu", 48, ("fuse_mlp",), marks=THOROUGH),
    pytest.param("llama", "cpu", 40, ("fuse_attention_o",), marks=THOROUGH),
    pytest.param("mistral", "sm_90", 40, ("fuse_attention_o",), marks=THOROUGH),
    pytest.param("phi3", "cpu", 40, BOTH, marks=THOROUGH),
    ("qwen2", "sm_90", 40, BOTH),
]


@pytest.mark.parametrize(("family", "schedules", "intermediate", "options"), CASES)
def test_fused_kernels_match_hf(family: str, schedules: str, intermediate: int, options: tuple[str, ...],
                                tmp_path: Path) -> None:
    """Three sequences in the batch-4 bucket, decoding past mistral's window of 4: with the GPU's
    schedules a kernel per batch bucket (the MLP four rows per program at 4, one masked), with the
    CPU's one kernel; I of 40 and 72 leave the MLP's last program's columns ragged; the fused
    attention's output tiles (16 columns on the CPU) are finished by whichever KV head arrives
    last."""
    model = _model(family, intermediate=intermediate)
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=24, max_batch=4,
                         schedules=schedules, **dict.fromkeys(options, True))
    kernels = load_artifact(art).manifest["kernels"]
    assert all(any(k["template"] == FUSIONS[o][0] for k in kernels.values()) for o in options)
    if "fuse_mlp" in options:  # a kernel per batch bucket (1, 4) on the GPU's schedules
        bms = {k["constexprs"]["BM"] for k in kernels.values() if k["template"] == "mlp"}
        assert bms == ({1, 4} if schedules == "sm_90" else {1})
    session = inferx.load(art)
    ids = torch.randint(0, 67, (3, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = model(ids).logits.numpy()
    repro = f"repro: pytest {__file__} -k 'matches_hf and {family} and {schedules}' ({options})"
    np.testing.assert_allclose(session.prefill(ids[:, :5]), want[:, :5], atol=1e-4, err_msg=repro)
    for step in range(5, 9):
        np.testing.assert_allclose(session.decode(ids[:, step : step + 1]), want[:, step : step + 1], atol=1e-4,
                                   err_msg=f"{repro}, step {step}")


@pytest.mark.slow
def test_graph_replay_equals_plain_launches(tmp_path: Path) -> None:
    """CUDA sessions on the fake driver (kernels interpreted on the CPU): a replayed decode graph
    reuses its scratch, so each launch must leave its sums and arrival counters zeroed; replayed
    steps equal plain launches and HF, and the kernel table counts each fused kernel's weights."""
    model = _model("llama")
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=24, max_batch=2,
                         schedules="sm_90", fuse_mlp=True, fuse_attention_o=True)
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
    (att,) = [r for r in rows if r["template"] == "attention_o"]
    kv = 2 * 2 * 8 * 8 * 4  # K and V of 2 KV heads x 8 dims at context 8, fp32
    assert att["launches"] == 2 and att["bytes_per_launch"] >= 32 * 32 * 4 + kv
    assert att["flops_per_launch"] == 4 * (4 * 8) * 8 + 2 * 32 * 32


def _schedules(option: str) -> list:
    from inferx.compiler.families.attention_o.codegen import AttentionOSchedule
    from inferx.compiler.families.mlp.codegen import MlpSchedule

    if option == "fuse_attention_o":  # keys a step, then tiles of 8 columns: 1, 2 or all 4 per program
        return [AttentionOSchedule(bn, 8, tiles) for bn, tiles in ((16, 1), (32, 2), (16, 4))]
    # one tile of all 32 output columns or two and four of 16 and 8; I = 40 in 3, 2 or 5 programs;
    # each step's loads issued a step ahead (prefetch) or not; products on tensor cores (dot: the
    # rows of one program, or of all three, in a tile of 16); K's reduction after the loop (defer)
    loads = ((16, 32, 1), (32, 16, 0), (8, 8, 1), (8, 8, 0))
    return [*(MlpSchedule(1, bi, 16, bn, prefetch=pf) for bi, bn, pf in loads),
            *(MlpSchedule(bm, 16, 16, 16, prefetch=0, dot=1) for bm in (1, 4)),
            *(MlpSchedule(1, 16, 16, 16, prefetch=pf, defer=1) for pf in (0, 1))]


@pytest.mark.parametrize("option", ["fuse_attention_o", pytest.param("fuse_mlp", marks=SLOW)])
def test_fused_schedules_agree(option: str, tmp_path: Path) -> None:
    """Each fused kernel on schedules that split its output columns and its programs differently
    gives the same outputs on the same operands (the tuner's reference check, in Triton's
    interpreter): the output tiles are finished by different programs in each."""
    from inferx.autotune.extract import fused_module
    from inferx.autotune.runner import LocalRunner
    from inferx.compiler.codegen import generate

    template, pass_name = FUSIONS[option]
    _model("llama").save_pretrained(tmp_path / "m")
    module = fused_module(tmp_path / "m", "fp32")
    PassManager(parse(pass_name, registry())).run(module)
    kop = next(o for o in module.walk() if isinstance(o, KernelOp) and o.template.data == template)
    runner = LocalRunner({}, device="cpu")
    env = {"batch": 3, "seq": 1, "ctx": 24}
    outs = [runner.outputs(kop, generate(kop, "k", "cpu", sched, grid_dependency=False), env)
            for sched in _schedules(option)]
    for other in outs[1:]:
        for name, want in outs[0].items():
            np.testing.assert_allclose(other[name].numpy(), want.numpy(), rtol=1e-5, atol=1e-5,
                                       err_msg=f"repro: pytest {__file__} -k 'schedules_agree and {option}' ({name})")


@pytest.mark.parametrize("option", sorted(FUSIONS))
def test_fusion_refuses_what_it_cannot_fuse(option: str, tmp_path: Path) -> None:
    template = FUSIONS[option][0]
    with pytest.raises(CompileError, match=f"{option}: the fused decode kernel runs at most 8 rows"):
        inferx.compile(_model("llama"), target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=24,
                       max_batch=16, **{option: True})
    torch.manual_seed(0)  # GPT-2: an MLP of LayerNorm, GELU and biases; an o projection with a bias
    gpt2 = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=67, n_embd=32, n_layer=1, n_head=4, n_positions=64)).eval()
    with pytest.raises(CompileError, match=f"{option}: 0 of the 1 decode .* fused; the {template} template takes"):
        inferx.compile(gpt2, target="cpu", output=tmp_path / "b", dtype="fp32", max_seq_len=24, max_batch=2,
                       **{option: True})
    assert not (tmp_path / "b").exists()


def test_counted_arrivals_fence_their_writes_on_gpu(tmp_path: Path) -> None:
    """Every kernel whose programs count their arrival before another reads what they wrote (the
    fused kernels' sums, split-K and split-KV partials) makes each thread's writes visible at GPU
    scope before the barrier that precedes its arrival, where it is compiled for a GPU (the
    interpreter runs these same sources in the other tests of this file)."""
    from inferx.autotune.extract import fused_module
    from inferx.compiler.codegen import generate
    from inferx.compiler.families.attention.codegen import AttentionSchedule, is_decode
    from inferx.compiler.families.common.tile import RELEASE_WRITES
    from inferx.compiler.families.gemm.codegen import GemmSchedule

    _model("llama").save_pretrained(tmp_path / "m")
    plain = fused_module(tmp_path / "m", "fp32")
    attention = next(o for o in plain.walk() if isinstance(o, KernelOp) and o.template.data == "attention"
                     and is_decode(o))
    module = plain.clone()
    PassManager(parse("fuse-decode-mlp,fuse-decode-attention-o", registry())).run(module)
    kernels = {o.template.data: o for o in module.walk() if isinstance(o, KernelOp)}
    cases = {"mlp": (kernels["mlp"], None), "attention_o": (kernels["attention_o"], None),
             "gemm split-K": (kernels["gemm"], GemmSchedule(16, 16, 16, split_k=2)),
             "split-KV attention": (attention, AttentionSchedule(bn=16, splits=4))}
    for what, (kop, sched) in cases.items():
        src = generate(kop, "k", "sm_90", sched).source
        assert "ON_GPU = tl.constexpr(" in src, what
        lines = [line.strip() for line in src.splitlines()]
        arrival = next(i for i, line in enumerate(lines) if line.startswith("arrived = tl.atomic_add(ws_count"))
        assert lines[arrival - 3: arrival] == ["if ON_GPU:", RELEASE_WRITES, "tl.debug_barrier()"], \
            f"{what}: {lines[arrival - 3: arrival]}"


def test_mlp_reference_matches_the_kernel(tmp_path: Path) -> None:
    """The torch reference the GPU checks of the fused MLP use (``benchmark.fused_check``) agrees
    with the kernel in Triton's interpreter over repeated launches on one scratch (the sums and the
    counter left zeroed), and sees a kernel that drops the residual."""
    from dataclasses import replace

    from inferx.autotune.extract import fused_module
    from inferx.benchmark.fused_check import mlp_errors
    from inferx.compiler.codegen import generate
    from inferx.compiler.families.mlp.codegen import MlpSchedule

    _model("llama").save_pretrained(tmp_path / "m")
    module = fused_module(tmp_path / "m", "fp32")
    PassManager(parse("fuse-decode-mlp", registry())).run(module)
    kop = next(o for o in module.walk() if isinstance(o, KernelOp) and o.template.data == "mlp")
    env = {"batch": 3, "seq": 1}
    ks = generate(kop, "k", "cpu", MlpSchedule(1, 16, 16, 8), grid_dependency=False)
    errs = mlp_errors(kop, ks, env, launches=2, device="cpu")
    assert max(errs) < 1e-5, f"{errs}; repro: pytest {__file__} -k mlp_reference"
    # the residual dropped: the check sees it
    dropped = replace(ks, source=re.sub(r"\((x\d+)\) \+ \(y\)", "(y)", ks.source))
    assert dropped.source != ks.source
    assert min(mlp_errors(kop, dropped, env, launches=1, device="cpu")) > 1e-3
