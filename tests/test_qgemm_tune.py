"""The qgemm family's tuning task, schedule space and cost model (CPU, seconds): the key
round-trips and tells apart what changes the best schedule, the space emits only schedules the
template's rules accept, the bound counts int4 bytes, a quantized model's tasks are extracted,
the local runner's correctness check runs a qgemm candidate in Triton's interpreter, and a
compile takes a qgemm record."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import transformers as T
from test_qgemm import _norm_gated_kernel, _qlinear_kernel, _rtn

import inferx
from inferx.autotune.extract import extract_tasks, fused_module
from inferx.autotune.runner import LocalRunner, bench_env
from inferx.compiler.codegen import generate
from inferx.compiler.database import Database, Record
from inferx.compiler.families import family
from inferx.compiler.families.common.hardware import H200
from inferx.compiler.families.interface import TaskError
from inferx.compiler.families.qgemm import cost
from inferx.compiler.families.qgemm.heuristic import heuristic_schedule
from inferx.compiler.families.qgemm.schedule import check_fits, qgemm_schedule
from inferx.compiler.families.qgemm.space import QGemmSpace
from inferx.compiler.families.qgemm.task import QGemmTask
from inferx.compiler.quant.store import quantize_program
from inferx.runtime.artifact import load_artifact

QGEMM = family("qgemm")


def _task_8b(shape: str, rows: int, gated: bool = True) -> QGemmTask:
    """Llama-3-8B's gate|up (or o) projection in int4-g128 with bf16 scales and minimums."""
    k, n = (4096, 28672) if gated else (4096, 4096)
    return QGemmTask("qgemm", "bf16", "bf16", "bf16", k, n, n // 2 if gated else n, 128, True, False, False,
                     "rmsnorm" if gated else "none", "mul+pairs+silu" if gated else "residual", shape, rows)


def test_the_key_round_trips_and_tells_apart_what_changes_the_schedule() -> None:
    plain = QGEMM.task(_qlinear_kernel(1, 64, 32, 32, True, False), 1, 32)
    gated = QGEMM.task(_norm_gated_kernel(1, 128, 66, 32), 1, 32)
    symmetric = QGEMM.task(_qlinear_kernel(1, 64, 32, 32, False, False), 1, 32)
    scaled = QGEMM.task(_qlinear_kernel(1, 64, 32, 32, True, True), 1, 32)
    assert isinstance(plain, QGemmTask) and isinstance(gated, QGemmTask)
    assert (plain.k, plain.n, plain.tile_n, plain.group, plain.mins, plain.prologue, plain.epilogue, plain.shape) == (
        64, 32, 32, 32, True, "none", "plain", "decode")
    assert (gated.n, gated.tile_n, gated.prologue, gated.epilogue, gated.gated) == (66, 33, "rmsnorm",
                                                                                  "gated+mul+silu", True)
    assert not symmetric.mins and scaled.col_scale
    at_3 = QGEMM.task(_qlinear_kernel(1, 64, 32, 32, True, False), 3, 32)
    assert at_3.rows == 4 and at_3.key != plain.key
    keys = {t.key for t in (plain, gated, symmetric, scaled, at_3)}
    assert len(keys) == 5
    for t in (plain, gated, symmetric, scaled, at_3):
        assert QGEMM.task_from_json(json.loads(t.key)) == t
    d = json.loads(plain.key)
    del d["group"]
    with pytest.raises(TaskError, match="'group'"):
        QGEMM.task_from_json(d)
    with pytest.raises(TaskError, match="version 99"):
        QGEMM.task_from_json({**json.loads(plain.key), "v": 99})
    assert "g32 mins none>qlinear>plain decode batch<=1" in str(plain)


@pytest.mark.parametrize("task", [_task_8b("decode", 1), _task_8b("decode", 1, gated=False), _task_8b("decode", 16),
                                  _task_8b("prefill", 2048), _task_8b("prefill", 2048, gated=False)],
                         ids=["gate_up-b1", "o-b1", "gate_up-b16", "gate_up-prefill", "o-prefill"])
