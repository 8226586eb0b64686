"""The GPU's schedules (GEMV-mode decode GEMMs, split-KV decode attention with its last-program
merge) computed by Triton's interpreter against HF transformers, so they are checked without a
GPU. Artifacts are compiled for the CPU with ``schedules="sm_90"``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as T

import inferx
from inferx.runtime.artifact import load_artifact

CASES = {
    "llama-gqa4": (T.LlamaConfig, T.LlamaForCausalLM, {"num_key_value_heads": 1}),
    # head_dim 64 and N >= 128: the prefill qkv GEMM on the sm_90 tile (128 x 64, one head per
    # program, RoPE partners by a swap of halves, RoPE applied once to the accumulator)
    "llama-head64": (T.LlamaConfig, T.LlamaForCausalLM,
                     {"num_key_value_heads": 1, "hidden_size": 128, "num_attention_heads": 2,
                      "intermediate_size": 128}),
    "phi3-window": (T.Phi3Config, T.Phi3ForCausalLM,
                    {"num_key_value_heads": 2, "sliding_window": 5, "pad_token_id": 0}),
    # biases of gate|up in pairs (interleave-pairs), in GEMV and dot-path tiles
    "llama-mlp-bias": (T.LlamaConfig, T.LlamaForCausalLM, {"num_key_value_heads": 2, "mlp_bias": True}),
    # K = 256: decode GEMMs of the batch bucket on the heuristic's split-K (2), whole-head RoPE tiles
    "llama-split-k": (T.LlamaConfig, T.LlamaForCausalLM,
                      {"num_key_value_heads": 2, "hidden_size": 256, "intermediate_size": 256}),
    # LayerNorm prologues and Conv1D weights stored K-major
    "gpt2": (T.GPT2Config, T.GPT2LMHeadModel, {"n_inner": 48}),
}
# Compiled with ``overlap``: decode GEMVs take their first K step's weight tiles before the rest
# (the step peeled off the loop), gate|up pairs and RoPE partners included.
OVERLAP = {"llama-mlp-bias", "phi3-window", "gpt2"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c == "llama-gqa4" else pytest.mark.thorough)
                                  for c in sorted(CASES)])
def test_gpu_schedules_match_hf(case: str, tmp_path: Path) -> None:
    cfg_cls, model_cls, extra = CASES[case]
    torch.manual_seed(0)
    sizes = {"hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 4, **extra}
    cfg = cfg_cls(vocab_size=70, num_hidden_layers=2, max_position_embeddings=64, **sizes)
    model = model_cls(cfg).eval()
    with torch.no_grad():  # biases away from their zero init, so one applied to the wrong column shows
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.5, 0.5)
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=24, max_batch=2,
                         schedules="sm_90", overlap=case in OVERLAP)
    a = load_artifact(art)
    kernels = a.manifest["kernels"]
    gemvs = [k for k in kernels.values() if k["template"] == "gemm" and k["constexprs"]["BM"] == 1]
    assert gemvs, "no GEMV kernel"
    assert all(("w0 = tl.load(" in a.file_bytes(k["file"]).decode()) == (case in OVERLAP) for k in gemvs)
    assert any(k["template"] == "attention" and k["constexprs"].get("SPLITS") == 16 for k in kernels.values())
    if case == "llama-split-k":
        split = [k for k in kernels.values() if k["template"] == "gemm" and k["constexprs"].get("SPLIT_K", 1) > 1]
        assert {k["constexprs"]["BN"] for k in split} >= {64}, "no split-K decode GEMM on whole heads"
    if case == "llama-head64":
        assert any(k["template"] == "gemm" and (k["constexprs"]["BM"], k["constexprs"]["BN"]) == (128, 64)
                   for k in kernels.values()), "no sm_90 prefill tile"
    session = inferx.load(art)
    ids = torch.randint(0, 70, (2, 9))
    with torch.no_grad():
        ref = model(ids).logits.numpy()
    repro = f"repro: pytest {__file__} -k {case}"
    np.testing.assert_allclose(session.prefill(ids), ref, atol=1e-4, err_msg=repro)
    seq = ids
    for _ in range(3):  # decode past the window and across several of the 16 context slices
        nxt = torch.randint(0, 70, (2, 1))
        seq = torch.cat([seq, nxt], 1)
        with torch.no_grad():
            want = model(seq).logits.numpy()[:, -1:]
        np.testing.assert_allclose(session.decode(nxt), want, atol=1e-4, err_msg=repro)


@pytest.mark.slow
@pytest.mark.parametrize("rows", [2, 4])
def test_multi_row_gemv_from_the_tuning_database(rows: int, tmp_path: Path) -> None:
    """Decode GEMMs of the batch-4 bucket on a GEMV schedule of ``rows`` rows per program (taken
    from tuning records, as a tuned artifact would) against HF: each weight tile applied to
    several rows in registers."""
    model, n = _tuned_llama(tmp_path, 32, 48, lambda t: t.shape == "decode" and t.rows == 4,
                            {"bm": rows, "bn": 8, "bk": 32, "num_warps": 4, "num_stages": 2})
    assert n == 5  # qkv, o, gate/up, down, lm_head
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=24, max_batch=4,
                         schedules="sm_90", tuning_logs=tmp_path / "logs")
    kernels = load_artifact(art).manifest["kernels"]
    assert sum(k["template"] == "gemm" and k["constexprs"]["BM"] == rows for k in kernels.values()) == 5
    session = inferx.load(art)
    ids = torch.randint(0, 70, (3, 6))
    session.prefill(ids)
    nxt = torch.randint(0, 70, (3, 1))
    with torch.no_grad():
        want = model(torch.cat([ids, nxt], 1)).logits.numpy()[:, -1:]
    repro = f"repro: pytest {__file__} -k 'multi_row and {rows}'"
    np.testing.assert_allclose(session.decode(nxt), want, atol=1e-4, err_msg=repro)


@pytest.mark.slow
@pytest.mark.parametrize("rows", [pytest.param(1, marks=pytest.mark.thorough), 4])
def test_unrolled_gemv_from_the_tuning_database(rows: int, tmp_path: Path) -> None:
    """Decode GEMMs of the batch-4 bucket on unrolled GEMV schedules (the K loop as straight-line
    code) of ``rows`` rows per program, K ragged for the down GEMM (48 = 32 + 16), against HF."""
    model, n = _tuned_llama(tmp_path, 32, 48, lambda t: t.shape == "decode" and t.rows == 4,
                            {"bm": rows, "bn": 8, "bk": 32, "num_warps": 4, "num_stages": 1, "unroll": 1})
    assert n == 5  # qkv, o, gate/up, down, lm_head
    art = _compile_and_match_hf(model, tmp_path, 2, f"repro: pytest {__file__} -k 'unrolled and {rows}'")
    a = load_artifact(art)
    sources = [a.file_bytes(k["file"]).decode() for k in a.manifest["kernels"].values() if k["template"] == "gemm"]
    assert sum("in tl.static_range(" in src for src in sources) == 5


@pytest.mark.parametrize("family", ["llama", "mistral-window"])
def test_prefill_attention_skips_key_blocks_no_query_sees(family: str, tmp_path: Path) -> None:
    """Prefill attention on 16 x 16 tiles (a tuning record) over a 33-token prompt: each query
    block stops at its last position (causal) and, with a sliding window, starts at the first
    key block its first query's window reaches; heads vary fastest over the grid and the query
    blocks run from the last (the most keys) to the first. Against HF."""
    from inferx.autotune.extract import extract_tasks, fused_module
    from inferx.compiler.database import Database, Record
    from inferx.compiler.families.attention import codegen as attention

    torch.manual_seed(0)
    if family == "llama":
        cfg: T.PretrainedConfig = T.LlamaConfig(vocab_size=70, hidden_size=32, intermediate_size=48,
                                                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                max_position_embeddings=64)
        model = T.LlamaForCausalLM(cfg).eval()
    else:
        cfg = T.MistralConfig(vocab_size=70, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                              sliding_window=6)
        model = T.MistralForCausalLM(cfg).eval()
    db = Database.load(tmp_path / "logs", "sm_90")
    tasks = [t for t in extract_tasks(fused_module(model, "fp32"), 48).tasks
             if t.task.template == "attention" and t.task.shape == "prefill"]
    assert len(tasks) == 1
    db.append(Record.make(tasks[0].task, {"bm": 16, "bn": 16, "num_warps": 4, "num_stages": 2}, [1.0], {},
                          "2026-11-30", "test"))
    assert tasks[0].kernel is not None
    ks = attention.generate(tasks[0].kernel, "k", "sm_90", attention.AttentionSchedule(bn=16, bm=16))
    src = ks.source
    assert ks.grid[0].endswith("* 4") and ks.grid[1].startswith("cdiv(") and ks.grid[1].endswith(", 16)")
    assert "pid_bh = tl.program_id(0)" in src and "pid_m = tl.num_programs(1) - 1 - tl.program_id(1)" in src
    if family == "llama":  # blocks every query sees unmasked, then the diagonal masked
        assert "for j0 in range(0, mid, BN)" in src and "for j0 in range(mid, hi, BN)" in src
        assert src.count("tl.where(jm[None, :]") == 1
    else:
        assert "for j0 in range(lo, hi, BN)" in src and "mid = " not in src
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=48, max_batch=1,
                         schedules="sm_90", tuning_logs=tmp_path / "logs")
    kernels = load_artifact(art).manifest["kernels"]
    assert any(k["template"] == "attention" and k["constexprs"].get("BM") == 16 for k in kernels.values())
    ids = torch.randint(0, 70, (1, 33))  # the last block holds one query, at a block boundary
    with torch.no_grad():
        want = model(ids).logits.numpy()
    repro = f"repro: pytest {__file__} -k 'skips and {family}'"
    np.testing.assert_allclose(inferx.load(art).prefill(ids), want, atol=1e-4, err_msg=repro)


@pytest.mark.slow
@pytest.mark.parametrize("hidden,bn", [(32, 16), pytest.param(64, 32, marks=pytest.mark.thorough)])
def test_rope_tiles_of_two_heads(hidden: int, bn: int, tmp_path: Path) -> None:
    """qkv GEMMs (RoPE in the epilogue) on tiles of two whole heads in their natural column order:
    a RoPE partner is the swap of its head's halves (the tile seen as BM x 2 rows of two halves),
    no permutation, no second dot. Prefill and decode (batch 4) against HF."""
    from inferx.autotune.extract import extract_tasks, fused_module
    from inferx.compiler.codegen import generate
    from inferx.compiler.families.gemm.codegen import GemmSchedule

    schedule = {"bm": 16, "bn": bn, "bk": 16, "num_warps": 4, "num_stages": 2}
    model, n = _tuned_llama(tmp_path, hidden, 2 * hidden, lambda t: "rope" in t.epilogue, schedule)
    assert n == 3  # decode at batch buckets 1 and 4, prefill (statistics given: norm-stats)
    kernel = next(t.kernel for t in extract_tasks(fused_module(model, "fp32"), 24).tasks
                  if "rope" in t.task.epilogue and t.task.shape == "prefill")
    assert kernel is not None
    src = generate(kernel, "k", "sm_90", GemmSchedule(16, bn, 16)).source
    assert "c = pid_n * BN + tl.arange(0, BN)\n" in src and "wp = " not in src  # natural columns, no second dot
    assert f"tl.flip(tl.reshape(acc, (BM * 2, 2, {hidden // 8}))" in src  # head_dim hidden / 4 heads
    _compile_and_match_hf(model, tmp_path, 1, f"repro: pytest {__file__} -k 'two_heads and {bn}'")


@pytest.mark.slow
@pytest.mark.parametrize("defer", [0, 1])
def test_rope_gemvs_of_two_heads(defer: int, tmp_path: Path) -> None:
    """Decode qkv GEMVs (one row per program) whose BN weight rows are two whole heads in natural
    order, the reduction per step or deferred: each head's halves swapped. Against HF."""
    schedule = {"bm": 1, "bn": 16, "bk": 16, "num_warps": 4, "num_stages": 2, **({"defer": 1} if defer else {})}
    model, n = _tuned_llama(tmp_path, 32, 64, lambda t: "rope" in t.epilogue and t.rows == 1, schedule)
    assert n == 1  # decode at batch 1 (GEMV mode is for decode; the batch-4 bucket keeps its heuristic)
    art = _compile_and_match_hf(model, tmp_path, 1, f"repro: pytest {__file__} -k 'rope_gemvs and {defer}'")
    a = load_artifact(art)
    srcs = [a.file_bytes(k["file"]).decode() for k in a.manifest["kernels"].values() if k["template"] == "gemm"]
    assert any("tl.reshape(acc, (BM * 2, 2, 4))" in src for src in srcs)  # head_dim 8: two per 16 rows


