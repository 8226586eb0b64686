"""The tuning database: ``tuning_logs/<target>/<template>.jsonl``, one record per line.

A record is one measured schedule of one task: ``{"task", "schedule", "times_ms", "median_ms",
"toolchain": {"triton", "torch", "device"}, "date", "source", "note"}``, and ``"regime":
"sustained"`` on a record timed after a sustained run of its kernel (``LocalRunner.sustain_ms``:
the clocks the GPU's power cap allows, as in a model's prefill). Files are append-only:
``append`` adds a line under a file lock with a single write and never rewrites what is there; a
wrong record is outweighed by appending a better one, not by editing history.

``best(task)`` is the record of that task with the lowest median whose schedule still validates
for its template (a record of a schedule the template no longer accepts is ignored, not an
error); medians within ``TIE`` of the lowest are a tie, which goes to the schedule with the
fewest optional knobs on (split-K, TMA, persistent grid, grouped order). Where a task has
sustained records, they alone rank its schedules: every time of that regime is slower than a
burst's, so the two are never compared. Targets are device names ("h200", "h100"); "cpu" has no
database: GPU measurements say nothing about Triton's interpreter.

Records are data from wherever the logs came from. ``load`` reads only regular files (a FIFO or a
device under the folder would block or never end) and checks every line against the record
schema (``Record.from_json``: an object whose fields have their types) and its schedule against
its family's one statement of validity (``parse_schedule``), so a schedule the template would not
generate is refused as it is read, not when it is picked. A line that fails is skipped and listed
in ``problems`` (``file:line: reason``), which the compile reports with a count; a torn last line
never stops a compile.
"""

from __future__ import annotations

import json
import math
import os
import stat
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inferx.compiler.families import family
from inferx.compiler.families.common.space import OFF_VALUES
from inferx.compiler.families.interface import AnyTask, ScheduleError, TaskError

_PACKAGE = Path(__file__).resolve().parents[1]  # the inferx package

# Medians within this fraction of the fastest are a tie: one schedule timed twice by different
# tools can differ by most of a percent. A knob that buys less than that is not shown to help, and
# a record is measured at its bucket's largest row count while the kernel runs at every count of
# the bucket, where a knob that ties at the largest count can be clearly slower at a smaller one
# (e.g. the grouped tile order of a large gated GEMM; docs/performance.md).
TIE = 0.01

# How a record's times were taken: "" in short bursts after idle work (boost clocks), "sustained"
# after a sustained run of the same kernel (power-capped clocks; ``LocalRunner.sustain_ms``)
REGIMES = ("", "sustained")


def regime_of(sustain_ms: float) -> str:
    """The regime of times taken after ``sustain_ms`` of back-to-back replays (0: bursts)."""
    return "sustained" if sustain_ms > 0 else ""


def knobs_on(schedule: Mapping[str, Any]) -> int:
    """How many optional knobs a stored schedule turns on."""
    return sum(1 for k, off in OFF_VALUES.items() if schedule.get(k, off) != off)


def task_from_json(d: Any) -> AnyTask:
    """The task of any family a record names; TaskError if it is not one."""
    if not isinstance(d, dict):
        raise TaskError(f"not a task: {d!r}")
    try:
        fam = family(str(d.get("template")))
    except ValueError as e:
        raise TaskError(f"not a task: {e}") from None
    return fam.task_from_json(d)


def parse_schedule(template: str, d: Mapping[str, Any]) -> Any:
    """The schedule object of ``template``'s family for a stored schedule dict; ScheduleError
    naming the rule it breaks (or the unknown family)."""
    try:
        fam = family(template)
    except ValueError as e:
        raise ScheduleError(str(e)) from None
    if not fam.tunable:
        raise ScheduleError(f"no schedule form for template {template!r}")
    return fam.parse_schedule(d)


