"""``CudaSession`` on a fake driver that interprets the kernels on the CPU (tests/fake_cuda.py):
against HF transformers in fp32, graph replay against plain launches for every batch bucket
(a batch of 3 runs padded in bucket 4), per-bucket GEMM variants (GPU schedules: GEMV for one
row, the dot path above)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as T

import inferx
from inferx.runtime.artifact import load_artifact
from inferx.runtime.cuda_session import CudaSession
from inferx.runtime.session import SessionError
from tests.fake_cuda import FakeDriver


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[torch.nn.Module, Path]:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = T.LlamaForCausalLM(cfg).eval()
    art = inferx.compile(model, target="cpu", output=tmp_path_factory.mktemp("fake") / "a", dtype="fp32",
                         max_seq_len=24, max_batch=4, schedules="sm_90")
    return model, art


def _session(art: Path, **options: object) -> CudaSession:
    return CudaSession(load_artifact(art), driver=FakeDriver(), **options)  # type: ignore[arg-type]


def test_prefill_last_runs_the_lm_head_variant_of_its_batch(compiled) -> None:
    """prefill_last's LM head is decode's GEMV, generated per batch bucket: its launch says its rows
    are the batch's, so a 20-token prompt runs the variant of its batch, not of 20 or 80 rows."""
    _, art = compiled
    entries = load_artifact(art).manifest["entries"]
    head = entries["prefill_last"]["launches"][-1]
    assert head["rows"] == "batch" and head["by_rows"] == entries["decode"]["launches"][-1]["by_rows"]
    assert [b for b, _ in head["by_rows"]] == [1, 4]
    session = _session(art)
    for batch, variant in ((1, 0), (3, 1), (4, 1)):
        assert session._bind("prefill_last", batch, 20).launches[-1].source.name == head["by_rows"][variant][1]
    assert all("rows" not in ln for ln in entries["prefill"]["launches"])  # prefill GEMMs: batch x seq


def test_prefill_last_counts_its_tail_over_the_last_tokens(compiled) -> None:
    """The kernel table's FLOPs and bytes for prefill_last: its LM head multiplies one row per
    sequence (prefill's, every token's), its last-token gather reads and writes a row per sequence
    and reads the positions it scans."""
    _, art = compiled
    s = _session(art)
    full = s.time_kernels("prefill", 4, 8, 8, warmup=0, iters=1)
    last = s.time_kernels("prefill_last", 4, 8, 8, warmup=0, iters=1)
    head = 2 * 64 * 32  # FLOPs of the LM head per row (vocab 64, hidden 32)
    assert (full[-1]["flops_per_launch"], last[-1]["flops_per_launch"]) == (4 * 8 * head, 4 * head)
    gathers = [r for r in last if r["template"] == "gather" and r["kernel"] not in {f["kernel"] for f in full}]
    assert [r["bytes_per_launch"] for r in gathers] == [2 * 4 * 32 * 4 + 4 * 8 * 4]  # fp32 rows; i32 positions


def test_launch_plan_has_per_bucket_variants(compiled) -> None:
    _, art = compiled
    launches = load_artifact(art).manifest["entries"]["decode"]["launches"]
    variants = [ln["by_rows"] for ln in launches if "by_rows" in ln]
    assert variants and all([b for b, _ in v] == [1, 4] for v in variants)
    kernels = load_artifact(art).manifest["kernels"]
    assert {kernels[v[0][1]]["constexprs"]["BM"] for v in variants} == {1}
    assert {kernels[v[1][1]]["constexprs"]["BM"] for v in variants} == {16}