@pytest.mark.slow
# split 4: the same code, other constants
@pytest.mark.parametrize("split,tma", [(2, 0), pytest.param(2, 1, marks=pytest.mark.thorough)])
def test_split_k_from_the_tuning_database(split: int, tma: int, tmp_path: Path) -> None:
    """Every GEMM (RMSNorm + qkv + RoPE + KV write, o + residual, gated gate/up, down + residual,
    lm_head) on split-K schedules from tuning records, decode at batch 4 and prefill: partial
    accumulators and row statistics reduced by the last program of each tile; in prefill the
    statistics of later norms come from the o and down GEMMs (norm-stats). With ``tma`` each
    program's boxes start at its own K range. Against HF."""
    schedule = {"bm": 16, "bn": 16, "bk": 16, "num_warps": 4, "num_stages": 2, "split_k": split}
    model, n = _tuned_llama(tmp_path, 64, 128, lambda t: t.shape == "prefill" or t.rows == 4,
                            {**schedule, "tma": 1} if tma else schedule)
    # qkv, o, gate/up, down, lm_head; decode (statistics from the kernel's own pass over x) and
    # prefill (from the embedding gather or the previous layer's down GEMM)
    assert n == 10
    # decode twice: the tiles' arrival counters carry over from one launch to the next
    art = _compile_and_match_hf(model, tmp_path, 2, f"repro: pytest {__file__} -k 'split_k and {split}-{tma}'")
    a = load_artifact(art)
    split_k = [k for k in a.manifest["kernels"].values() if k["template"] == "gemm"
               and k["constexprs"].get("SPLIT_K") == split]
    assert len(split_k) == 10
    assert sum("make_tensor_descriptor" in a.file_bytes(k["file"]).decode() for k in split_k) == (10 if tma else 0)
    # decode's qkv, gate/up and lm_head take their rows' statistics from x loaded ahead of the K
    # loop (``early_stats``), not from a pass of their own
    early = [k for k in split_k if "xs1 = tl.load(" in a.file_bytes(k["file"]).decode()]
    assert len(early) == 3 and not any("for k1 in" in a.file_bytes(k["file"]).decode() for k in early)