def test_every_schedule_of_the_space_passes_the_templates_rules(task: QGemmTask) -> None:
    space = QGEMM.space(H200)
    valid = space.all_valid(task)
    assert 20 <= len(valid) <= 1200, len(valid)
    for s in valid:
        sched = qgemm_schedule(space.emit(s))
        assert check_fits(sched, task.group, task.k) is None, s
    bms = {s["bm"] for s in valid}
    if task.shape == "prefill":
        assert bms == {16, 32, 64, 128, 256}, bms
    else:
        assert bms == ({1, 16} if task.rows == 1 else {16}), bms
        # split-K on the dot path, loads a step ahead at BM 1 (off: left out of the schedule)
        assert {s.get("split_k", 1) for s in valid if s["bm"] > 1} == {1, 2, 4, 8}
        assert {s.get("prefetch", 0) for s in valid if s["bm"] == 1} == ({0, 1} if task.rows == 1 else set())
        assert "split_k" not in space.emit({**valid[0], "split_k": 1, "prefetch": 0})
    # samples, mutations and crossovers stay in the space
    rng = random.Random(0)
    for s in space.sample(task, rng, 8):
        assert space.why_invalid(task, s) is None
        child = space.mutate(task, s, rng)
        assert child is None or space.why_invalid(task, child) is None
    # cost: finite, no faster than the bound, one feature per name
    bound = cost.bound_ms(task)
    for s in valid:
        ms = QGEMM.roofline_ms(task, s)
        assert math.isfinite(ms) and ms >= bound, s
    assert len(QGEMM.features(task, valid[0])) == len(QGEMM.feature_names)


def test_the_heuristics_schedules_are_in_the_space() -> None:
    space = QGemmSpace()
    kernel = _qlinear_kernel(1, 4096, 4096, 128, True, False, "bf16")
    for rows in (1, 16):
        sched = heuristic_schedule(kernel, "sm_90", rows).to_dict()
        assert space.why_invalid(_task_8b("decode", rows, gated=False), sched) is None, (rows, sched)
    prefill = {"bm": 128, "bn": 128, "bk": 64, "num_warps": 8, "num_stages": 3}  # the prefill heuristic
    assert space.why_invalid(_task_8b("prefill", 2048), prefill) is None
    g32 = replace(_task_8b("decode", 16), group=32)
    assert "BK 64 must divide the quantization group 32" in str(space.why_invalid(g32, {**prefill, "bm": 16}))
    assert "GEMV mode" in str(space.why_invalid(_task_8b("decode", 16), {**prefill, "bm": 1, "bk": 512}))


def test_the_bound_counts_int4_bytes() -> None:
    """The 8B gate|up at one row: 4096 x 28672 codes at half a byte each, a bf16 scale and minimum
    per 128 of them, x and the output; about a quarter of the bf16 weight's bytes."""
    task = _task_8b("decode", 1)
    codes = task.n * task.k / 2
    groups = task.n * task.k / 128 * 2 * 2
    vectors = task.k * 2 * 2 + task.tile_n * 2  # x, the norm's weight, y
    want_ms = 1e3 * (codes + groups + vectors) / H200.dram_bytes_per_s
    assert QGEMM.bound_ms(task) == pytest.approx(want_ms, rel=1e-9)
    assert QGEMM.bound_ms(task) < 1e3 * task.n * task.k * 2 / H200.dram_bytes_per_s / 3.5
    # at 2048 rows the tensor cores bound it
    big = _task_8b("prefill", 2048)
    assert QGEMM.bound_ms(big) == pytest.approx(1e3 * 2 * 2048 * task.k * task.n / H200.tensor_flops)


@pytest.fixture(scope="module")
def quantized() -> inferx.Program:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = T.LlamaForCausalLM(cfg).eval()
    return quantize_program(inferx.import_model(model, dtype="f32"), "int4-g32", quantize=_rtn)