def _default_root() -> Path:
    """``tuning_logs/`` shipped with the package: inside it when installed with its data, beside
    it (the repository's top level) in a source checkout or editable install."""
    for root in (_PACKAGE / "tuning_logs", _PACKAGE.parent / "tuning_logs"):
        if root.is_dir():
            return root
    return _PACKAGE.parent / "tuning_logs"


DEFAULT_ROOT = _default_root()
NO_DATABASE = frozenset({"cpu"})



@dataclass(frozen=True)
class Record:
    """One measurement: ``median_ms`` is the median of ``times_ms`` as measured (the note says
    what one time covers, e.g. single launches timed between events, launch overhead included)."""

    task: AnyTask
    schedule: dict[str, int]
    times_ms: tuple[float, ...]
    median_ms: float
    toolchain: dict[str, str]
    date: str
    source: str = ""
    note: str = ""
    regime: str = ""  # "sustained": timed at power-capped clocks; "" in short bursts (boost clocks)

    @staticmethod
    def make(
        task: AnyTask,
        schedule: Mapping[str, int],
        times_ms: Sequence[float],
        toolchain: Mapping[str, str],
        date: str,
        source: str = "",
        note: str = "",
        regime: str = "",
    ) -> Record:
        """A record with its median computed from ``times_ms``."""
        times = tuple(float(x) for x in times_ms)
        if not times:
            raise ValueError("a record needs at least one measured time")
        if regime not in REGIMES:
            raise ValueError(f"a record's regime must be one of {REGIMES}, got {regime!r}")
        return Record(task, dict(schedule), times, statistics.median(times), dict(toolchain), date, source, note,
                      regime)

    def to_json(self) -> dict[str, Any]:
        regime = {"regime": self.regime} if self.regime else {}  # burst records stay as they were written
        return {
            "task": self.task.to_json(),
            "schedule": self.schedule,
            "times_ms": list(self.times_ms),
            "median_ms": self.median_ms,
            "toolchain": self.toolchain,
            "date": self.date,
            "source": self.source,
            "note": self.note,
            **regime,
        }

    @staticmethod
    def from_json(d: Any) -> Record:
        """The record a parsed JSON line holds; ValueError (or TaskError) naming the field at fault."""
        if not isinstance(d, dict):
            kind = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}
            raise ValueError(f"not a record: {kind.get(type(d), 'null')}, not a JSON object")
        missing = [k for k in ("task", "schedule", "times_ms", "median_ms", "toolchain", "date") if k not in d]
        if missing:
            raise ValueError(f"not a record: missing field {missing[0]!r}")
        bad = _field_problem(d)
        if bad:
            raise ValueError(f"not a record: {bad}")
        if d.get("regime", "") not in REGIMES:
            raise ValueError(f"not a record: regime must be one of {REGIMES}, got {d.get('regime')!r}")
        return Record(
            task_from_json(d["task"]),
            dict(d["schedule"]),
            tuple(float(x) for x in d["times_ms"]),
            float(d["median_ms"]),
            dict(d["toolchain"]),
            d["date"],
            d.get("source", ""),
            d.get("note", ""),
            d.get("regime", ""),
        )


def _is_number(v: Any) -> bool:
    return type(v) in (int, float)