def test_early_statistics_only_over_short_k_ranges() -> None:
    """A split-K program loads x for its row statistics ahead of the K loop only where its K range
    is a short power of two and the tile fits its registers; longer ranges keep the pass over x
    (measured slower there on an H200)."""
    from inferx.compiler.families.gemm.codegen import early_stats

    assert early_stats(16, 512, 8) and early_stats(16, 256, 4)
    assert not early_stats(16, 1024, 16)  # the 1B gate/up at split 2: 22.9 -> 23.6 us
    assert not early_stats(16, 384, 8)  # one tl.arange
    assert not early_stats(64, 512, 4)  # 256 values a thread


@pytest.mark.slow
def test_deferred_gemv_reductions_from_the_tuning_database(tmp_path: Path) -> None:
    """Every decode GEMM at batch 1 in GEMV mode with its reduction over K deferred to after the
    loop ([8, 16] sums of products a step; x's squares for the RMSNorm of qkv, gate/up and
    lm_head likewise): a prefill and three decode steps of one sequence against HF."""
    schedule = {"bm": 1, "bn": 8, "bk": 16, "num_warps": 2, "num_stages": 1, "defer": 1}
    model, n = _tuned_llama(tmp_path, 64, 128, lambda t: t.shape == "decode" and t.rows == 1, schedule)
    assert n == 5  # qkv, o, gate/up, down, lm_head
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=24, max_batch=1,
                         schedules="sm_90", tuning_logs=tmp_path / "logs")
    a = load_artifact(art)
    deferred = [k for k in a.manifest["kernels"].values()
                if k["template"] == "gemm" and "acc = tl.sum(acc, 1)[None, :]" in a.file_bytes(k["file"]).decode()]
    assert len(deferred) == 5
    session = inferx.load(art)
    repro = f"repro: pytest {__file__} -k deferred_gemv"
    seq = torch.randint(0, 70, (1, 5), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        np.testing.assert_allclose(session.prefill(seq), model(seq).logits.numpy(), atol=1e-4, err_msg=repro)
    for step in range(3):
        nxt = torch.randint(0, 70, (1, 1), generator=torch.Generator().manual_seed(5 + step))
        seq = torch.cat([seq, nxt], 1)
        with torch.no_grad():
            want = model(seq).logits.numpy()[:, -1:]
        np.testing.assert_allclose(session.decode(nxt), want, atol=1e-4, err_msg=f"{repro} (step {step})")


def _compile_and_match_hf(model, tmp_path: Path, steps: int, repro: str) -> Path:  # type: ignore[no-untyped-def]
    """Compiles ``model`` for the CPU with the sm_90 schedules of ``tmp_path/logs``; a prefill of
    three 6-token prompts (every position's logits, and the last token's alone through the
    prefill_last entry) and ``steps`` decode steps match HF. Returns the artifact."""
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=24, max_batch=4,
                         schedules="sm_90", tuning_logs=tmp_path / "logs")
    session = inferx.load(art)
    seq = torch.randint(0, 70, (3, 6))
    with torch.no_grad():
        ref = model(seq).logits.numpy()
    np.testing.assert_allclose(session.prefill(seq, logits="last"), ref[:, -1:], atol=1e-4, err_msg=repro)
    session.reset()
    np.testing.assert_allclose(session.prefill(seq), ref, atol=1e-4, err_msg=repro)
    for _ in range(steps):
        nxt = torch.randint(0, 70, (3, 1))
        seq = torch.cat([seq, nxt], 1)
        with torch.no_grad():
            want = model(seq).logits.numpy()[:, -1:]
        np.testing.assert_allclose(session.decode(nxt), want, atol=1e-4, err_msg=repro)
    return art


