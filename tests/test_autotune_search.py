"""Search through the replay runner on a synthetic recorded landscape: guided search reaches 95%
of the best with several times fewer measurements than random search; the task scheduler spends
trials where the gain is; tuning resumes from the database; runner pieces that need no GPU;
`inferx tune --runner replay` end to end on a tiny model."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from inferx.autotune.cost_model import LearnedModel, bound_ms
from inferx.autotune.extract import Extraction, TuningTask, extract_tasks, fused_module, heuristic_baseline
from inferx.autotune.failures import FailureLog
from inferx.autotune.runner import MeasureResult, ReplayRunner, bench_env, launches_per_graph, rotation_count
from inferx.autotune.search import (
    Budget,
    EvolutionarySearch,
    GradientScheduler,
    RandomSearch,
    RoundRobin,
    TaskState,
    Tuner,
)
from inferx.autotune.space import complete, schedule_key, spaces_for
from inferx.cli import main
from inferx.compiler.database import Database, Record
from inferx.compiler.families.common.hardware import H200
from inferx.compiler.families.gemm.space import GemmSpace
from inferx.compiler.families.gemm.task import Task
from inferx.compiler.families.interface import AnyTask

TINY = dict(vocab_size=96, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128, model_type="llama", architectures=["LlamaForCausalLM"])


def gemm(k: int, n: int, rows: int, shape: str, epilogue: str = "residual") -> Task:
    return Task("gemm", "bf16", "bf16", "bf16", k, n, n, "nk", "none", epilogue, shape, rows)


def tuning_task(task: Task, launches: int = 1) -> TuningTask:
    return TuningTask(task, None, task.shape, launches, task.rows, bound_ms(task))


LandscapeOf = Callable[[Sequence[AnyTask]], list[Record]]  # the session fixture `landscape_of` (conftest.py)


def measurements_to_95(task: Task, records: list[Record], guided: bool, seed: int, limit: int = sys.maxsize) -> int:
    """Measurements until a schedule within 95% of the landscape's best is found, or ``limit`` if
    none is found within that many."""
    space = GemmSpace()
    runner = ReplayRunner(records)
    best = min(r.median_ms for r in records)
    strategy = (EvolutionarySearch(space, LearnedModel(seed=seed), seed=seed) if guided
                else RandomSearch(space, seed=seed))
    state = TaskState(tuning_task(task))
    while state.trials < limit:
        schedules = strategy.propose(task, state.measured, 8)
        assert schedules and all(schedule_key(s) not in state.measured for s in schedules)
        results = runner.measure(task, schedules)
        before = state.trials
        for n, (s, r) in enumerate(zip(schedules, results, strict=True), 1):
            state.add(s, r.median_ms)
            if r.median_ms <= best / 0.95:
                return min(before + n, limit)
        strategy.observe([Record.make(task, s, [r.median_ms], {}, "-") for s, r in zip(schedules, results,
                                                                                       strict=True) if r.ok])
    return limit


@pytest.mark.slow
@pytest.mark.parametrize("task", [gemm(4096, 6144, 16, "decode", "kv_write+rope"),
                                  pytest.param(gemm(4096, 4096, 4096, "prefill"), marks=pytest.mark.thorough)],
                         ids=["decode16", "prefill4096"])
def test_guided_search_needs_far_fewer_measurements_than_random(task: Task, landscape_of: LandscapeOf) -> None:
    """Over three seeds each, random search takes at least 3x the measurements guided search does
    (mean against mean); guided search never more than 120."""
    records = landscape_of([task])
    seeds = range(3)
    guided = [measurements_to_95(task, records, True, s) for s in seeds]
    # Random search takes thousands of measurements here, and the claim is only that its runs add
    # up to 3x guided's: each run stops where the runs so far reach that sum. A run stopped at its
    # limit took at least that many, so this is the verdict of running all three to the end.
    need = 3 * sum(guided)
    rand: list[int] = []
    for s in seeds:
        if sum(rand) >= need:
            break
        rand.append(measurements_to_95(task, records, False, s, limit=need - sum(rand)))
    assert sum(rand) >= need, (guided, rand)
    assert max(guided) <= 120, guided


@pytest.mark.slow  # a few seconds: CI runs it, the fast tier does not
def test_replay_runner_answers_recorded_and_fails_the_rest(landscape_of: LandscapeOf) -> None:
    task = gemm(4096, 4096, 1, "decode")
    records = landscape_of([task])
    runner = ReplayRunner(records)
    ok = next(r for r in records if math.isfinite(r.median_ms))
    bad = next(r for r in records if not math.isfinite(r.median_ms))
    got = runner.measure(task, [ok.schedule, bad.schedule, {**ok.schedule, "bn": 4096}])
    assert got[0].ok and got[0].median_ms == ok.median_ms and "replayed" in got[0].note
    assert not got[1].ok and got[1].median_ms == math.inf
    assert got[2].error == "not recorded" and runner.measured == 3
    assert runner.tasks() == [task]


def test_runner_pieces_that_need_no_gpu() -> None:
    mb = 1 << 20
    assert rotation_count(32 * mb, 50 * mb) == 4  # 4 x 32 MB >= 2 x 50 MB
    assert rotation_count(1024 * mb, 50 * mb) == 1  # the 1 GB lm_head never fits the L2
    assert rotation_count(100 * mb, 50 * mb) == 1
    assert rotation_count(1024, 50 * mb) == 64  # capped
    assert rotation_count(512 * mb, 50 * mb, max_bytes=256 * mb) == 1
    assert rotation_count(8 * mb, 50 * mb, max_bytes=32 * mb) == 4  # memory cap
    assert [launches_per_graph(n) for n in (1, 3, 4, 13)] == [8, 9, 8, 13]
    assert bench_env(gemm(64, 64, 16, "decode")) == {"batch": 16, "seq": 1, "ctx": 576}
    assert bench_env(gemm(64, 64, 4096, "prefill")) == {"batch": 1, "seq": 4096, "ctx": 4096}


def test_sustained_timing_replays_back_to_back_before_it_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sustain_ms`` keeps the warm-up going for that long (the GPU then runs at its power-capped
    clocks); without it the warm-up is ``warmup`` calls. Events and synchronization faked."""
    import time

    import torch

    from inferx.autotune.runner import LocalRunner, event_times

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            self.t = 0.0

        def record(self) -> None:
            self.t = time.perf_counter()

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, other: Event) -> float:
            return (other.t - self.t) * 1e3

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    calls: list[float] = []

    def fn() -> None:
        calls.append(time.perf_counter())
        time.sleep(0.001)

    assert len(event_times(fn, 4, 3, 5)) == 5 and len(calls) == 8
    calls.clear()
    t0 = time.perf_counter()
    times = event_times(fn, 4, 3, 5, sustain_ms=60)
    assert len(times) == 5 and len(calls) >= 8 + 4 + 5  # the warm-up, a sustained round at least, the timed
    assert calls[-5] - t0 >= 0.06  # the first timed call starts after the sustained ones have run 60 ms
    assert all(t >= 0.25 for t in times)  # 1 ms a call over 4 launches
    assert "sustained" in LocalRunner({}, sustain_ms=300)._note() and "sustained" not in LocalRunner({})._note()


