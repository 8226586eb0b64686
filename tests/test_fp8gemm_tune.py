"""The fp8gemm family's tuning task, schedule space and cost model (CPU, seconds): the key
round-trips and tells apart what changes the best schedule, the space emits only schedules the
template's rules accept and holds the heuristic's, the bound counts a byte a weight at FP8's
rate, an FP8 model's tasks are extracted, the local runner's check runs an fp8gemm candidate in
Triton's interpreter, the tuner searches fp8gemm tasks, and a compile takes an fp8gemm record."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import transformers as T
from test_fp8_kernels import _kernel

import inferx
from inferx.autotune.extract import extract_tasks, fused_module
from inferx.autotune.runner import LocalRunner, bench_env
from inferx.compiler.codegen import generate
from inferx.compiler.database import Database, Record
from inferx.compiler.families import family
from inferx.compiler.families.common.hardware import H200
from inferx.compiler.families.fp8gemm import cost
from inferx.compiler.families.fp8gemm.codegen import fp8gemm_schedule, heuristic_schedule
from inferx.compiler.families.fp8gemm.task import Fp8GemmTask
from inferx.compiler.families.interface import TaskError
from inferx.runtime.artifact import load_artifact

FP8 = family("fp8gemm")


def _task_8b(shape: str, rows: int, gated: bool = True, x_scale: str = "token") -> Fp8GemmTask:
    """Llama-3-8B's gate|up (or o) projection in FP8."""
    k, n = (4096, 28672) if gated else (4096, 4096)
    x = "f8e4m3" if x_scale == "given" else "bf16"
    prologue = "rmsnorm" if gated and x_scale != "given" else "none"
    return Fp8GemmTask("fp8gemm", x, "bf16", k, n, n // 2 if gated else n, x_scale, False, prologue,
                       "mul+pairs+silu" if gated else "residual", shape, rows)


def test_the_key_round_trips_and_tells_apart_what_changes_the_schedule() -> None:
    plain = FP8.task(_kernel(3, 64, 40, "f32", False, False), 3, 32)
    gated = FP8.task(_kernel(3, 64, 48, "f32", True, True), 3, 32)
    assert isinstance(plain, Fp8GemmTask) and isinstance(gated, Fp8GemmTask)
    assert (plain.k, plain.n, plain.tile_n, plain.x_scale, plain.prologue, plain.epilogue, plain.shape, plain.rows) == (
        64, 40, 40, "token", "none", "plain", "decode", 4)
    assert (gated.n, gated.tile_n, gated.prologue, gated.epilogue, gated.gated) == (48, 24, "rmsnorm",
                                                                                  "gated+mul+silu", True)
    at_16 = FP8.task(_kernel(3, 64, 40, "f32", False, False), 16, 32)
    static = replace(plain, x_scale="static")
    keys = {t.key for t in (plain, gated, at_16, static)}
    assert len(keys) == 4
    for t in (plain, gated, at_16, static):
        assert FP8.task_from_json(json.loads(t.key)) == t
    d = json.loads(plain.key)
    del d["x_scale"]
    with pytest.raises(TaskError, match="'x_scale'"):
        FP8.task_from_json(d)
    with pytest.raises(TaskError, match="version 99"):
        FP8.task_from_json({**json.loads(plain.key), "v": 99})
    with pytest.raises(TaskError, match="x_scale 'blockwise'"):
        FP8.task_from_json({**json.loads(plain.key), "x_scale": "blockwise"})
    assert "f32(token)xe4m3->f32 K=64 N=40 none>fp8_linear>plain decode batch<=4" in str(plain)


@pytest.mark.parametrize("task", [_task_8b("decode", 1), _task_8b("decode", 16, gated=False),
                                  _task_8b("prefill", 2048), _task_8b("prefill", 2048, gated=False),
                                  _task_8b("prefill", 4096, gated=False, x_scale="given")],
                         ids=["gate_up-b1", "o-b16", "gate_up-prefill", "o-prefill", "o-prefill-given"])
def test_every_schedule_of_the_space_passes_the_templates_rules(task: Fp8GemmTask) -> None:
    space = FP8.space(H200)
    valid = space.all_valid(task)
    assert 20 <= len(valid) <= 2000, len(valid)
    for s in valid:
        sched = fp8gemm_schedule(space.emit(s))
        assert task.k % sched.bk == 0 and FP8.smem_bytes(task, s) <= H200.smem_per_block, s
    bms = {s["bm"] for s in valid}
    assert bms == ({16, 32, 64, 128, 256} if task.shape == "prefill" else {16}), bms
    # TMA loads for an x that arrives E4M3 only (off: left out of the schedule)
    assert {s.get("tma", 0) for s in valid} == ({0, 1} if task.x_scale == "given" else {0})
    assert "tma" not in space.emit({**valid[0], "tma": 0})
    # a gate|up tile holds two accumulators: its largest tiles are refused for registers
    assert all(s["bm"] * s["bn"] * (2 if task.gated else 1) <= 128 * 32 * s["num_warps"] for s in valid)
    rng = random.Random(0)
    for s in space.sample(task, rng, 8):
        assert space.why_invalid(task, s) is None
        child = space.mutate(task, s, rng)
        assert child is None or space.why_invalid(task, child) is None
    bound = cost.bound_ms(task)
    for s in valid:
        ms = FP8.roofline_ms(task, s)
        assert math.isfinite(ms) and ms >= bound, s
    assert len(FP8.features(task, valid[0])) == len(FP8.feature_names)