def _qkv_rope_task(shape: str, batch: int) -> tuple:  # type: ignore[type-arg]
    """The qkv GEMM task (RoPE and KV-cache write in its epilogue) of a tiny fp32 Llama, and its
    kernel, for ``shape`` ("decode" at batch bucket ``batch``, or "prefill")."""
    from inferx.autotune.extract import extract_tasks, fused_module

    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=70, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    found = extract_tasks(fused_module(T.LlamaForCausalLM(cfg).eval(), "fp32"), 24, batches=(batch,)).tasks
    tasks = [t for t in found if t.task.template == "gemm" and t.task.shape == shape and "kv_write" in t.task.epilogue]
    assert len(tasks) == 1 and tasks[0].kernel is not None
    return tasks[0].task, tasks[0].kernel


def test_local_runner_refuses_a_schedule_that_computes_something_else() -> None:
    """The tuner's local runner checks each candidate against the heuristic schedule on seeded
    operands before timing it (run here in Triton's interpreter): a correct split-K or GEMV
    schedule passes, a kernel that is off by 1% is refused with the reason."""
    from dataclasses import replace

    from inferx.autotune.runner import LocalRunner, bench_env
    from inferx.compiler.codegen import generate
    from inferx.compiler.families.gemm.codegen import GemmSchedule

    task, kop = _qkv_rope_task("decode", batch=4)
    runner = LocalRunner({}, device="cpu")
    env = bench_env(task, 32)
    for sched in (GemmSchedule(16, 16, 16, 4, 2, split_k=2), GemmSchedule(2, 8, 32, 4, 2)):
        ks = generate(kop, "cand", "sm_90", sched, grid_dependency=False)
        assert runner.wrong_results(task, kop, ks, env) == "", sched
    good = generate(kop, "cand", "sm_90", GemmSchedule(16, 16, 16, 4, 2), grid_dependency=False)
    assert "acc += tl.dot(" in good.source
    bad = replace(good, name="bad", source=good.source.replace("def cand(", "def bad(")
                  .replace("acc += tl.dot(", "acc += 1.01 * tl.dot("))
    why = runner.wrong_results(task, kop, bad, env)
    assert why.startswith("wrong results: ") and "heuristic schedule" in why, why


