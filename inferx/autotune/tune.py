"""``inferx tune MODEL``: extract a model's tasks, tune them within a budget, append every
measurement to the tuning database, and leave a convergence record of the run.

Progress goes through ``say`` (the CLI prints it to stderr): the tasks and their shares, then one
line per round (task, trials, best time, fraction of roofline, ETA), then the best schedule of
each task. The run's convergence (expected ms per token after each round, and each task's best
after each of its rounds) is written as JSON under ``<out>/<target>/runs/``, and as a PNG beside it
when matplotlib is importable (it is not a dependency; the JSON says when the PNG is missing).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferx.autotune.cost_model import LearnedModel
from inferx.autotune.extract import extract_tasks, fused_module, heuristic_baseline
from inferx.autotune.failures import FailureLog
from inferx.autotune.runner import LocalRunner, ReplayRunner, Runner
from inferx.autotune.search import (
    Budget,
    EvolutionarySearch,
    GradientScheduler,
    Interrupted,
    Progress,
    RandomSearch,
    RoundRobin,
    TaskState,
    Tuner,
    TuneResult,
)
from inferx.autotune.space import spaces_for
from inferx.compiler.database import DEFAULT_ROOT, NO_DATABASE, Database, regime_of
from inferx.compiler.families.common.hardware import HARDWARE
from inferx.compiler.families.common.rows import GEMV_MAX_ROWS
from inferx.signals import raising_on

RUNNERS = ("local", "replay")
STRATEGIES = ("evolutionary", "random")


class TuneError(ValueError):
    """A model, option or file the tuner refuses; the message names what is at fault."""


@dataclass(frozen=True)
class TuneOptions:
    target: str = "h200"
    budget_s: float | None = 20 * 60
    trials: int | None = None
    runner: str = "local"
    replay: tuple[str, ...] = ()
    out: Path = DEFAULT_ROOT
    max_seq_len: int = 2048
    max_batch: int = 1  # decode GEMM and attention tasks at each batch bucket up to this
    dtype: str | None = None
    seed: int = 0
    batch: int = 8
    jobs: int = 8
    strategy: str = "evolutionary"
    only: tuple[str, ...] = ()  # tune only the tasks whose summary contains each of these
    skip: tuple[str, ...] = ()  # and none of these
    fuse_mlp: bool = False  # the decode MLPs as the compiler's fuse_mlp makes them (mlp tasks)
    fuse_attention_o: bool = False  # the decode attentions as fuse_attention_o makes them
    sustain_ms: float = 0.0  # > 0: time after that long of back-to-back replays (sustained regime)
    quant: str | None = None  # the linears quantized under this scheme (qgemm or fp8gemm tasks), as compile --quant
    quant_head: bool = False  # with quant, the LM head too
    kv_block_size: int | None = None  # the attention kernels of a paged KV cache of such blocks


def parse_budget(text: str) -> float:
    """Seconds of a budget written as ``90``, ``90s``, ``20m``, ``1.5h`` or ``1h30m``."""
    s = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return float(s)
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", s)
    if not parts or "".join(n + u for n, u in parts) != s:
        raise TuneError(f"--budget {text!r}: write it as e.g. 90s, 20m, 1h or 1h30m")
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)


def tune(model: Any, options: TuneOptions, say: Callable[[str], None] = lambda line: None) -> TuneResult:
    """Tunes every GEMM and attention task of ``model`` (an HF directory, a GGUF file, a Program or
    a module)."""
    if options.target in NO_DATABASE or options.target not in HARDWARE:
        raise TuneError(f"cannot tune for target {options.target!r}: the targets are {', '.join(sorted(HARDWARE))}")
    sizes = (("--max-seq-len", options.max_seq_len, 1 << 20), ("--max-batch", options.max_batch, 1 << 16),
             ("--batch", options.batch, 1 << 16), ("--jobs", options.jobs, 1024))
    for flag, value, hi in sizes:
        if type(value) is not int or not 1 <= value <= hi:
            raise TuneError(f"{flag} must be an integer from 1 to {hi}, got {value!r}")
    if options.trials is not None and (type(options.trials) is not int or options.trials < 1):
        raise TuneError(f"--trials must be a positive integer, got {options.trials!r}")
    if options.budget_s is not None and not options.budget_s > 0:
        raise TuneError(f"--budget must be positive, got {options.budget_s!r} s")
    if options.runner not in RUNNERS:
        raise TuneError(f"unknown runner {options.runner!r}: {', '.join(RUNNERS)}")
    if options.runner == "replay" and options.sustain_ms > 0:
        raise TuneError("--sustain-ms times kernels on the GPU: it needs --runner local, not replay")
    if options.runner == "replay" and not options.replay:
        raise TuneError("--runner replay needs --replay FILE (records to answer from)")
    if options.budget_s is None and options.trials is None:
        raise TuneError("give a --budget or --trials")
    hw = HARDWARE[options.target]
    batches = tuple(sorted({b for b in (1, 4, 16, 64) if b < options.max_batch} | {options.max_batch}))
    fused = (options.fuse_mlp or options.fuse_attention_o)
    if fused and options.max_batch > GEMV_MAX_ROWS:
        raise TuneError(f"--fuse-mlp, --fuse-attention-o: the fused decode kernels run at most {GEMV_MAX_ROWS} "
                        f"rows (--max-batch {options.max_batch})")
    if options.quant_head and options.quant is None:
        raise TuneError("--quant-head quantizes the LM head under a --quant scheme: give one")
    from inferx.compiler.ir.textio import IRError

    try:
        module = fused_module(model, options.dtype, options.fuse_mlp, options.fuse_attention_o, options.quant,
                              options.quant_head, kv_block_size=options.kv_block_size,
                              max_seq_len=options.max_seq_len, max_batch=options.max_batch)
    except IRError as e:  # the quantize pass's: an unknown scheme, a group that does not divide K
        raise TuneError(f"--quant {options.quant}: {e}") from None
    extraction = extract_tasks(module, options.max_seq_len, hw, batches=batches)
    say(extraction.summary())
    if not extraction.tasks:
        raise TuneError("the model has no GEMM or attention task to tune")
    tasks = [t for t in extraction.tasks if all(text in str(t.task) for text in options.only)
             and not any(text in str(t.task) for text in options.skip)]
    if not tasks:
        filters = " ".join([*(f"--only {x!r}" for x in options.only), *(f"--skip {x!r}" for x in options.skip)])
        raise TuneError(f"{filters}: no task's summary contains all of the --only texts and none of the --skip "
                        "texts; the tasks are:\n  " + "\n  ".join(str(t.task) for t in extraction.tasks))
    if options.only or options.skip:
        say(f"{'--only' if options.only else '--skip'}: {len(tasks)} of {len(extraction.tasks)} tasks")
    db = Database.load(options.out, options.target)
    for line in db.problem_lines():
        say(line)
    failures = FailureLog(options.out, options.target).load()
    runner = _runner(options, {t.task.key: t.kernel for t in tasks if t.kernel is not None})
    space = spaces_for(options.target)
    model_ = LearnedModel(hw, seed=options.seed)
    strategy = (EvolutionarySearch(space, model_, seed=options.seed) if options.strategy == "evolutionary"
                else RandomSearch(space, seed=options.seed))
    scheduler = GradientScheduler(seed=options.seed) if len(tasks) > 1 else RoundRobin()
    index = {t.task.key: n for n, t in enumerate(tasks, 1)}
    tuner = Tuner(tasks, runner, strategy, scheduler, space, db, failures, options.batch,
                  progress=lambda p: say(progress_line(p, index)),
                  baseline=heuristic_baseline if options.runner == "local" else None,
                  regime=regime_of(options.sustain_ms))
    say(f"tuning {len(tasks)} tasks on {options.target} with the {runner.name} runner "
        f"({strategy.name} search, {scheduler.name} task scheduler), budget "
        + ", ".join(x for x in (_budget_text(options)) if x))
    if isinstance(runner, LocalRunner) and options.budget_s is not None:
        # a round the time left cannot hold (a slow build) is cut at the budget's end, untried
        runner.deadline = time.monotonic() + options.budget_s
    try:
        with _interrupted_by_signals():
            result = tuner.run(Budget(options.trials, options.budget_s))
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            close()
    say(f"stopped: {result.stopped} after {result.new_trials} new measurements in {_dur(result.elapsed)}")
    for st in result.states:
        say(best_line(st, index))
    written = write_convergence(result, options, model_)
    say("convergence: " + ", ".join(str(p) for p in written))
    return result


def _interrupted_by_signals() -> contextlib.AbstractContextManager[None]:
    """Ctrl-C and SIGTERM (``timeout``, a job scheduler) end the run as its budget would: the
    measured records are already in the database, and the summary and convergence plot are
    still written."""
    return raising_on((signal.SIGINT, signal.SIGTERM), lambda sig: Interrupted(sig.name))


def _runner(options: TuneOptions, kernels: dict[str, Any]) -> Runner:
    if options.runner == "replay":
        try:
            return ReplayRunner.from_files(list(options.replay))
        except (OSError, ValueError) as e:
            raise TuneError(f"--replay: {e}") from None
    target = {"h200": "sm_90", "h100": "sm_90", "sm_90": "sm_90"}[options.target]
    return LocalRunner(kernels, target=target, hw=HARDWARE[options.target], jobs=options.jobs,
                       sustain_ms=options.sustain_ms)


def _budget_text(options: TuneOptions) -> list[str]:
    return [f"{_dur(options.budget_s)}" if options.budget_s is not None else "",
            f"{options.trials} trials" if options.trials is not None else ""]


def _dur(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _ms(v: float) -> str:
    return f"{v * 1e3:.3g} us" if math.isfinite(v) else "none yet"


def progress_line(p: Progress, index: dict[str, int]) -> str:
    """``[ 3/10] 24 trials (+8), best 12.3 us (87% of roofline), ETA 3m12s  <task>``"""
    st = p.state
    n = index.get(st.tt.task.key, p.index + 1)
    return (f"[{n:2d}/{p.total_tasks}] {st.trials} trials (+{st.new_trials}), best {_ms(st.best_ms)} "
            f"({st.fraction_of_roofline:.0%} of roofline), ETA {_dur(p.eta)}  {st.tt.task}")


def best_line(st: TaskState, index: dict[str, int]) -> str:
    sched = " ".join(f"{k}={v}" for k, v in (st.best_schedule or {}).items()) or "no valid measurement"
    return (f"[{index.get(st.tt.task.key, 0):2d}] best {_ms(st.best_ms)} ({st.fraction_of_roofline:.0%} of "
            f"roofline {_ms(st.tt.roofline_ms)}) after {st.trials} trials: {sched}")


def write_convergence(result: TuneResult, options: TuneOptions, model: LearnedModel) -> list[Path]:
    """The run's convergence as JSON (always), as PNG (when matplotlib is importable), and the
    learned cost model it ended with; returns the paths written."""
    folder = Path(options.out) / options.target / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    base = folder / f"tune-{stamp}"
    data: dict[str, Any] = {
        "target": options.target, "runner": options.runner, "new_trials": result.new_trials,
        "elapsed_s": result.elapsed, "stopped": result.stopped,
        "objective": [{"trials": n, "seconds": s, "ms_per_token": ms} for n, s, ms in result.curve],
        "tasks": [{"task": st.tt.task.key, "summary": str(st.tt.task), "share": st.tt.share,
                   "launches_per_token": st.tt.launches_per_token, "roofline_ms": st.tt.roofline_ms,
                   "floor_ms": st.tt.floor_ms, "best_ms": st.best_ms if math.isfinite(st.best_ms) else None,
                   "best_schedule": st.best_schedule,
                   "history": [{"trials": t, "best_ms": b if math.isfinite(b) else None} for t, b in st.history]}
                  for st in result.states],
    }
    written = []
    png = base.with_suffix(".png")
    if not _plot(data, png):
        data["plot"] = "matplotlib is not installed: no PNG; plot from this JSON"
    else:
        data["plot"] = png.name
        written.append(png)
    json_path = base.with_suffix(".json")
    json_path.write_text(json.dumps(data, indent=1))
    written.insert(0, json_path)
    model_path = folder / f"tune-{stamp}-model.json"
    model.save(model_path)
    written.append(model_path)
    return written


def _plot(data: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    obj = [p for p in data["objective"] if p["ms_per_token"]]
    a.plot([p["trials"] for p in obj], [p["ms_per_token"] for p in obj], marker=".")
    a.set(xlabel="measurements", ylabel="expected ms per token (tuned tasks)", title="end to end")
    for t in data["tasks"]:
        pts = [(h["trials"], t["roofline_ms"] / h["best_ms"]) for h in t["history"] if h["best_ms"]]
        if pts:
            b.plot(*zip(*pts, strict=True), marker=".", label=t["summary"][:60])
    b.set(xlabel="measurements of the task", ylabel="fraction of roofline", title="per task", ylim=(0, 1.05))
    b.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True