def test_gradient_scheduler_favours_the_task_with_most_to_gain() -> None:
    heavy, light = tuning_task(gemm(4096, 14336, 1, "decode"), 32), tuning_task(gemm(4096, 4096, 1, "decode"), 1)
    states = [TaskState(light), TaskState(heavy)]
    sched = GradientScheduler(epsilon=0.0)
    assert sched.pick(states) == 0  # every task gets a first round
    for st, ms in zip(states, (0.05, 0.05), strict=True):
        st.rounds, st.measured = 1, {str(i): ms for i in range(8)}
        st.best_ms = ms
        st.history = [(8, ms)]
    assert sched.pick(states) == 1  # same time, 32x the launches
    states[1].best_ms = heavy.roofline_ms  # at its roofline: nothing left to gain
    assert sched.pick(states) == 0
    assert RoundRobin().pick(states) == 0


def test_no_schedule_removes_the_fixed_cost_of_a_launch() -> None:
    """A small kernel's best time sits far above its roofline by the launch cost alone: the
    gradient scheduler sees no headroom there once that cost is counted, and extraction weighs it."""
    launch_ms = H200.launch_s * 1e3
    small = replace(tuning_task(gemm(512, 512, 1, "decode"), 32), launch_ms=launch_ms)
    big = replace(tuning_task(gemm(4096, 14336, 1, "decode"), 1), launch_ms=launch_ms)
    assert small.floor_ms == pytest.approx(small.roofline_ms + launch_ms) and small.floor_ms > 10 * small.roofline_ms
    assert small.weight == pytest.approx(32 * small.floor_ms)
    sched = GradientScheduler(epsilon=0.0)
    states = [TaskState(small), TaskState(big)]
    for st, ms in zip(states, (small.floor_ms * 0.99, big.roofline_ms * 1.5), strict=True):
        st.rounds, st.measured, st.best_ms, st.history = 1, {str(i): ms for i in range(8)}, ms, [(8, ms)]
    assert sched.gain(states[0]) == 0.0 < sched.gain(states[1])
    assert sched.pick(states) == 1  # 32 launches of a kernel at its floor gain nothing
    without = replace(small, launch_ms=0.0)  # counted against its roofline alone, it would look best
    assert GradientScheduler(epsilon=0.0).gain(replace(states[0], tt=without)) > sched.gain(states[1])