def test_local_runner_stops_at_the_deadline_and_leaves_the_rest_untried() -> None:
    """A tune's time budget bounds a round: candidates still building at the runner's deadline
    are stopped (the build workers ended) and come back untried, to be tried on resume, not
    failed; past the deadline nothing is built or timed."""
    import time

    from inferx.autotune.runner import OUT_OF_TIME, LocalRunner

    task, kop = _qkv_rope_task("decode", batch=4)
    scheds = [{"bm": 16, "bn": 16, "bk": 16, "num_warps": 4, "num_stages": 2},
              {"bm": 4, "bn": 8, "bk": 32, "num_warps": 4, "num_stages": 2}]
    for late in (-1.0, 0.5):  # past already; during the workers' start and the compile
        runner = LocalRunner({task.key: kop}, jobs=2, device="cpu", deadline=time.monotonic() + late)
        t0 = time.monotonic()
        results = runner.measure(task, scheds)
        assert time.monotonic() - t0 < 30
        assert [(r.tried, r.error) for r in results] == [(False, f"not measured: {OUT_OF_TIME}")] * 2, results
        assert runner._pool is None  # the workers stopped mid-build
        runner.close()


def test_local_runner_checks_prefill_kv_writes_on_distinct_positions() -> None:
    """A prefill GEMM that applies RoPE and writes the KV cache gets positions 0..seq-1 from the
    runner, one cache slot per token (all tokens at one position made every candidate's cache
    depend on which program wrote last, and the check refused them all on the GPU); a candidate
    schedule with other tiles then passes the check against the heuristic one."""
    from inferx.autotune.runner import LocalRunner, bench_env, operand_sets
    from inferx.compiler.codegen import generate
    from inferx.compiler.families.gemm.codegen import GemmSchedule

    task, kop = _qkv_rope_task("prefill", batch=1)
    env = dict(bench_env(task, 32), seq=24, ctx=24)
    ks = generate(kop, "cand", "sm_90", GemmSchedule(16, 16, 16, 4, 2), grid_dependency=False)
    (args,) = operand_sets(kop, ks, env, 1 << 20, "cpu", count=1)
    ints = [a for a in args if isinstance(a, torch.Tensor) and a.dtype in (torch.int32, torch.int64)]
    assert ints and all(a.reshape(-1).tolist() == list(range(24)) for a in ints), ints
    runner = LocalRunner({}, device="cpu")
    assert runner.wrong_results(task, kop, ks, env) == ""