def test_extract_tasks_finds_the_qgemm_tasks(quantized: inferx.Program) -> None:
    ex = extract_tasks(fused_module(quantized), 32, batches=(1, 4))
    tasks = [t for t in ex.tasks if t.task.template == "qgemm"]
    # q|k|v, o, gate|up and down: decode at batch buckets 1 and 4, prefill at 16 rows (a row bucket
    # below max_seq_len's) and 32; each twice a step
    assert len(tasks) == 16 and all(t.launches == 2 for t in tasks), ex.summary()
    assert sorted({(t.task.shape, t.task.rows) for t in tasks}) == [("decode", 1), ("decode", 4), ("prefill", 16),
                                                                    ("prefill", 32)]
    assert {t.task.epilogue for t in tasks} == {"kv_write+rope", "residual", "gated+mul+silu", "residual+sum_squares"}
    # prefill: o and down sum their rows' squares (norm-stats), q|k|v and gate|up read them
    assert {t.task.prologue for t in tasks if t.task.shape == "prefill"} == {"rmsnorm_ss", "none"}
    assert {t.task.prologue for t in tasks if t.task.shape == "decode"} == {"rmsnorm", "none"}
    assert ex.untuned == {"gather: template gather is not tuned": 4}


def test_the_runners_check_runs_qgemm_candidates_on_cpu(quantized: inferx.Program) -> None:
    """The local runner's correctness check (Triton's interpreter) on the gate|up task at one
    row: schedules of the space agree with the heuristic's on the same operands (codes bound as
    packed bytes); a kernel off by 1% is refused."""
    ex = extract_tasks(fused_module(quantized), 32, batches=(1,))
    tt = next(t for t in ex.tasks if t.task.template == "qgemm" and t.task.epilogue == "gated+mul+silu"
              and t.task.shape == "decode")
    runner = LocalRunner({}, device="cpu")
    env = bench_env(tt.task, 32)
    space = QGEMM.space(H200)
    picks = [s for s in space.all_valid(tt.task) if s["bm"] == 16][:1] + [
        s for s in space.all_valid(tt.task) if s["bm"] == 1 and s["bk"] == 64][:1]
    assert len(picks) == 2
    for s in picks:
        ks = generate(tt.kernel, "cand", "sm_90", QGEMM.parse_schedule(s), grid_dependency=False)
        assert runner.wrong_results(tt.task, tt.kernel, ks, env) == "", s
    ks = generate(tt.kernel, "cand", "sm_90", QGEMM.parse_schedule(picks[0]), grid_dependency=False)
    assert "acc += d * s[None, :]" not in ks.source  # f32: the plain dot, not the 16-bit codes
    bad = replace(ks, name="bad", source=ks.source.replace("def cand(", "def bad(").replace(
        "acc = tl.dot(a, ", "acc = 1.01 * tl.dot(a, "))
    assert bad.source != ks.source.replace("def cand(", "def bad(")
    why = runner.wrong_results(tt.task, tt.kernel, bad, env)
    assert why.startswith("wrong results: "), why


def test_a_compile_takes_a_qgemm_record(quantized: inferx.Program, tmp_path: Path) -> None:
    """A record of a qgemm task is the schedule its kernels are generated with; kernels without
    one fall back to the heuristic as "no record"."""
    ex = extract_tasks(fused_module(quantized), 32, batches=(1,))
    down = next(t.task for t in ex.tasks if t.task.template == "qgemm" and t.task.shape == "decode"
                and t.task.k == 96)
    sched = {"bm": 16, "bn": 16, "bk": 32, "num_warps": 4, "num_stages": 2}
    db = Database.load(tmp_path / "logs", "sm_90")
    db.append(Record.make(down, sched, [1e-3], {}, "2026-12-06", "test"))
    art = inferx.compile(quantized, target="cpu", output=tmp_path / "a", max_seq_len=32, max_batch=1,
                         schedules="sm_90", tuning_logs=tmp_path / "logs")
    s = load_artifact(art).manifest["schedules"]
    tuned = [t for t in s["tuned"].values() if t["task"] == down.key]
    assert len(tuned) == 1 and tuned[0]["schedule"] == sched, s["tuned"]
    reasons = {f["reason"] for name, f in s["fallbacks"].items() if name.startswith("qgemm_")}
    assert reasons == {"no record"}, s["fallbacks"]


