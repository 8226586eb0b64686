"""Which schedule each kernel is generated with: the tuning database's best record of its task,
a neighbouring row bucket's record where a long prompt's bucket has none, else its family's
heuristic, every fallback counted with its reason. The compiler reads records through
``Database.best`` alone."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inferx.compiler.database import NO_DATABASE, Database, Record
from inferx.compiler.families import family
from inferx.compiler.families.common.hardware import H200, HARDWARE
from inferx.compiler.families.common.space import complete
from inferx.compiler.families.interface import AnyTask, TaskError
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.options import CompileOptions, batch_buckets, resolved_max_seq_len
from inferx.runtime.manifest import DatabaseInfo, Fallback, Schedules, TunedSchedule


@dataclass(frozen=True)
class ScheduleChoice:
    """Where one kernel's schedule comes from: a tuning record of its task (``schedule`` and
    ``record`` set, origin "tuned"), a record of the same task at another long-prompt row bucket
    (origin "borrowed", measured at ``from_rows``; ``reason`` says so), or the template's
    heuristic (origin "heuristic"; ``reason`` says why)."""

    schedule: Any | None
    task: AnyTask | None
    record: Record | None
    reason: str = ""
    from_rows: int | None = None

    @property
    def origin(self) -> str:
        if self.schedule is None:
            return "heuristic"
        return "tuned" if self.from_rows is None else "borrowed"


def tuning_database(options: CompileOptions, say: Callable[[str], None] = lambda msg: None) -> Database | None:
    """The records for the target whose schedules are generated (``options.schedules`` or the
    target); None for the cpu target (GPU timings say nothing about Triton's interpreter) and when
    ``options.tuning_logs`` is None. Lines refused on reading are skipped and reported through
    ``say`` (``Database.problem_lines``)."""
    target = options.schedules or options.target
    if options.tuning_logs is None or target in NO_DATABASE:
        return None
    db = Database.load(options.tuning_logs, target)
    for line in db.problem_lines():
        say(f"        {line}")
    return db


def row_buckets(kop: KernelOp, options: CompileOptions) -> list[int | None]:
    """The row buckets a kernel is generated for on a GPU target (``kernel_row_buckets``); [None]
    (one kernel for every shape) for the cpu target."""
    if (options.schedules or options.target) == "cpu":
        return [None]
    return kernel_row_buckets(kop, batch_buckets(options), resolved_max_seq_len(options))


def kernel_row_buckets(kop: KernelOp, batches: Sequence[int], max_seq_len: int) -> list[int | None]:
    """The row buckets a kernel is generated for, each with its own schedule (its family's
    ``row_buckets``); the launch plan picks by rows (batch x seq). Buckets whose schedules agree
    generate the same source, so they share one kernel and the launch lists no variants."""
    return family(kop.template.data).row_buckets(kop, batches, max_seq_len)


def per_batch(kop: KernelOp) -> bool:
    """The kernel's rows are the batch (a decode kernel), also in a prefill entry's tail."""
    return family(kop.template.data).per_batch(kop)


def select_schedule(kop: KernelOp, db: Database | None, max_seq_len: int, rows: int | None = None) -> ScheduleChoice:
    """The schedule of one kernel: the database's best record of its task, else the heuristic.

    The task is looked up at the rows the kernel is generated for (``rows``: a decode batch
    bucket), else at the bucket that is compiled for: a decode step at batch 1, a prefill of a
    ``max_seq_len`` prompt. Attention tasks are keyed by the context of ``max_seq_len`` too."""
    fam = family(kop.template.data)
    if not fam.tunable:
        return ScheduleChoice(None, None, None, f"template {fam.name} is not tuned")
    try:
        at = rows if rows is not None else 1 if fam.per_batch(kop) else max_seq_len
        task = fam.task(kop, at, max_seq_len)
    except TaskError as e:
        return ScheduleChoice(None, None, None, f"no task: {e}")
    if db is None:
        return ScheduleChoice(None, task, None, "no tuning database for this target")
    best = db.best(task)
    if best is not None:
        return ScheduleChoice(best[0], task, best[1])
    near = nearest_bucket_record(task, db)
    if near is None:
        return ScheduleChoice(None, task, None, "no record")
    schedule, record, from_rows = near
    return ScheduleChoice(schedule, task, record, f"no record at {task.rows} rows; the {from_rows}-row bucket's",
                          from_rows)


# A long prompt's row buckets (above the short-prompt ones) borrow a
# neighbour's record when they have none: the factors tried, nearest first.
BORROW_MIN_ROWS = 1024
BORROW_FACTORS = (2.0, 0.5, 4.0, 0.25, 8.0, 0.125)


def nearest_bucket_record(task: AnyTask, db: Database) -> tuple[Any, Record, int] | None:
    """(schedule, record, its rows) of the best record of ``task`` at the nearest other row bucket
    of 1024 rows or more, valid in the task's schedule space, or None. Only tasks whose family
    names neighbours borrow (prefill GEMM and attention tasks): a long prompt's tiles are a matter
    of filling the SMs many times over, which a schedule measured at twice or half the rows does
    too, better than an untuned heuristic; a short prompt's tiling and a decode batch's are
    questions of their own."""
    if task.rows < BORROW_MIN_ROWS:
        return None
    fam = family(task.template)
    space = fam.space(HARDWARE.get(db.target, H200))
    for factor in BORROW_FACTORS:
        rows = int(task.rows * factor)
        if rows < BORROW_MIN_ROWS:
            continue
        for other in fam.neighbours(task, rows):
            best = db.best(other)
            if best is not None and space.why_invalid(task, complete(space, best[1].schedule)) is None:
                return best[0], best[1], rows
    return None


def tuning_line(choices: Mapping[str, ScheduleChoice]) -> str:
    """``tuned N of M kernels[; B on a record of another row bucket]; fallbacks: <count> <reason>, ...``"""
    tuned = sum(c.origin == "tuned" for c in choices.values())
    borrowed = sum(c.origin == "borrowed" for c in choices.values())
    reasons: dict[str, int] = {}
    for c in choices.values():
        if c.origin == "heuristic":
            reasons[c.reason] = reasons.get(c.reason, 0) + 1
    fallbacks = ", ".join(f"{n} ({why})" for why, n in sorted(reasons.items())) or "none"
    also = f"; {borrowed} on a record of another row bucket" if borrowed else ""
    hot = sum(c.record is not None and c.record.regime == "sustained" for c in choices.values())
    also += f"; {hot} on records timed at sustained clocks" if hot else ""
    return f"tuned {tuned} of {len(choices)} kernels{also}; fallbacks: {fallbacks}"


def schedules_section(choices: Mapping[str, ScheduleChoice], db: Database | None, options: CompileOptions,
                      bucket_ms: Mapping[str, Mapping[int, float | None]]) -> Schedules:
    """The manifest's account of schedules: each tuned kernel with its task and record (the
    first row bucket's; with ``by_rows``, each bucket's record time where the kernel serves
    several), each fallback with its task (None where the template has none) and the reason."""
    tuned, fallbacks = {}, {}
    for name, c in sorted(choices.items()):
        if c.record is not None and c.task is not None:
            by_rows = bucket_ms.get(name, {})
            tuned[name] = TunedSchedule(
                task=c.task.key, summary=str(c.task), schedule=c.record.schedule, median_ms=c.record.median_ms,
                date=c.record.date, source=c.record.source, from_rows=c.from_rows, regime=c.record.regime,
                by_rows=dict(sorted(by_rows.items())) if len(by_rows) > 1 else {})
        else:
            fallbacks[name] = Fallback(c.task.key if c.task else None, c.reason)
    target = options.schedules or options.target
    return Schedules(
        database=DatabaseInfo(db.target, len(db.records)) if db is not None else None,
        tuned=tuned,
        fallbacks=fallbacks,
        note="" if db is not None else f"no tuning database for target {target}: every schedule is heuristic",
    )