def _tuned_llama(tmp_path: Path, hidden: int, inter: int, pick, schedule: dict) -> tuple:  # type: ignore[no-untyped-def]
    """A tiny Llama, and a tuning database under ``tmp_path/logs`` holding ``schedule`` for each
    of its GEMM tasks (decode at batch buckets 1 and 4, prefill) that ``pick`` selects."""
    from inferx.autotune.extract import extract_tasks, fused_module
    from inferx.compiler.database import Database, Record

    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=70, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = T.LlamaForCausalLM(cfg).eval()
    db = Database.load(tmp_path / "logs", "sm_90")
    tasks = [t for t in extract_tasks(fused_module(model, "fp32"), 24, batches=(1, 4)).tasks
             if t.task.template == "gemm" and pick(t.task)]
    for t in tasks:
        db.append(Record.make(t.task, schedule, [1.0], {}, "2026-11-30", "test"))
    return model, len(tasks)


def test_a_kernel_of_several_row_buckets_keeps_each_buckets_record(tmp_path: Path) -> None:
    """Decode GEMMs whose records at batch buckets 1 and 4 hold one schedule generate one kernel
    for both; the manifest keeps each bucket's record time (``by_rows``), so a step's kernel
    table shows the record of the rows it ran, not the first bucket's."""
    from inferx.autotune.extract import extract_tasks, fused_module
    from inferx.compiler.database import Database, Record
    from inferx.runtime.cuda_session import CudaSession

    model, _ = _tuned_llama(tmp_path, 32, 48, lambda t: False, {})
    db = Database.load(tmp_path / "logs", "sm_90")
    sched = {"bm": 4, "bn": 8, "bk": 32, "num_warps": 4, "num_stages": 2}
    tasks = [t.task for t in extract_tasks(fused_module(model, "fp32"), 24, batches=(1, 4)).tasks
             if t.task.template == "gemm" and t.task.shape == "decode"]
    assert sorted({t.rows for t in tasks}) == [1, 4]
    for t in tasks:
        db.append(Record.make(t, sched, [t.rows * 1e-3], {}, "2026-12-03", "test"))
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=24, max_batch=4,
                         schedules="sm_90", tuning_logs=tmp_path / "logs")
    tuned = load_artifact(art).manifest["schedules"]["tuned"]
    shared = {name: t["by_rows"] for name, t in tuned.items() if "by_rows" in t}
    assert len(shared) == 5 and all(b == {"1": 1e-3, "4": 4e-3} for b in shared.values()), tuned
    session = CudaSession.__new__(CudaSession)  # the record lookup alone, without a driver
    session.record_ms = {n: t["median_ms"] for n, t in tuned.items()}
    session.record_by_rows = {n: sorted((int(r), ms) for r, ms in b.items()) for n, b in shared.items()}
    name = next(iter(shared))
    assert [session._record_ms(name, rows) for rows in (1, 3, 4, 5)] == [1e-3, 4e-3, 4e-3, None]