def test_the_heuristics_schedules_are_in_the_space() -> None:
    space = FP8.space(H200)
    kernel = _kernel(3, 4096, 4096, "bf16", False, False)
    for rows in (1, 16):
        sched = heuristic_schedule(kernel, "sm_90", rows).to_dict()
        assert space.why_invalid(_task_8b("decode", rows, gated=False), sched) is None, (rows, sched)
    prompt = _kernel(3, 4096, 4096, "bf16", False, False)  # static shapes: the decode heuristic
    assert space.why_invalid(_task_8b("prefill", 2048, gated=False),
                             {"bm": 128, "bn": 128, "bk": 128, "num_warps": 8, "num_stages": 3}) is None
    assert heuristic_schedule(prompt, "sm_90", 16).bm == 16
    why = space.why_invalid(_task_8b("decode", 16), {"bm": 128, "bn": 128, "bk": 128, "num_warps": 8,
                                                     "num_stages": 3})
    assert "exceeds the task's rows (16)" in str(why)
    why = space.why_invalid(_task_8b("prefill", 2048), {"bm": 256, "bn": 256, "bk": 256, "num_warps": 4,
                                                        "num_stages": 5})
    assert "registers" in str(why) or "shared memory" in str(why), why
    tma = {"bm": 128, "bn": 128, "bk": 128, "num_warps": 8, "num_stages": 3, "tma": 1}
    assert "take an x that arrives E4M3" in str(space.why_invalid(_task_8b("prefill", 2048, gated=False), tma))
    assert space.why_invalid(_task_8b("prefill", 4096, gated=False, x_scale="given"), tma) is None
    assert "does not divide K" in str(space.why_invalid(replace(_task_8b("decode", 1), k=4096 + 64),
                                                          {"bm": 16, "bn": 64, "bk": 128, "num_warps": 4,
                                                           "num_stages": 4}))


def test_the_bound_counts_a_byte_a_weight_at_fp8s_rate() -> None:
    """The 8B gate|up at one row: its E4M3 weight, a scale a channel, x, the norm's weight is not
    counted (a vector), the output; half the bf16 weight's bytes. At 2048 rows: the FLOPs at
    twice the bf16 tensor-core rate."""
    task = _task_8b("decode", 1)
    want = task.k * task.n + 4 * task.n + task.k * 2 + task.tile_n * 2
    assert FP8.bound_ms(task) == pytest.approx(1e3 * want / H200.dram_bytes_per_s, rel=1e-9)
    big = _task_8b("prefill", 2048)
    assert FP8.bound_ms(big) == pytest.approx(1e3 * 2 * 2048 * big.k * big.n / (2 * H200.tensor_flops))
    # the kernel's pass over x (token scales) costs; an E4M3 x arriving with its scales does not
    s = {"bm": 128, "bn": 128, "bk": 128, "num_warps": 8, "num_stages": 3}
    o_token, o_given = _task_8b("prefill", 4096, gated=False), _task_8b("prefill", 4096, gated=False, x_scale="given")
    assert FP8.roofline_ms(o_given, s) < FP8.roofline_ms(o_token, s)


@pytest.fixture(scope="module")
def fp8_llama() -> inferx.Program:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return inferx.import_model(T.LlamaForCausalLM(cfg).eval(), dtype="f32")


def test_extract_tasks_finds_the_fp8gemm_tasks(fp8_llama: inferx.Program) -> None:
    """The tasks the compiler's kernels have: prompts read x quantized once (x_scale "given",
    E4M3 x, the norm in the quantizing kernel), decode buckets quantize x in their tiles, or from
    ``fp8_decode_min_batch`` read it quantized too."""
    ex = extract_tasks(fused_module(fp8_llama, quant="fp8"), 32, batches=(1, 4))
    tasks = [t for t in ex.tasks if t.task.template == "fp8gemm"]
    # q|k|v, o, gate|up and down: decode at batch buckets 1 and 4, prefill at 32 rows; each twice a step
    assert len(tasks) == 12 and all(t.launches == 2 for t in tasks), ex.summary()
    assert sorted({(t.task.shape, t.task.rows) for t in tasks}) == [("decode", 1), ("decode", 4), ("prefill", 32)]
    assert {t.task.epilogue for t in tasks if t.task.shape == "decode"} == {
        "kv_write+rope", "residual", "gated+mul+silu"}
    assert {(t.task.shape, t.task.x_scale) for t in tasks} == {("decode", "token"), ("prefill", "given")}
    assert {(t.task.x_dtype, t.task.prologue) for t in tasks if t.task.shape == "prefill"} == {("f8e4m3", "none")}
    assert not any(t.task.template == "gemm" and t.task.shape == "decode" and t.task.n != 97 for t in ex.tasks)
    ex = extract_tasks(fused_module(fp8_llama, quant="fp8", fp8_decode_min_batch=4), 32, batches=(1, 4))
    decode = {(t.task.rows, t.task.x_scale, t.task.prologue) for t in ex.tasks
              if t.task.template == "fp8gemm" and t.task.shape == "decode"}
    assert decode == {(1, "token", "rmsnorm"), (1, "token", "none"), (4, "given", "none")}, decode