def test_a_record_that_does_not_fit_the_group_is_skipped(tmp_path: Path) -> None:
    """A stored schedule the template parses but whose BK does not fit the task's group (a BK of
    128 over groups of 64 off the one-row GEMV) is passed over by the database, as one the
    template no longer parses is: the compile falls back, it does not fail."""
    t = replace(_task_8b("decode", 16), group=64)
    db = Database.load(tmp_path / "logs", "sm_90")
    bad = {"bm": 16, "bn": 32, "bk": 128, "num_warps": 4, "num_stages": 2}
    good = {"bm": 16, "bn": 32, "bk": 64, "num_warps": 4, "num_stages": 2}
    assert check_fits(qgemm_schedule(bad), t.group, t.k) is not None
    db.append(Record.make(t, bad, [1e-3], {}, "2026-12-06", "test"))
    assert Database.load(tmp_path / "logs", "sm_90").best(t) is None
    db.append(Record.make(t, good, [2e-3], {}, "2026-12-06", "test"))
    best = Database.load(tmp_path / "logs", "sm_90").best(t)
    assert best is not None and best[1].schedule == good


def test_guided_search_finds_the_best_qgemm_schedule_of_a_landscape() -> None:
    """The tuner, generic over families, searches qgemm tasks: on a synthetic landscape of the 8B
    gate|up at one row and the o projection at 2048 rows it finds each task's best within 5%."""
    from inferx.autotune.cost_model import LearnedModel
    from inferx.autotune.extract import TuningTask
    from inferx.autotune.runner import ReplayRunner
    from inferx.autotune.search import Budget, EvolutionarySearch, RoundRobin, Tuner
    from inferx.autotune.space import spaces_for
    from inferx.autotune.synthetic import landscape

    tasks = [_task_8b("decode", 1), _task_8b("prefill", 2048, gated=False)]
    records = landscape(tasks)
    best = {t.key: min(r.median_ms for r in records if r.task.key == t.key) for t in tasks}
    tts = [TuningTask(t, None, t.shape, 1, t.rows, QGEMM.bound_ms(t)) for t in tasks]
    space = spaces_for("h200")
    tuner = Tuner(tts, ReplayRunner(records), EvolutionarySearch(space, LearnedModel(), seed=0), RoundRobin(), space)
    result = tuner.run(Budget(trials=120))
    for st in result.states:
        assert st.best_ms <= 1.05 * best[st.tt.task.key], st.tt.task


def test_prefill_heuristic_by_row_bucket(quantized: inferx.Program) -> None:
    """sm_90 prefill schedules grow with the prompt's row bucket: a decode batch's tile up to 16
    rows, then 64, 128 and 256 rows a tile (128 for q|k|v, whose RoPE epilogue spills at 256); a
    gate|up tile (two accumulators) at BN 64 from 128 rows; the tile path (BM >= TILE_MIN_BM) from
    128-row prompts."""
    from inferx.compiler.families.qgemm.codegen import TILE_MIN_BM
    from inferx.compiler.ir.ops_kernel import KernelOp

    module = fused_module(quantized)
    prefill = next(f for f in module.ops if getattr(f, "sym_name", None) and f.sym_name.data == "prefill")
    kernels = [k for k in prefill.walk() if isinstance(k, KernelOp) and k.template.data == "qgemm"]
    qgemm = family("qgemm")
    assert qgemm.row_buckets(kernels[0], (1, 4), 2048) == [16, 128, 512, None]
    for k in kernels:
        epilogue = qgemm.task(k, 2048, 2048).epilogue
        gated, rope = "gated" in epilogue, "rope" in epilogue
        got = [(s.bm, s.bn) for s in (heuristic_schedule(k, "sm_90", r) for r in (16, 128, 512, None))]
        n = 64 if gated else 128
        assert got == [(16, 32), (64, 64), (128, n), (128 if rope else 256, n)], (epilogue, got)
    assert heuristic_schedule(kernels[0], "sm_90", 128).bm >= TILE_MIN_BM