def test_a_candidate_that_fails_to_assemble_leaves_one_line() -> None:
    """What the compiler's tools print for a failing candidate (its whole assembly, on stderr, and
    a crash reproducer, on stdout) stays out of the tuning log; the failure reads as the
    assembler's fatal line."""
    import os

    from inferx.autotune.runner import _captured_output, _compile_error

    with _captured_output() as captured:
        os.write(2, b".b8 0 // End Of Children Mark\nptxas fatal   : (C7600) Register allocation failed\n")
        os.write(1, b"please share the reproducer above\n")
        err = RuntimeError("Internal Triton PTX codegen error\nptxas fatal   : Ptx assembly aborted due to errors")
        text = captured()
        why = _compile_error(err, text)
    assert why == "ptxas fatal : (C7600) Register allocation failed", why
    assert "please share the reproducer above" in text
    assert _compile_error(ValueError("bad   tile\nsize"), "") == "ValueError: bad tile size"


@pytest.mark.slow
def test_short_prompts_take_their_own_prefill_gemms(tmp_path: Path) -> None:
    """Where prompts may exceed 128 tokens, each prefill GEMM has a variant of 64-row tiles for
    prompts of up to 128 tokens (and one for up to 512 where prompts may be longer) and the large
    tiles beyond; the session picks by the prompt's
    rows, and both match HF."""
    from inferx.runtime.manifest import Manifest

    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=70, hidden_size=128, intermediate_size=128, num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512)
    model = T.LlamaForCausalLM(cfg).eval()
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=320, max_batch=1,
                         schedules="sm_90")
    m = load_artifact(art).manifest
    gemms = [s for s in m["entries"]["prefill"]["launches"] if m["kernels"][s["kernel"]]["template"] == "gemm"]
    # qkv, o, gate|up, down; the lm_head (N = 70) takes the same 64-row tiles either way
    assert [len(s.get("by_rows", [])) for s in gemms] == [2, 2, 2, 2, 0], gemms
    gemms = gemms[:4]
    assert all([b for b, _ in s["by_rows"]] == [128, 320] for s in gemms), gemms
    bm = {tuple(m["kernels"][n]["constexprs"]["BM"] for _, n in s["by_rows"]) for s in gemms}
    assert bm == {(64, 128)}, bm
    launches = Manifest.from_sections(m, art).entries["prefill"].launches
    variants = [s for s in launches if s.by_rows and m["kernels"][s.kernel]["template"] == "gemm"]
    assert {s.kernel_for(1, 300) for s in variants} == {s["by_rows"][1][1] for s in gemms}
    session = inferx.load(art)
    repro = f"repro: pytest {__file__} -k short_prompts"
    for seq in (40, 290):
        session.reset()
        ids = torch.randint(0, 70, (1, seq))
        with torch.no_grad():
            want = model(ids).logits.numpy()
        np.testing.assert_allclose(session.prefill(ids), want, atol=1e-4, err_msg=f"{seq} tokens; {repro}")


@pytest.mark.thorough  # a further schedule knob in the interpreter: outside CI's run
def test_tma_loads_from_the_tuning_database(tmp_path: Path) -> None:
    """Prefill GEMMs on TMA schedules from tuning records: x and W tiles through tensor
    descriptors, rows past M and N read as zeros; qkv on one-head tiles with RoPE and KV writes,
    o and down with the residual and row statistics, lm_head, and the gated gate/up GEMM with its
    gate and up rows (stored in pairs) as one box of 2*BN rows. Against HF in Triton's interpreter."""
    schedule = {"bm": 16, "bn": 16, "bk": 16, "num_warps": 4, "num_stages": 2, "tma": 1}
    model, n = _tuned_llama(tmp_path, 64, 128, lambda t: t.shape == "prefill", schedule)
    assert n == 5  # qkv, o, gate/up, down, lm_head
    art = _compile_and_match_hf(model, tmp_path, 1, f"repro: pytest {__file__} -k tma_loads")
    a = load_artifact(art)
    tma = [a.file_bytes(k["file"]).decode() for k in a.manifest["kernels"].values()
           if "make_tensor_descriptor" in a.file_bytes(k["file"]).decode()]
    assert len(tma) == n and sum("w = w_desc.load([pid_n * 2 * BN, k0]).T" in src for src in tma) == 1
    assert not any("wp = w_desc.load(" in src for src in tma)