@pytest.mark.parametrize("batch", [1, pytest.param(3, marks=pytest.mark.thorough)])
def test_graph_replay_matches_plain_launches_and_hf(compiled, batch: int) -> None:
    model, art = compiled
    replayed, plain = _session(art), _session(art, graphs=False)
    prompts = [[(5 * i + j) % 64 for j in range(4 + i)] for i in range(batch)]
    np.testing.assert_array_equal(replayed.prefill(prompts), plain.prefill(prompts))
    seqs = [list(p) for p in prompts]
    rng = np.random.default_rng(batch)
    repro = f"repro: pytest tests/test_cuda_session_fake.py -k 'replay and {batch}'"
    for step in range(3):
        tok = rng.integers(0, 64, (batch, 1))
        a, b = replayed.decode(tok), plain.decode(tok)
        np.testing.assert_array_equal(a, b, err_msg=f"step {step}: replay differs from launches; {repro}")
        for i in range(batch):
            seqs[i].append(int(tok[i, 0]))
            with torch.no_grad():
                want = model(torch.tensor([seqs[i]])).logits[0, -1].numpy()
            np.testing.assert_allclose(a[i, 0], want, atol=1e-4, err_msg=f"step {step} row {i}; {repro}")
    decode_graphs = [b for k, b in replayed._bound.items() if k[0] == "decode"]
    assert [b.graph is not None for b in decode_graphs] == [True]


@pytest.mark.slow
def test_time_kernels_lists_every_kernel_once(compiled) -> None:
    _, art = compiled
    s = _session(art)
    rows = s.time_kernels("decode", 1, 1, 8, warmup=0, iters=1)
    plan = load_artifact(art).manifest["entries"]["decode"]["launches"]
    assert sum(r["launches"] for r in rows) == len(plan)
    assert all(r["bytes_per_launch"] > 0 for r in rows)
    # attention reads K and V at the context timed, not the cache's 24 positions: 8 more
    # positions of 2 KV heads x 8 dims in fp32, for K and for V
    longer = s.time_kernels("decode", 1, 1, 16, warmup=0, iters=1)
    att = [(a["bytes_per_launch"], b["bytes_per_launch"]) for a, b in zip(rows, longer, strict=True)
           if a["template"] == "attention"]
    assert att and all(b - a == 2 * 8 * (2 * 8 * 4) for a, b in att), att
    assert all(r["record_ms"] is None for r in rows)  # compiled without a tuning database
    for bad in ((1, 0, 8), (1, 1, -3), (1, 1, 8.5)):
        with pytest.raises(SessionError, match="must be a positive integer"):
            s.time_kernels("decode", *bad, warmup=0, iters=1)
    # a tuned kernel carries its record's time from the manifest
    artifact = load_artifact(art)
    name = rows[1]["kernel"]
    artifact.manifest["schedules"]["tuned"][name] = {"task": "t", "summary": "", "median_ms": 0.0123,
                                                    "schedule": {}, "date": "", "source": ""}
    tuned = CudaSession(artifact, driver=FakeDriver()).time_kernels("decode", 1, 1, 8, warmup=0, iters=1)  # type: ignore[arg-type]
    assert [r["record_ms"] for r in tuned] == [0.0123 if r["kernel"] == name else None for r in tuned]
    # a kernel that serves several row buckets shows the record of the bucket the step ran
    artifact.manifest["schedules"]["tuned"][name]["by_rows"] = {"1": 0.0042, "4": None}
    tuned = CudaSession(artifact, driver=FakeDriver()).time_kernels("decode", 1, 1, 8, warmup=0, iters=1)  # type: ignore[arg-type]
    assert [r["record_ms"] for r in tuned] == [0.0042 if r["kernel"] == name else None for r in tuned]


def test_inspect_shows_each_variant_with_its_bucket(compiled) -> None:
    import json

    from click.testing import CliRunner

    from inferx.cli import main

    _, art = compiled
    out = CliRunner().invoke(main, ["inspect", str(art), "--json"])
    assert out.exit_code == 0, out.output
    uses = [set(k["launches"]) for k in json.loads(out.output)["kernels"].values()]
    assert {"decode@rows<=1"} in uses and {"decode@rows<=4"} in uses


