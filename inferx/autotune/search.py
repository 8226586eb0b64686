"""Search: which schedules to measure next, for which task, until the budget is spent.

- Strategies propose unmeasured schedules of one task. ``RandomSearch`` (trivial) samples the
  space uniformly. ``EvolutionarySearch`` (clever, as Ansor's) evolves a population seeded with
  the best measured schedules and random ones by mutation and crossover for a few generations,
  scoring with a cost model, and proposes the model's best unmeasured candidates plus a few random
  ones (exploration); measured results go back into the model (``observe``).
- Task schedulers pick the task of the next round. ``RoundRobin`` (trivial) takes the task with
  the fewest rounds. ``GradientScheduler`` (Ansor's) first gives every task one round, then picks
  the task whose next trials promise the largest end-to-end gain: launches per token x (a mix of
  the recent improvement per trial and an optimistic forward estimate, capped by the distance
  between its best time and its floor: roofline plus the fixed cost of a launch, which no schedule
  removes), with an epsilon of random picks.
- ``Tuner`` runs rounds (pick a task, propose a batch, measure, record) until a ``Budget`` of
  trials or seconds is spent or every task's space is exhausted. It is resumable: records of a
  task already in the database, and failures already logged for this runner, count as measured
  and are never proposed again. A task's first round measures the compiler's fallback schedule
  and, for a task the database has never seen, the best schedules of the same task at its
  nearest other row bucket (transfer, as a warm start).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Protocol

import numpy as np

from inferx.autotune.cost_model import CostModel
from inferx.autotune.extract import TuningTask
from inferx.autotune.failures import FailureLog
from inferx.autotune.runner import MeasureResult, Runner
from inferx.autotune.space import Schedule, Space, complete, dedupe, schedule_key
from inferx.compiler.database import Database, Record
from inferx.compiler.families.interface import AnyTask

# --- strategies ----------------------------------------------------------------------------------


class SearchStrategy(Protocol):
    name: str

    def propose(self, task: AnyTask, measured: Mapping[str, float], n: int) -> list[Schedule]: ...

    def observe(self, records: Sequence[Record]) -> None: ...


def _unmeasured_random(space: Space, task: AnyTask, measured: Mapping[str, float], n: int,
                       rng: random.Random, exclude: set[str] | None = None) -> list[Schedule]:
    """Up to ``n`` valid schedules not in ``measured`` (nor ``exclude``); falls back to the full
    enumeration when sampling keeps hitting measured ones."""
    taken = set(measured) | (exclude or set())
    out = [s for s in space.sample(task, rng, 4 * n + 8) if schedule_key(s) not in taken][:n]
    if len(out) < n:
        rest = [s for s in space.all_valid(task) if schedule_key(s) not in taken
                and schedule_key(s) not in {schedule_key(o) for o in out}]
        rng.shuffle(rest)
        out += rest[: n - len(out)]
    return out


@dataclass
class RandomSearch:
    """Uniform over the valid space, never repeating a measured schedule."""

    space: Space
    seed: int = 0
    name: str = "random"
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def propose(self, task: AnyTask, measured: Mapping[str, float], n: int) -> list[Schedule]:
        return _unmeasured_random(self.space, task, measured, n, self._rng)

    def observe(self, records: Sequence[Record]) -> None:
        return None


@dataclass
class EvolutionarySearch:
    """Cost-model-guided evolution; ``epsilon`` of each batch is random (at least one schedule
    when the batch has four or more)."""

    space: Space
    model: CostModel
    seed: int = 0
    population: int = 128
    generations: int = 4
    mutation_prob: float = 0.85
    elite: float = 0.125
    epsilon: float = 0.1
    name: str = "evolutionary"
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def observe(self, records: Sequence[Record]) -> None:
        self.model.update(records)

    def propose(self, task: AnyTask, measured: Mapping[str, float], n: int) -> list[Schedule]:
        rng = self._rng
        finite = sorted((ms, k) for k, ms in measured.items() if math.isfinite(ms))
        seeds = [complete(self.space.of(task), _parse(k)) for _, k in finite[: self.population // 4]]
        seeds = [s for s in seeds if self.space.why_invalid(task, s) is None]
        pop = seeds + self.space.sample(task, rng, self.population - len(seeds))
        visited: dict[str, Schedule] = {schedule_key(s): s for s in pop}
        for _ in range(self.generations):
            if not pop:
                break
            scores = self.model.predict(task, pop)
            order = np.argsort(scores, kind="stable")
            fitness = 1.0 / np.maximum(scores, 1e-12)
            probs = fitness / fitness.sum()
            n_elite = max(1, int(self.elite * len(pop)))
            nxt = [pop[i] for i in order[:n_elite]]
            for _ in range(self.population - n_elite):
                a = pop[int(np.searchsorted(np.cumsum(probs), rng.random() * 0.999999))]
                if rng.random() < self.mutation_prob:
                    child = self.space.mutate(task, a, rng)
                else:
                    b = pop[int(np.searchsorted(np.cumsum(probs), rng.random() * 0.999999))]
                    child = self.space.crossover(task, a, b, rng)
                if child is not None:
                    nxt.append(child)
                    visited.setdefault(schedule_key(child), child)
            pop = nxt
        candidates = [s for k, s in visited.items() if k not in measured]
        n_random = min(n, max(1 if n >= 4 else 0, int(round(self.epsilon * n))))
        picked: list[Schedule] = []
        if candidates:
            scores = self.model.predict(task, candidates)
            picked = [candidates[i] for i in np.argsort(scores, kind="stable")[: n - n_random]]
        taken = {schedule_key(s) for s in picked}
        picked += _unmeasured_random(self.space, task, measured, n - len(picked), rng, taken)
        return picked


def _parse(key: str) -> Schedule:
    import json

    return {k: int(v) for k, v in json.loads(key).items()}


# --- task schedulers -----------------------------------------------------------------------------


@dataclass
class TaskState:
    """What the tuner knows of one task: every measured schedule (key -> ms, inf if it failed),
    the best, and the best after each round (for the schedulers and the convergence plot)."""

    tt: TuningTask
    measured: dict[str, float] = field(default_factory=dict)
    best_ms: float = math.inf
    best_schedule: Schedule | None = None
    rounds: int = 0
    new_trials: int = 0
    history: list[tuple[int, float]] = field(default_factory=list)  # (trials of this task, best ms)
    exhausted: bool = False
    round_s: float = 0.0  # wall time of this task's last round (build, check, measure)

    @property
    def trials(self) -> int:
        return len(self.measured)

    def add(self, schedule: Schedule, ms: float) -> None:
        self.measured[schedule_key(schedule)] = ms
        if ms < self.best_ms:
            self.best_ms, self.best_schedule = ms, dict(schedule)

    @property
    def fraction_of_roofline(self) -> float:
        return self.tt.roofline_ms / self.best_ms if math.isfinite(self.best_ms) and self.best_ms > 0 else 0.0


class TaskScheduler(Protocol):
    name: str

    def pick(self, states: Sequence[TaskState]) -> int: ...


@dataclass
class RoundRobin:
    name: str = "round-robin"

    def pick(self, states: Sequence[TaskState]) -> int:
        live = [i for i, s in enumerate(states) if not s.exhausted]
        return min(live, key=lambda i: (states[i].rounds, i))


@dataclass
class GradientScheduler:
    alpha: float = 0.2
    window: int = 3
    epsilon: float = 0.05
    seed: int = 0
    name: str = "gradient"
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def gain(self, st: TaskState) -> float:
        """The expected end-to-end gain (ms per token) per trial spent on this task."""
        if not math.isfinite(st.best_ms):
            return math.inf if st.rounds < 3 else 0.0
        past = [ms for trials, ms in st.history if trials <= st.trials - self.window * 8]
        before = past[-1] if past and math.isfinite(past[-1]) else st.best_ms
        backward = (before - st.best_ms) / max(1, self.window * 8)
        forward = min(st.best_ms / max(1, st.trials), max(0.0, st.best_ms - st.tt.floor_ms))
        return st.tt.launches_per_token * (self.alpha * backward + (1 - self.alpha) * forward)

    def pick(self, states: Sequence[TaskState]) -> int:
        live = [i for i, s in enumerate(states) if not s.exhausted]
        fresh = [i for i in live if states[i].rounds == 0]
        if fresh:
            return fresh[0]
        if self._rng.random() < self.epsilon:
            return self._rng.choice(live)
        return max(live, key=lambda i: (self.gain(states[i]), -i))


# --- the tuner -----------------------------------------------------------------------------------


class Interrupted(Exception):
    """Raised inside a run (by a signal handler: Ctrl-C, SIGTERM) to end it early; the round under
    way is dropped, everything recorded before it is kept."""


@dataclass(frozen=True)
class Budget:
    """Stop after ``trials`` new measurements or ``seconds`` of wall time, whichever comes first
    (None: no limit on that count). A round is not started where the task's last round took
    longer than the time left (a round of a large prefill task takes most of a minute), so a run
    ends within its time budget, give or take one round of a task not measured before."""

    trials: int | None = None
    seconds: float | None = None

    def spent(self, trials: int, elapsed: float) -> bool:
        return (self.trials is not None and trials >= self.trials) or (
            self.seconds is not None and elapsed >= self.seconds)

    def fits(self, st: TaskState, elapsed: float) -> bool:
        """Whether another round of ``st``, as long as its last, ends within the time budget."""
        return self.seconds is None or elapsed + st.round_s <= self.seconds

    def eta(self, trials: int, elapsed: float) -> float:
        """Seconds left: the time budget's rest, or the trial budget's rest at the rate so far."""
        left = [self.seconds - elapsed] if self.seconds is not None else []
        if self.trials is not None and trials:
            left.append((self.trials - trials) * elapsed / trials)
        return max(0.0, min(left)) if left else math.inf


@dataclass(frozen=True)
class Progress:
    state: TaskState
    index: int
    total_tasks: int
    new_trials: int
    elapsed: float
    eta: float


@dataclass
class TuneResult:
    states: list[TaskState]
    new_trials: int
    elapsed: float
    curve: list[tuple[int, float, float]]  # (new trials so far, seconds, expected ms per token)
    stopped: str


@dataclass
class Tuner:
    """Tunes ``tasks`` with one runner, strategy and scheduler; records go to ``database`` (if
    given), failures to ``failures``."""

    tasks: Sequence[TuningTask]
    runner: Runner
    strategy: SearchStrategy
    scheduler: TaskScheduler
    space: Space
    database: Database | None = None
    failures: FailureLog | None = None
    batch: int = 8
    progress: Callable[[Progress], None] | None = None
    clock: Callable[[], float] = time.monotonic
    source: str = "inferx tune"
    # The schedule a task gets without a record (the template's heuristic): measured in the task's
    # first round, so a tuned record is never chosen over a fallback it did not beat.
    baseline: Callable[[TuningTask], Schedule | None] | None = None
    # A task with no measurement starts from what worked for the same task at other rows: the
    # fastest ``transfer`` distinct schedules of the database's nearest other row bucket (a new
    # bucket, such as a short prompt's, starts where its neighbour ended), measured in its first
    # round after the baseline.
    transfer: int = 2
    # The regime the runner times in (``database.REGIMES``). Only records of that regime resume a
    # task or teach the cost model (a sustained time is slower than a burst's by up to 25%); a task
    # with none of the sustained regime starts from the fastest schedules of its burst records (a
    # round's worth: ``batch``), timed again.
    regime: str = ""

    def run(self, budget: Budget) -> TuneResult:
        states = [self._resume(tt) for tt in self.tasks]
        if self.database is not None:
            self.strategy.observe([r for r in self.database.records if r.regime == self.regime])
        start, new = self.clock(), 0
        curve = [(0, 0.0, _objective(states))]
        stopped = "every task's space is exhausted"
        try:
            stopped, new = self._rounds(budget, states, start, curve, stopped)
        except Interrupted as e:  # what was recorded before stays; a new run resumes from it
            stopped, new = f"interrupted ({e}); run again to resume", sum(st.new_trials for st in states)
        return TuneResult(states, new, self.clock() - start, curve, stopped)

    def _rounds(self, budget: Budget, states: list[TaskState], start: float,
                curve: list[tuple[int, float, float]], stopped: str) -> tuple[str, int]:
        new = 0
        while any(not s.exhausted for s in states):
            elapsed = self.clock() - start
            if budget.spent(new, elapsed):
                stopped = "budget spent"
                break
            fitting = [s for s in states if not s.exhausted and budget.fits(s, elapsed)]
            if not fitting:
                stopped = "budget spent (no task's next round fits in the time left)"
                break
            st = fitting[self.scheduler.pick(fitting)]
            i = next(k for k, s in enumerate(states) if s is st)
            n = self.batch if budget.trials is None else min(self.batch, budget.trials - new)
            schedules = self._first_round(st, self.strategy.propose(st.tt.task, st.measured, n), n)
            if not schedules:
                st.exhausted = True
                continue
            began = self.clock()
            results = self.runner.measure(st.tt.task, schedules)
            st.round_s = self.clock() - began
            tried = [(s, r) for s, r in zip(schedules, results, strict=True) if r.tried]
            deadline = getattr(self.runner, "deadline", None)
            if not tried and deadline is not None and time.monotonic() >= deadline:
                stopped = "budget spent"  # the runner's clock ran out mid-round: nothing of it was tried
                break
            schedules = [s for s, _ in tried]
            records = self._record(st, schedules, [r for _, r in tried])
            self.strategy.observe(records)
            new += len(schedules)
            st.rounds += 1
            st.new_trials += len(schedules)
            st.history.append((st.trials, st.best_ms))
            elapsed = self.clock() - start
            curve.append((new, elapsed, _objective(states)))
            if self.progress is not None:
                self.progress(Progress(st, i, len(states), new, elapsed, budget.eta(new, elapsed)))
            lost = getattr(self.runner, "lost", "")
            if lost:  # what was measured is recorded; a new run resumes from it
                stopped = f"{lost}; run again to resume"
                break
        return stopped, new

    def _first_round(self, st: TaskState, schedules: list[Schedule], n: int) -> list[Schedule]:
        """``schedules`` led by the baseline (until it is measured) and, for a task not yet
        measured at all, the transfer seeds; ``n`` at most."""
        space = self.space.of(st.tt.task)
        base = self.baseline(st.tt) if self.baseline is not None else None
        first = [complete(space, base)] if base is not None else []
        if not st.measured:
            first += self._transferred(st)
        first = [s for s in dedupe(first) if schedule_key(s) not in st.measured]
        if not first or n < 1:
            return schedules
        keys = {schedule_key(s) for s in first}
        return (first + [x for x in schedules if schedule_key(x) not in keys])[:n]

    def _transferred(self, st: TaskState) -> list[Schedule]:
        """The fastest ``transfer`` distinct schedules, valid for this task, of the same task at
        the nearest other row bucket in the database."""
        task = st.tt.task
        if self.database is None or self.transfer < 1:
            return []
        space = self.space.of(task)
        if self.regime:  # this task's records of the other regime: its best schedules, timed again
            own = sorted((r for r in self.database.records if r.task.key == task.key and r.regime != self.regime
                          and math.isfinite(r.median_ms)), key=lambda r: r.median_ms)
            valid = [s for s in dedupe([complete(space, r.schedule) for r in own])
                     if space.why_invalid(task, s) is None]
            if valid:
                return valid[: max(self.transfer, self.batch)]
        siblings: dict[int, list[Record]] = {}
        for r in self.database.records:
            if r.task.rows != task.rows and math.isfinite(r.median_ms) and type(r.task) is type(task) \
                    and replace(r.task, rows=task.rows).key == task.key:
                siblings.setdefault(r.task.rows, []).append(r)
        for rows in sorted(siblings, key=lambda b: (abs(math.log2(b / task.rows)), b)):
            done = [complete(space, r.schedule) for r in sorted(siblings[rows], key=lambda r: r.median_ms)]
            valid = [s for s in dedupe(done) if space.why_invalid(task, s) is None][: self.transfer]
            if valid:
                return valid
        return []

    def _resume(self, tt: TuningTask) -> TaskState:
        st = TaskState(tt)
        if self.database is not None:
            for r in self.database.records:
                if r.task.key == tt.task.key and r.regime == self.regime:
                    st.add(complete(self.space.of(tt.task), r.schedule), r.median_ms)
        if self.failures is not None:
            for key in self.failures.failed(tt.task, self.runner.name):
                st.measured.setdefault(key, math.inf)
        st.history.append((st.trials, st.best_ms))
        return st

    def _record(self, st: TaskState, schedules: Sequence[Schedule], results: Sequence[MeasureResult]) -> list[Record]:
        today = date.today().isoformat()
        records = []
        for s, r in zip(schedules, results, strict=True):
            st.add(s, r.median_ms if r.ok else math.inf)
            emitted = self.space.of(st.tt.task).emit(s)
            if r.ok:
                rec = Record.make(st.tt.task, emitted, r.times_ms or (r.median_ms,), r.toolchain, today,
                                  f"{self.source} ({self.runner.name})", r.note, r.regime)
                records.append(rec)
                if self.database is not None:
                    self.database.append(rec)
            elif self.failures is not None:
                self.failures.append(st.tt.task, emitted, r.error, self.runner.name, r.toolchain, today)
        return records


def _objective(states: Sequence[TaskState]) -> float:
    """Expected ms per token: launches per token x best time, summed over tasks with a finite best."""
    return sum(s.tt.launches_per_token * s.best_ms for s in states if math.isfinite(s.best_ms))