def _field_problem(d: Mapping[str, Any]) -> str | None:
    """The first field of a record object whose value is not of its type, as ``field=value: rule``."""
    checks = (
        ("schedule", lambda v: isinstance(v, dict) and all(isinstance(k, str) and type(x) is int
                                                           for k, x in v.items()),
         "an object of knob -> integer"),
        ("times_ms", lambda v: isinstance(v, list) and v and all(_is_number(x) for x in v),
         "a non-empty list of numbers"),
        ("median_ms", lambda v: _is_number(v) and not v <= 0, "a positive number"),
        ("toolchain", lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
         "an object of strings"),
        ("date", lambda v: isinstance(v, str), "a string"),
        ("source", lambda v: isinstance(v, str), "a string"),
        ("note", lambda v: isinstance(v, str), "a string"),
    )
    for key, ok, rule in checks:
        if key in d and not ok(d[key]):
            return f"{key}={_short(d[key])} must be {rule}"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class Database:
    """The records of one target, indexed by task key. Empty (not an error) when the target has
    no folder yet."""

    root: Path
    target: str
    records: list[Record] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    _by_key: dict[str, list[Record]] = field(default_factory=dict, repr=False)

    @staticmethod
    def load(root: Path | str, target: str) -> Database:
        """Every record under ``root/target/*.jsonl``; ValueError for a target with no database."""
        if target in NO_DATABASE:
            raise ValueError(f"target {target!r} has no tuning database")
        db = Database(Path(root), target)
        folder = db.root / target
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            data = _read_regular(path)
            if data is None:
                db.problems.append(f"{path}: not a regular file")
                continue
            for n, raw in enumerate(data.splitlines(), 1):
                if not raw.strip():
                    continue
                try:
                    record = Record.from_json(json.loads(raw.decode("utf-8")))
                    parse_schedule(record.task.template, record.schedule)
                except (ValueError, TaskError, RecursionError) as e:  # JSON, UTF-8 and schedule errors too
                    why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
                    db.problems.append(f"{path}:{n}: {why}")
                    continue
                db._index(record)
        return db

    def problem_lines(self, shown: int = 5) -> list[str]:
        """The lines refused on reading, for a progress report: their count, then the first
        ``shown`` of them (file:line: reason) and how many more."""
        if not self.problems:
            return []
        total = len(self.problems) + len(self.records)
        lines = [f"tuning database: skipped {len(self.problems)} of {total} records"]
        lines += [f"tuning database: skipped {p}" for p in self.problems[:shown]]
        if len(self.problems) > shown:
            lines.append(f"tuning database: ... and {len(self.problems) - shown} more")
        return lines

    def best(self, task: AnyTask) -> tuple[Any, Record] | None:
        """(schedule, record) of the fastest valid record of ``task``, or None: of the records
        within ``TIE`` of the fastest, the one with the fewest optional knobs on, then the fastest,
        then the earliest. The schedule is its family's own schedule type."""
        valid: list[tuple[Any, Record]] = []
        for rec in self._by_key.get(task.key, []):
            if not math.isfinite(rec.median_ms):
                continue
            try:
                sched = parse_schedule(task.template, rec.schedule)
            except (ScheduleError, TypeError):
                continue  # the template no longer accepts it: ignored, never fatal
            if family(task.template).record_fits(task, sched) is None:
                valid.append((sched, rec))
        if any(rec.regime == "sustained" for _, rec in valid):
            valid = [p for p in valid if p[1].regime == "sustained"]
        if not valid:
            return None
        fastest = min(rec.median_ms for _, rec in valid)
        near = [p for p in valid if p[1].median_ms <= fastest * (1 + TIE)]
        return min(near, key=lambda p: (knobs_on(p[1].schedule), p[1].median_ms))

    def append(self, record: Record) -> Path:
        """Appends ``record`` as one line of ``root/target/<template>.jsonl`` (created if need be):
        one write under an exclusive lock, after a newline if a torn line left none. Refuses a
        record whose schedule its template rejects or whose median is not a positive number."""
        parse_schedule(record.task.template, record.schedule)
        if not (math.isfinite(record.median_ms) and record.median_ms > 0):
            raise ValueError(f"median_ms must be a positive number, got {record.median_ms}")
        path = self.root / self.target / f"{record.task.template}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record.to_json(), sort_keys=True) + "\n"
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            _lock(fd)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = "\n" + line
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)  # closing releases the lock
        self._index(record)
        return path

    def _index(self, record: Record) -> None:
        self.records.append(record)
        self._by_key.setdefault(record.task.key, []).append(record)


def _read_regular(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (opened without blocking, so a FIFO is
    refused rather than waited on), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def _lock(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # not POSIX: O_APPEND alone
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