@pytest.mark.thorough  # a further variant: outside CI's run
def test_torch_outputs_equal_numpy_outputs_and_generate_works(compiled) -> None:
    _, art = compiled
    a, b = _session(art), _session(art, outputs="torch")
    prompts = [[1, 2, 3], [4, 5]]
    x, y = a.prefill(prompts), b.prefill(prompts)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and tuple(y.shape) == x.shape
    np.testing.assert_array_equal(x, y.numpy())
    np.testing.assert_array_equal(a.decode([[6], [7]]), b.decode(torch.tensor([[6], [7]])).numpy())
    np.testing.assert_array_equal(a.generate([[1, 2, 3]], 3), b.generate([[1, 2, 3]], 3))
    with pytest.raises(Exception, match="use 'numpy' or 'torch'"):
        _session(art, outputs="jax")


@pytest.mark.slow  # a few seconds: CI runs it, the fast tier does not
def test_prefill_returns_last_token_logits_copying_only_those_rows(compiled) -> None:
    """``prefill(..., logits="last")``: each ragged prompt's last real token, [batch, 1, vocab],
    the same numbers as those rows of the full logits (within fp32 rounding), with batch rows crossing to the host (not
    batch x seq); as torch tensors too; any other value is refused by name."""
    _, art = compiled
    prompts = [[1, 2, 3, 4, 5], [6, 7], [8, 9, 10]]
    full, last = _session(art), _session(art)
    want = full.prefill(prompts)
    before = last.drv.downloaded  # type: ignore[attr-defined]
    got = last.prefill(prompts, logits="last")
    assert got.shape == (3, 1, 64)
    assert last.drv.downloaded - before == 3 * 64 * 4  # type: ignore[attr-defined]  # fp32 logits
    # prefill_last's LM head is a GEMV over 3 rows, prefill's a GEMM over 15: other kernels, whose
    # fp32 sums (numpy and BLAS calls in the interpreter) may be ordered differently, by CPU too
    # (3e-8 seen on one machine, on logits of magnitude up to 0.4); 1e-5 is far above that and far
    # below a wrong row (another token's logits differ from these by 0.4)
    np.testing.assert_allclose(got[:, 0], want[[0, 1, 2], [4, 1, 2]], rtol=1e-5, atol=1e-5,
                               err_msg="repro: pytest tests/test_cuda_session_fake.py -k last_token_logits")
    # same caches (the layers' kernels are prefill's), same decode kernels: the same computation
    np.testing.assert_array_equal(last.decode([[3], [4], [5]]), full.decode([[3], [4], [5]]))
    tt = _session(art, outputs="torch").prefill(prompts, logits="last")
    assert isinstance(tt, torch.Tensor) and tuple(tt.shape) == (3, 1, 64)
    np.testing.assert_array_equal(tt.numpy(), got)
    with pytest.raises(SessionError, match="logits must be 'all' or 'last', got 'first'"):
        full.prefill(prompts, logits="first")


def test_bf16_logits_widen_to_fp32_exactly_row_by_row(compiled) -> None:
    """bf16 logits on the device come to the host as fp32 with the same values (the high half of
    each fp32), all rows in one copy or chosen rows at their offsets."""
    from inferx.runtime.cuda_session import _Bound

    _, art = compiled
    session = _session(art)
    vals = torch.tensor([[1.0, -2.5, float("inf"), 3.0e-39], [0.15625, -0.0, 65504.0, -1.0e30]],
                        dtype=torch.bfloat16)
    ptr = session.drv.alloc(vals.numel() * 2, "logits")
    session.drv.memory[ptr][: vals.numel() * 2] = vals.reshape(-1).view(torch.uint8)  # type: ignore[attr-defined]
    session.info = replace(session.info, vocab_size=4)
    bound = _Bound([], [], ptr, "bf16")
    want = vals.float().numpy()
    np.testing.assert_array_equal(session._download(bound, range(2)), want)
    np.testing.assert_array_equal(session._download(bound, [1]), want[1:])