@pytest.mark.slow
def test_tuning_resumes_from_the_database(tmp_path: Path, landscape_of: LandscapeOf) -> None:
    tasks = [gemm(4096, 4096, 1, "decode"), gemm(14336, 4096, 1, "decode")]
    runner = ReplayRunner(landscape_of(tasks))
    space = GemmSpace()

    def tune(trials: int) -> tuple[Tuner, int]:
        db = Database.load(tmp_path, "h200")
        before = runner.measured
        tuner = Tuner([tuning_task(t, 32) for t in tasks], runner,
                      EvolutionarySearch(space, LearnedModel(seed=0), seed=0), GradientScheduler(seed=0), space, db,
                      FailureLog(tmp_path, "h200").load(), batch=8)
        result = tuner.run(Budget(trials=trials))
        return tuner, result.new_trials if runner.measured - before == result.new_trials else -1

    _, first = tune(48)
    assert first == 48
    db = Database.load(tmp_path, "h200")
    failed = (tmp_path / "h200" / "failed" / "gemm.jsonl")
    n_failed = len(failed.read_text().splitlines()) if failed.exists() else 0
    assert len(db.records) + n_failed == 48 and not db.problems
    seen = {(r.task.key, schedule_key(r.schedule)) for r in db.records}
    failed_first = {(t.key, k) for t in tasks for k in FailureLog(tmp_path, "h200").load().failed(t, runner.name)}
    asked: list[tuple[str, str]] = []
    measure = runner.measure

    def spy(task: Task, schedules: list[dict[str, int]]):  # type: ignore[no-untyped-def]
        asked.extend((task.key, schedule_key(s)) for s in schedules)
        return measure(task, schedules)

    runner.measure = spy  # type: ignore[method-assign]
    _, second = tune(24)
    assert second == 24 and len(asked) == 24
    assert not seen & set(asked), "a recorded schedule was measured again"
    assert not failed_first & set(asked), "a failed schedule was measured again"
    failures = {(t.key, k) for t in tasks for k in FailureLog(tmp_path, "h200").load().failed(t, runner.name)}
    assert len(Database.load(tmp_path, "h200").records) + len(failures) == 72


def test_a_sustained_tune_starts_from_the_best_burst_schedules_and_ranks_alone(
        tmp_path: Path, landscape_of: LandscapeOf) -> None:
    """A tune in the sustained regime resumes only from sustained records: its first round times
    again the task's fastest burst schedules (a round's worth), and what it records ranks the task."""
    task = gemm(4096, 4096, 1, "decode")
    landscape = [r for r in landscape_of([task]) if math.isfinite(r.median_ms)]
    db = Database.load(tmp_path, "h200")
    burst = sorted(landscape, key=lambda r: r.median_ms)[:20]
    for r in burst:
        db.append(r)
    hot = ReplayRunner([replace(r, median_ms=r.median_ms * 1.2, times_ms=(r.median_ms * 1.2,), regime="sustained")
                        for r in landscape], regime="sustained")
    assert ReplayRunner(hot.records).records == []  # a burst replay answers from burst records alone
    asked: list[str] = []
    measure = hot.measure

    def spy(t: Task, schedules: list[dict[str, int]]):  # type: ignore[no-untyped-def]
        asked.extend(schedule_key(s) for s in schedules)
        return measure(t, schedules)

    hot.measure = spy  # type: ignore[method-assign]
    space = GemmSpace()
    tuner = Tuner([tuning_task(task, 32)], hot, EvolutionarySearch(space, LearnedModel(seed=0), seed=0),
                  GradientScheduler(seed=0), space, db, batch=8, regime="sustained")
    result = tuner.run(Budget(trials=16))
    assert result.new_trials == 16
    fastest = [schedule_key(complete(space, r.schedule)) for r in burst]
    assert asked[:8] == list(dict.fromkeys(fastest))[:8]  # burst records seed, never resume, the tune
    sustained = [r for r in Database.load(tmp_path, "h200").records if r.regime == "sustained"]
    assert 8 <= len(sustained) <= 16  # the first round all recorded (a later one may ask what was not)
    best = db.best(task)
    assert best is not None and best[1].regime == "sustained"
    assert best[1].median_ms == pytest.approx(min(r.median_ms for r in sustained))