def test_tma_is_refused_where_tiles_gather_rows() -> None:
    """A TMA schedule on a GEMM whose tiles do not read one box of rows (RoPE on tiles narrower
    than a head: their columns are permuted so that partners share a tile) is a clear codegen
    error naming why, never a silent fallback."""
    from inferx.autotune.extract import extract_tasks, fused_module
    from inferx.compiler.codegen import CodegenError, generate
    from inferx.compiler.families.gemm.codegen import GemmSchedule

    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=70, hidden_size=128, intermediate_size=128, num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    tasks = extract_tasks(fused_module(T.LlamaForCausalLM(cfg).eval(), "fp32"), 24).tasks
    rope = next(t for t in tasks if "rope" in t.task.epilogue and t.task.shape == "prefill")
    assert rope.kernel is not None
    with pytest.raises(CodegenError, match="TMA loads: the tiles hold permuted RoPE columns"):
        generate(rope.kernel, "k", "sm_90", GemmSchedule(16, 32, 16, tma=1))  # head_dim 64


@pytest.mark.slow
@pytest.mark.parametrize("tma", [pytest.param(0, marks=pytest.mark.thorough),
                                 pytest.param(1, marks=pytest.mark.thorough)])
def test_persistent_grids_from_the_tuning_database(tma: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Prefill GEMMs on persistent schedules (every one, the gated split and the row statistics
    included; with and without TMA loads): two programs loop over all the tiles, so each program
    runs many tiles' loads, epilogues and last-arrival reductions. Against HF."""
    from inferx.compiler.families.gemm import codegen as gemm

    monkeypatch.setattr(gemm, "HOPPER_SMS", 2)  # 1 x 2 programs in all, for a handful of tiles
    schedule = {"bm": 16, "bn": 16, "bk": 16, "num_warps": 4, "num_stages": 2, "persistent": 1}
    model, n = _tuned_llama(tmp_path, 64, 128, lambda t: t.shape == "prefill", {**schedule, "tma": tma} if tma
                            else schedule)
    art = _compile_and_match_hf(model, tmp_path, 1, f"repro: pytest {__file__} -k 'persistent and {tma}'")
    kernels = load_artifact(art).manifest["kernels"]
    persistent = [k for k in kernels.values() if k["template"] == "gemm" and k["grid"][0].startswith("min(")]
    assert len(persistent) == 5 and all(k["grid"][0].endswith(", 2)") and len(k["grid"]) == 1 for k in persistent)


@pytest.mark.slow
@pytest.mark.parametrize("extra", [pytest.param({"group_m": 1, "split_k": 2}, marks=pytest.mark.thorough),
                                   pytest.param({"group_m": 4, "persistent": 1}, marks=pytest.mark.thorough)])
def test_grouped_tile_orders_from_the_tuning_database(extra: dict, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Prefill GEMMs walking their tiles in groups of row tiles: one row tile per group with
    split-K (a three-dimensional grid), and a group of four over fewer row tiles (a partial last
    group) on a persistent grid. Against HF."""
    from inferx.compiler.families.gemm import codegen as gemm

    monkeypatch.setattr(gemm, "HOPPER_SMS", 2)
    schedule = {"bm": 16, "bn": 16, "bk": 16, "num_warps": 4, "num_stages": 2, **extra}
    model, n = _tuned_llama(tmp_path, 64, 128, lambda t: t.shape == "prefill", schedule)
    art = _compile_and_match_hf(model, tmp_path, 1, f"repro: pytest {__file__} -k 'grouped and {extra['group_m']}'")
    kernels = load_artifact(art).manifest["kernels"]
    grouped = [k for k in kernels.values() if k["template"] == "gemm" and k["grid"][0].startswith("min(")
               or "split_k" in extra and k["template"] == "gemm" and k["grid"][1:] == ["1", "2"]]
    assert n and len(grouped) == 5, [k["grid"] for k in kernels.values()]