def test_launches_take_the_manifest_warp_count(compiled) -> None:
    """A kernel whose cubin was compiled to more warps than its schedule names (``launch_warps``,
    as warp specialization does) launches with the compiled count; the others with their own."""
    _, art = compiled
    a = load_artifact(art)
    name = sorted(a.manifest["kernels"])[0]
    meta = a.manifest["kernels"][name]  # a cubin's fields (the fake driver reads no cubin: any file of the artifact)
    meta.update(cubin=meta["file"], shared=0, extra_params=2, global_scratch=0, global_scratch_align=1,
                launch_warps=12)
    session = CudaSession(a, driver=FakeDriver())  # type: ignore[arg-type]
    assert {n: k.num_warps for n, (_, k) in session.kernels.items()} == \
        {n: 12 if n == name else m["num_warps"] for n, m in a.manifest["kernels"].items()}


def test_int4_launches_count_two_flops_a_weight(tmp_path: Path) -> None:
    """A qgemm launch's FLOPs come from its packed codes (two weights a byte): the int4 LM head at
    one row is 2 x vocab x hidden, as the float one is. The CUDA session (fake driver) computes
    the cpu session's logits from the same artifact."""
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    art = inferx.compile(T.LlamaForCausalLM(cfg).eval(), target="cpu", output=tmp_path / "q", dtype="fp32",
                         max_seq_len=16, max_batch=1, schedules="sm_90", quant="int4-g32", quant_head=True)
    session = _session(art)
    rows = session.time_kernels("decode", 1, 1, 8, warmup=0, iters=1)
    assert rows[-1]["template"] == "qgemm" and rows[-1]["flops_per_launch"] == 2 * 64 * 32, rows[-1]
    # and the session binds the packed codes as the cpu session does: the same logits
    ids = np.array([[3, 9, 27, 17, 51]])
    session.reset()
    got, want = np.asarray(session.prefill(ids)), np.asarray(inferx.load(art, device="cpu").prefill(ids))
    assert np.abs(got - want).max() <= 1e-4 * max(1.0, float(np.abs(want).max())), "repro: pytest -k int4_launches"


def test_empty_launches_are_left_out(tmp_path: Path) -> None:
    """A row bucket's kernel of no programs (the FP8 quantizing kernel below
    ``fp8_decode_min_batch``) is bound and captured by no launch: batch 1 launches the decode
    plan less those kernels, batch 3 (bucket 4) all of it."""
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    art = inferx.compile(T.LlamaForCausalLM(cfg).eval(), target="cpu", output=tmp_path / "f", dtype="fp32",
                         max_seq_len=16, max_batch=4, schedules="sm_90", quant="fp8", fp8_decode_min_batch=4)
    plan = load_artifact(art).manifest["entries"]["decode"]["launches"]
    quant = [ln for ln in plan if ln["kernel"].startswith("fp8quant_")]
    assert len(quant) == 4, [ln["kernel"] for ln in plan]  # q|k|v, o, gate|up, down
    session = _session(art)
    one, three = session._bind("decode", 1, 8).launches, session._bind("decode", 3, 8).launches
    assert len(one) == len(plan) - len(quant) and len(three) == len(plan)
    assert not any(ln.source.empty for ln in one) and sum(ln.source.template == "fp8quant" for ln in three) == 4


def test_a_row_saved_and_restored_resumes_its_tokens(compiled) -> None:
    """save_row copies a held row of every cache to the host and restore_row puts it in another
    row (how the engine preempts and resumes a request): the restored row decodes as the
    original does."""
    _, art = compiled
    s = _session(art)
    s.hold_rows(2)
    ids = np.array([[3, 9, 27, 17], [0, 0, 0, 0]])
    pos = np.array([[0, 1, 2, 3], [-1, -1, -1, -1]])
    s.step_rows("prefill_last", ids, pos, np.array([4, 1]))
    s.restore_row(1, s.save_row(0))
    out = np.asarray(s.step_rows("decode", np.array([[5], [5]]), np.array([[4], [4]]), np.array([5, 5])))
    assert np.allclose(out[0], out[1], rtol=0, atol=1e-6), "repro: pytest tests/test_cuda_session_fake.py -k row_saved"
    with pytest.raises(SessionError, match="save_row gives"):
        s.restore_row(1, [np.zeros(3, np.uint8)] * 4)