def _tiny_with_replay(tmp_path: Path, recorded: int, landscape_of: LandscapeOf) -> tuple[Path, Extraction, Path]:
    """A tiny bf16 Llama checkpoint, its tasks (max_seq_len 128), and a replay file holding a
    synthetic landscape for the first ``recorded`` of them."""
    model = tmp_path / "tiny"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(dict(TINY, torch_dtype="bfloat16")))
    ex = extract_tasks(fused_module(model, "bf16"), 128)
    replay = tmp_path / "replay.jsonl"
    records = landscape_of([t.task for t in ex.tasks[:recorded]])
    replay.write_text("".join(json.dumps(r.to_json()) + "\n" for r in records))
    return model, ex, replay


@pytest.mark.thorough  # the CLI with the replay runner: test_tune_cli_only_narrows_the_tasks in CI's run
def test_tune_cli_with_the_replay_runner(tmp_path: Path, landscape_of: LandscapeOf) -> None:
    model, ex, replay = _tiny_with_replay(tmp_path, 4, landscape_of)
    out = tmp_path / "logs"
    args = ["tune", str(model), "--runner", "replay", "--replay", str(replay), "--trials", "48", "--out", str(out),
            "--max-seq-len", "128", "--dtype", "bf16"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "12 tuning tasks" in lines[0]  # 10 GEMM, 2 attention (prefill_last's are prefill's and decode's)
    progress = [ln for ln in lines if ln.startswith("[") and "trials (+" in ln]
    assert progress and all("of roofline), ETA" in ln for ln in progress)
    assert any("stopped: budget spent after 48 new measurements" in ln for ln in lines)
    db = Database.load(out, "h200")
    assert len(db.records) > 0 and all(r.source == f"inferx tune (replay:{replay})" for r in db.records)
    runs = sorted((out / "h200" / "runs").glob("tune-*.json"))
    conv = json.loads(next(p for p in runs if not p.name.endswith("-model.json")).read_text())
    assert conv["new_trials"] == 48 and len(conv["tasks"]) == 12 and conv["objective"][-1]["trials"] == 48
    try:
        import matplotlib  # noqa: F401

        assert conv["plot"].endswith(".png")
    except ImportError:
        assert "matplotlib is not installed" in conv["plot"]
    # Unrecorded tasks fail as "not recorded": logged, so a second run does not ask again.
    log = FailureLog(out, "h200").load()
    assert any(log.failed(t.task, f"replay:{replay}") for t in ex.tasks[4:])
    res = CliRunner().invoke(main, [*args[:6], "--trials", "8", *args[8:]])
    assert res.exit_code == 0, res.output


@pytest.mark.thorough  # the tune CLI: test_tune_cli_tunes_attention_and_inspect_shows_it in CI's run
def test_tune_cli_only_narrows_the_tasks(tmp_path: Path, landscape_of: LandscapeOf) -> None:
    """``--only`` keeps the tasks whose line contains every given text (here the decode GEMMs
    with the RMSNorm prologue); a text no task has is refused with the task list."""
    model = tmp_path / "tiny"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(dict(TINY, torch_dtype="bfloat16")))
    ex = extract_tasks(fused_module(model, "bf16"), 128)
    want = [t.task for t in ex.tasks if "decode" in str(t.task) and "rmsnorm" in str(t.task)]
    assert 0 < len(want) < len(ex.tasks)
    replay = tmp_path / "replay.jsonl"
    # records of the wanted tasks and of one other, which a tune that did not narrow would record too
    # (decode tasks, as the tests above replay: most of these records are computed already)
    other = next(t.task for t in ex.tasks if t.task not in want)
    replay.write_text("".join(json.dumps(r.to_json()) + "\n" for r in landscape_of([*want, other])))
    args = ["tune", str(model), "--runner", "replay", "--replay", str(replay), "--trials", "24",
            "--max-seq-len", "128", "--dtype", "bf16"]

    def tuned_by(logs: Path, *filters: str) -> set[str]:
        """The tasks a tune with ``filters`` into ``logs`` recorded, after it said it narrowed to ``want``."""
        res = CliRunner().invoke(main, [*args, "--out", str(logs), *filters])
        assert res.exit_code == 0, res.output
        assert f"--only: {len(want)} of {len(ex.tasks)} tasks" in res.output
        return {r.task.key for r in Database.load(logs, "h200").records}

    tuned = tuned_by(tmp_path / "logs", "--only", "decode", "--only", "rmsnorm")
    assert tuned and tuned <= {t.key for t in want}
    res = CliRunner().invoke(main, [*args, "--only", "prefill", "--only", "no-such-epilogue"])
    assert res.exit_code == 1 and "'no-such-epilogue': no task's summary contains" in res.output
    assert str(ex.tasks[0].task) in res.output
    # --skip leaves out what --only would keep: the same tasks, named the other way
    assert all(("decode" in str(t.task)) != ("prefill" in str(t.task)) for t in ex.tasks)
    tuned = tuned_by(tmp_path / "skipped", "--only", "rmsnorm", "--skip", "prefill")
    assert tuned and tuned <= {t.key for t in want}
    res = CliRunner().invoke(main, [*args, "--only", "decode", "--skip", "decode"])
    assert res.exit_code == 1 and "--skip 'decode': no task's summary contains" in res.output