def test_the_runners_check_runs_fp8gemm_candidates_on_cpu(fp8_llama: inferx.Program) -> None:
    """The local runner's correctness check (Triton's interpreter, E4M3 emulated) on the gate|up
    task at one row: two schedules of the space agree with the heuristic's on the same operands
    (E4M3 codes bound as bytes); a kernel off by 1% is refused."""
    ex = extract_tasks(fused_module(fp8_llama, quant="fp8"), 32, batches=(1,))
    tt = next(t for t in ex.tasks if t.task.template == "fp8gemm" and "gated" in t.task.epilogue
              and t.task.shape == "decode")
    runner = LocalRunner({}, device="cpu")
    env = bench_env(tt.task, 32)
    space = FP8.space(H200)
    picks = [s for s in space.all_valid(tt.task) if s["bk"] == 32][:1] + [
        s for s in space.all_valid(tt.task) if s["bk"] == 64 and s["bn"] == 16][:1]
    assert len(picks) == 2
    for s in picks:
        ks = generate(tt.kernel, "cand", "sm_90", FP8.parse_schedule(s), grid_dependency=False)
        assert runner.wrong_results(tt.task, tt.kernel, ks, env) == "", s
    ks = generate(tt.kernel, "cand", "sm_90", FP8.parse_schedule(picks[0]), grid_dependency=False)
    line = next(ln for ln in ks.source.splitlines() if "= tl.dot(aq, tl.trans(wf)" in ln)
    bad_line = line.replace("= tl.dot(", "= 1.01 * tl.dot(")
    bad = replace(ks, name="bad", source=ks.source.replace("def cand(", "def bad(").replace(line, bad_line))
    why = runner.wrong_results(tt.task, tt.kernel, bad, env)
    assert why.startswith("wrong results: "), why


def test_guided_search_finds_the_best_fp8gemm_schedule_of_a_landscape() -> None:
    """The tuner, generic over families, searches fp8gemm tasks: on a synthetic landscape of the
    8B gate|up at one row and the o projection at 2048 rows it finds each task's best within 5%."""
    from inferx.autotune.cost_model import LearnedModel
    from inferx.autotune.extract import TuningTask
    from inferx.autotune.runner import ReplayRunner
    from inferx.autotune.search import Budget, EvolutionarySearch, RoundRobin, Tuner
    from inferx.autotune.space import spaces_for
    from inferx.autotune.synthetic import landscape

    tasks = [_task_8b("decode", 1), _task_8b("prefill", 2048, gated=False)]
    records = landscape(tasks)
    best = {t.key: min(r.median_ms for r in records if r.task.key == t.key) for t in tasks}
    tts = [TuningTask(t, None, t.shape, 1, t.rows, FP8.bound_ms(t)) for t in tasks]
    space = spaces_for("h200")
    tuner = Tuner(tts, ReplayRunner(records), EvolutionarySearch(space, LearnedModel(), seed=0), RoundRobin(), space)
    result = tuner.run(Budget(trials=120))
    for st in result.states:
        assert st.best_ms <= 1.05 * best[st.tt.task.key], st.tt.task


def test_a_compile_takes_an_fp8gemm_record(fp8_llama: inferx.Program, tmp_path: Path) -> None:
    """A record of an fp8gemm task is the schedule its kernels are generated with; kernels
    without one fall back to the heuristic as "no record"."""
    ex = extract_tasks(fused_module(fp8_llama, quant="fp8"), 32, batches=(1,))
    down = next(t.task for t in ex.tasks if t.task.template == "fp8gemm" and t.task.shape == "decode"
                and t.task.k == 96)
    sched = {"bm": 16, "bn": 32, "bk": 32, "num_warps": 4, "num_stages": 2}
    db = Database.load(tmp_path / "logs", "sm_90")
    db.append(Record.make(down, sched, [1e-3], {}, "2026-12-07", "test"))
    art = inferx.compile(fp8_llama, target="cpu", output=tmp_path / "a", max_seq_len=32, max_batch=1,
                         schedules="sm_90", tuning_logs=tmp_path / "logs", quant="fp8")
    s = load_artifact(art).manifest["schedules"]
    tuned = [t for t in s["tuned"].values() if t["task"] == down.key]
    assert len(tuned) == 1 and tuned[0]["schedule"] == sched, s["tuned"]
    reasons = {f["reason"] for name, f in s["fallbacks"].items() if name.startswith("fp8gemm_")}
    assert reasons == {"no record"}, s["fallbacks"]