def test_tune_cli_errors_name_what_is_wrong(tmp_path: Path) -> None:
    model = tmp_path / "tiny"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TINY))
    res = CliRunner().invoke(main, ["tune", str(model), "--runner", "replay", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "--runner replay needs --replay FILE" in res.output
    res = CliRunner().invoke(main, ["tune", str(model), "--budget", "soon", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "--budget 'soon'" in res.output
    res = CliRunner().invoke(main, ["tune", str(model), "--target", "cpu", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "cannot tune for target 'cpu'" in res.output
    res = CliRunner().invoke(main, ["tune", str(model), "--runner", "replay", "--replay", str(tmp_path / "nope"),
                                    "--out", str(tmp_path)])
    assert res.exit_code == 1 and "--replay" in res.output
    res = CliRunner().invoke(main, ["tune", str(model), "--max-seq-len", "0", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "--max-seq-len must be an integer from 1 to 1048576, got 0" in res.output
    (tmp_path / "r.jsonl").write_text("")
    res = CliRunner().invoke(main, ["tune", str(model), "--runner", "replay", "--replay", str(tmp_path / "r.jsonl"),
                                    "--sustain-ms", "300", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "--sustain-ms times kernels on the GPU" in res.output


def test_each_task_measures_the_heuristic_first() -> None:
    """A tuned record must have beaten the schedule the compiler falls back to, so the local
    runner's first round of every task measures that schedule."""
    ex = extract_tasks(fused_module(_tiny_dir(), "bf16"), 128, batches=(1, 4))
    rows = {(t.task.shape, t.task.rows) for t in ex.tasks}
    assert {("decode", 1), ("decode", 4), ("prefill", 128)} <= rows, rows
    asked: dict[str, list[dict[str, int]]] = {}

    class Fixed(ReplayRunner):
        def measure(self, task: Task, schedules):  # type: ignore[no-untyped-def, override]
            asked.setdefault(task.key, []).extend(schedules)
            return [MeasureResult(1.0, (1.0,)) for _ in schedules]

    space = spaces_for("h200")
    tuner = Tuner(list(ex.tasks), Fixed([]), RandomSearch(space, seed=0), RoundRobin(), space, batch=4,
                  baseline=heuristic_baseline)
    tuner.run(Budget(trials=4 * len(ex.tasks)))
    assert set(asked) == {t.task.key for t in ex.tasks}
    for t in ex.tasks:
        base = heuristic_baseline(t)
        assert base is not None and asked[t.task.key][0] == complete(space.of(t.task), base), t.task
        assert sum(s == asked[t.task.key][0] for s in asked[t.task.key]) == 1
    decode4 = next(t for t in ex.tasks if t.task.template == "gemm" and t.task.shape == "decode" and t.task.rows == 4)
    assert heuristic_baseline(decode4)["bm"] == 16  # type: ignore[index]


def _tiny_dir() -> Path:
    import tempfile

    d = Path(tempfile.mkdtemp()) / "tiny"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(dict(TINY, torch_dtype="bfloat16")))
    return d


def test_a_lost_gpu_stops_the_run_and_leaves_untried_candidates_untried(tmp_path: Path) -> None:
    """A candidate that faults leaves the process's CUDA context unusable: the runner says so,
    the run stops, the faulting schedule is recorded as failed, the ones after it in its batch are
    not (a resumed run tries them), and what was measured before is kept."""
    task = gemm(4096, 4096, 1, "decode")
    calls: list[int] = []

    class Faulting(ReplayRunner):
        lost = ""

        def measure(self, task: Task, schedules):  # type: ignore[no-untyped-def, override]
            calls.append(len(schedules))
            if len(calls) == 1:
                return [MeasureResult(1.0 + i, (1.0 + i,)) for i in range(len(schedules))]
            self.lost = "the GPU context was lost at a candidate (illegal memory access)"
            return [MeasureResult.failed("launch: illegal memory access"),
                    *[MeasureResult.untried(self.lost) for _ in schedules[1:]]]

    space = GemmSpace()
    db, failures = Database.load(tmp_path, "h200"), FailureLog(tmp_path, "h200").load()
    tuner = Tuner([tuning_task(task)], Faulting([]), RandomSearch(space, seed=0), RoundRobin(), space, db, failures,
                  batch=4)
    result = tuner.run(Budget(trials=40))
    assert calls == [4, 4] and result.stopped.startswith("the GPU context was lost") and "resume" in result.stopped
    assert result.new_trials == 5  # four measured, one failed; three never tried
    assert len(Database.load(tmp_path, "h200").records) == 4
    assert len(FailureLog(tmp_path, "h200").load().failed(task, "replay")) == 1


def test_a_time_budget_starts_no_round_that_would_outlast_it(tmp_path: Path) -> None:
    """Rounds of a large task take 50 s, of a small one 5 s: with 100 s, the large task's second
    round is not started past the point where it would end late; the small one goes on until its
    own rounds no longer fit, and the run ends within the budget."""
    small, large = gemm(4096, 4096, 1, "decode"), gemm(4096, 128256, 4096, "prefill", "plain")
    now = [0.0]
    rounds: list[str] = []

    class Timed(ReplayRunner):
        def measure(self, task: Task, schedules):  # type: ignore[no-untyped-def, override]
            took = 50.0 if task == large else 5.0
            now[0] += took
            rounds.append("large" if task == large else "small")
            return [MeasureResult(took / 10 + i, (took / 10 + i,)) for i in range(len(schedules))]

    space = GemmSpace()
    tuner = Tuner([tuning_task(small), tuning_task(large, launches=1000)], Timed([]), RandomSearch(space, seed=0),
                  RoundRobin(), space, batch=2, clock=lambda: now[0])
    result = tuner.run(Budget(seconds=100.0))
    assert result.elapsed <= 100.0, (result.elapsed, rounds)
    assert rounds[:2] == ["small", "large"] and rounds.count("large") == 1, rounds
    assert rounds.count("small") == 10  # 10 x 5 + 50 = 100
    assert result.stopped.startswith("budget spent")


@pytest.mark.slow
def test_sigterm_ends_a_tune_with_its_summary_and_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          landscape_of: LandscapeOf) -> None:
    """SIGTERM in the middle of a round (``timeout`` on a tuning job): the round under way is
    dropped, the rounds before it stay in the database, the summary and convergence files are
    written, and the command exits 143."""
    import os
    import signal

    model, _, replay = _tiny_with_replay(tmp_path, 2, landscape_of)
    calls = [0]
    measure = ReplayRunner.measure

    def measure_then_die(self, task, schedules):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return measure(self, task, schedules)

    monkeypatch.setattr(ReplayRunner, "measure", measure_then_die)
    out = tmp_path / "logs"
    res = CliRunner().invoke(main, ["tune", str(model), "--runner", "replay", "--replay", str(replay), "--trials",
                                    "200", "--out", str(out), "--max-seq-len", "128", "--dtype", "bf16",
                                    "--only", "decode"])
    assert res.exit_code == 143, res.output
    assert any(ln.startswith("stopped: interrupted (SIGTERM); run again to resume") for ln in res.output.splitlines())
    failed = out / "h200" / "failed" / "gemm.jsonl"  # a schedule out of resources goes there, not to records
    n_failed = len(failed.read_text().splitlines()) if failed.exists() else 0
    assert len(Database.load(out, "h200").records) + n_failed == 16  # two rounds of 8, the third dropped
    assert list((out / "h200" / "runs").glob("tune-*.json"))
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is put back


def test_a_new_row_bucket_starts_from_its_nearest_neighbours_best(tmp_path: Path) -> None:
    """A task the database has never seen measures, in its first round, the fallback schedule and
    the fastest records of the same task at the nearest other row bucket that are valid at its
    own rows (a record with BM above the new bucket's rows is skipped); a task with records of its
    own does not."""
    new, near, far = (gemm(4096, 4096, rows, "prefill") for rows in (128, 256, 4096))
    db = Database.load(tmp_path, "h200")
    plain = dict(bk=64, num_warps=8, num_stages=3)
    db.append(Record.make(far, {**plain, "bm": 128, "bn": 128}, [0.1], {}, "-"))  # a farther bucket
    db.append(Record.make(near, {**plain, "bm": 256, "bn": 64}, [0.5], {}, "-"))  # BM 256 > 128 rows
    db.append(Record.make(near, {**plain, "bm": 64, "bn": 64}, [1.0], {}, "-"))
    db.append(Record.make(near, {**plain, "bm": 64, "bn": 128}, [2.0], {}, "-"))
    db.append(Record.make(near, {**plain, "bm": 128, "bn": 64}, [3.0], {}, "-"))
    asked: list[dict[str, int]] = []

    class Fixed(ReplayRunner):
        def measure(self, task: Task, schedules):  # type: ignore[no-untyped-def, override]
            asked.extend(schedules)
            return [MeasureResult(1.0, (1.0,)) for _ in schedules]

    space = spaces_for("h200")
    tt = TuningTask(new, None, "", 1, 128, 1.0)
    tuner = Tuner([tt], Fixed([]), RandomSearch(space, seed=0), RoundRobin(), space, database=db, batch=4)
    tuner.run(Budget(trials=4))
    assert [(s["bm"], s["bn"]) for s in asked[:2]] == [(64, 64), (64, 128)], asked
    asked.clear()  # the 4096-row task has a record: nothing of the 256-row records (BM 256 first) is seeded
    Tuner([TuningTask(far, None, "", 1, 4096, 1.0)], Fixed([]), RandomSearch(space, seed=0), RoundRobin(), space,
          database=db, batch=4).run(Budget(trials=4))
    assert len(asked) == 4 and {**plain, "bm": 256, "bn": 64} not in [space.of(far).emit(s) for s in asked], asked


def test_a_runner_out_of_time_ends_the_tune() -> None:
    """A runner whose deadline has passed (the local runner's, set from the time budget) answers
    a round untried: the tune stops there, budget spent, recording nothing, rather than asking
    again until its own clock runs out."""
    import time

    asked: list[int] = []

    class Late(ReplayRunner):
        deadline = time.monotonic() - 1.0

        def measure(self, task: Task, schedules):  # type: ignore[no-untyped-def, override]
            asked.append(len(schedules))
            return [MeasureResult.untried("the time budget ran out") for _ in schedules]

    space = spaces_for("h200")
    tasks = [TuningTask(gemm(4096, 4096, 1, "decode"), None, "", 1, 1, 1.0)]
    result = Tuner(tasks, Late([]), RandomSearch(space, seed=0), RoundRobin(), space, batch=4).run(
        Budget(seconds=3600.0))
    assert (result.stopped, result.new_trials, asked) == ("budget spent", 0, [4]), result


def test_knob_sweep_appends_the_valid_neighbours_of_the_best_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/knob_sweep.py: the best record of a task with each combination of the knob
    values, those the space accepts measured (here by a fake runner) and appended; a new row
    bucket starts from another bucket's records and the heuristic; tasks whose space lacks a
    knob are passed over, and a sweep where every task's does is refused."""
    import runpy
    import sys

    from inferx.autotune import runner as runner_mod

    def fake(self, task, schedules):  # type: ignore[no-untyped-def]
        return [MeasureResult(0.5 + 0.01 * i, (0.5,), "", {"triton": "fake"}, "fake") for i in range(len(schedules))]

    monkeypatch.setattr(runner_mod.LocalRunner, "measure", fake)
    monkeypatch.setattr(runner_mod.LocalRunner, "close", lambda self: None)
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "knob_sweep.py"
    from inferx.benchmark.shapes import make_config

    make_config("tiny").save_pretrained(tmp_path / "tiny")
    ex = extract_tasks(fused_module(str(tmp_path / "tiny"), "bf16"), 4096, batches=(1,))
    o = next(t.task for t in ex.tasks if isinstance(t.task, Task) and t.task.shape == "prefill" and t.task.rows == 4096
             and t.task.k == t.task.n == 64)
    db = Database.load(tmp_path, "h200")
    db.append(Record.make(o, dict(bm=64, bn=64, bk=64, num_warps=4, num_stages=3), [1.0], {}, "-"))
    for extra in (["--only", "rows<=4096", "--knob", "tma=0,1", "--knob", "num_stages=3,4"],
                  ["--only", "rows<=128", "--bases-from-rows", "4096", "--knob", "split_k=1,2"]):
        monkeypatch.setattr(sys, "argv", ["knob_sweep.py", "--shape", "tiny", "--only", "K=64 N=64", "--only",
                                          "prefill", "--db", str(tmp_path), *extra])
        runpy.run_path(str(script), run_name="__main__")
    got = Database.load(tmp_path, "h200").records
    swept = [r.schedule for r in got if r.task == o][1:]
    assert sorted((s.get("tma", 0), s["num_stages"]) for s in swept) == [(0, 4), (1, 3), (1, 4)], swept
    short = [r for r in got if r.task == replace(o, rows=128)]
    assert short and all(r.source == "benchmarks/knob_sweep.py (local)" for r in short)
    # from the 4096-row record and the heuristic at 128 rows; split-K 2 x BK 64 does not divide K=64
    assert {(r.schedule["num_stages"], r.schedule.get("split_k", 1)) for r in short} >= {(3, 1), (4, 1)}, short
    assert all(r.schedule.get("split_k", 1) == 1 for r in short)
    monkeypatch.setattr(sys, "argv", ["knob_sweep.py", "--shape", "tiny", "--only", "gemm", "--db", str(tmp_path),
                                      "--knob", "stage=3"])
    capsys.readouterr()
    with pytest.raises(SystemExit, match="no matching task's space has the knobs stage"):
        runpy.run_path(str(script), run_name="__main__")
    assert "the gemm space has no knob 'stage'; its knobs: bm, bn" in capsys.readouterr().out
    # tasks of another template among the matches are said and passed over; the GEMMs are swept
    monkeypatch.setattr(sys, "argv", ["knob_sweep.py", "--shape", "tiny", "--only", "decode", "--db", str(tmp_path),
                                      "--knob", "bk=32"])
    runpy.run_path(str(script), run_name="__main__")
    assert "not swept: the attention space has no knob 'bk'" in capsys.readouterr().out
    assert any(r.task.shape == "decode" for r in Database.load(tmp_path, "h200").records)
    # --again: the two best records of the 4096-row task measured again as they are, nothing else
    before = [r for r in Database.load(tmp_path, "h200").records if r.task == o]
    monkeypatch.setattr(sys, "argv", ["knob_sweep.py", "--shape", "tiny", "--only", "K=64 N=64", "--only",
                                      "prefill", "--only", "rows<=4096", "--db", str(tmp_path), "--again",
                                      "--top", "2"])
    runpy.run_path(str(script), run_name="__main__")
    again = [r for r in Database.load(tmp_path, "h200").records if r.task == o][len(before):]
    best = sorted(before, key=lambda r: r.median_ms)[:2]
    assert sorted(map(str, (r.schedule for r in again))) == sorted(map(str, (r.schedule for r in best))), again
    monkeypatch.setattr(sys, "argv", ["knob_sweep.py", "--shape", "tiny", "--only", "gemm", "--db", str(tmp_path)])
    with pytest.raises(SystemExit, match="name at least one --knob"):
        runpy.run_path(str(script), run_name="__main__")
    # --plain --bases-from-model: the bare GEMM of the o projection's K and N starts from the
    # model's o task (residual and row sums folded in) at the same rows
    monkeypatch.setattr(sys, "argv", ["knob_sweep.py", "--shape", "tiny", "--plain", "--bases-from-model", "--only",
                                      "K=64 N=64", "--only", "rows<=4096", "--db", str(tmp_path), "--again",
                                      "--top", "1"])
    runpy.run_path(str(script), run_name="__main__")
    bare = [r for r in Database.load(tmp_path, "h200").records if r.task.epilogue == "plain"
            and r.task.prologue == "none"]
    assert {(r.task.k, r.task.n, r.task.rows) for r in bare} == {(64, 64, 4096)}, bare
    # the model task's best record, and the heuristic (what a task with no record of its own runs)
    assert len(bare) == 2 and best[0].schedule in [r.schedule for r in bare], bare
    monkeypatch.setattr(sys, "argv", ["knob_sweep.py", "--shape", "tiny", "--bases-from-model", "--again",
                                      "--db", str(tmp_path)])
    with pytest.raises(SystemExit, match="--bases-from-model goes with --plain"):
        runpy.run_path(str(script), run_name="__main__")


def test_tune_cli_quant_tunes_the_int4_kernels(tmp_path: Path) -> None:
    """``--quant SCHEME`` tunes the int4 GEMMs (qgemm tasks) of the model as ``compile --quant``
    makes them, from its config alone, and ``--quant fp8`` the FP8 ones (fp8gemm tasks); an
    unknown scheme, or ``--quant-head`` without a scheme, is one error line."""
    model = _tiny_dir()
    (tmp_path / "r.jsonl").write_text("")
    base = ["tune", str(model), "--runner", "replay", "--replay", str(tmp_path / "r.jsonl"), "--trials", "4",
            "--max-seq-len", "128", "--dtype", "bf16", "--out", str(tmp_path / "logs")]
    res = CliRunner().invoke(main, [*base, "--quant", "int4-g32", "--only", "qgemm"])
    assert res.exit_code == 0, res.output
    assert "--only: " in res.output and "qgemm" in res.output
    fp8 = CliRunner().invoke(main, [*base, "--quant", "fp8", "--only", "fp8gemm"])
    assert fp8.exit_code == 0 and "fp8gemm" in fp8.output, fp8.output
    plain = CliRunner().invoke(main, [*base, "--only", "qgemm"])
    assert plain.exit_code == 1 and "no task's summary contains" in plain.output
    for extra, want in ((["--quant", "int8-g32"], "unknown quantization scheme 'int8-g32'"),
                        (["--quant-head"], "--quant-head quantizes the LM head under a --quant scheme")):
        res = CliRunner().invoke(main, [*base, *extra])
        assert res.exit_code == 1 and want in res.output and "Traceback" not in res.output, res.output
