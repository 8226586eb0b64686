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
burst's, so the two are never compared. Lines that do not
parse are skipped and listed in ``problems`` (file:line: reason), so a torn last line never
stops a compile. Targets are device names ("h200", "h100"); "cpu" has no
database: GPU measurements say nothing about Triton's interpreter.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import inferx
from inferx.autotune.task import AnyTask, TaskError, task_from_json
from inferx.compiler.codegen.attention import AttentionSchedule
from inferx.compiler.codegen.attention_o import AttentionOSchedule
from inferx.compiler.codegen.gemm import GEMV_MAX_ROWS, GemmSchedule
from inferx.compiler.codegen.mlp import MlpSchedule

_PACKAGE = Path(inferx.__file__).resolve().parent

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


# Optional knobs and the value that means "off"
OPTIONAL_KNOBS = {"split_k": 1, "tma": 0, "persistent": 0, "group_m": 0, "unroll": 0, "defer": 0}


def knobs_on(schedule: Mapping[str, Any]) -> int:
    """How many optional knobs a stored schedule turns on."""
    return sum(1 for k, off in OPTIONAL_KNOBS.items() if schedule.get(k, off) != off)


def _default_root() -> Path:
    """``tuning_logs/`` shipped with the package: inside it when installed with its data, beside
    it (the repository's top level) in a source checkout or editable install."""
    for root in (_PACKAGE / "tuning_logs", _PACKAGE.parent / "tuning_logs"):
        if root.is_dir():
            return root
    return _PACKAGE.parent / "tuning_logs"


DEFAULT_ROOT = _default_root()
NO_DATABASE = frozenset({"cpu"})


class ScheduleError(ValueError):
    """A schedule dict its template does not accept; the message says which rule it breaks."""


def _pow2(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and v & (v - 1) == 0


def gemm_schedule(d: Mapping[str, Any]) -> GemmSchedule:
    """The GemmSchedule a record's schedule dict names; ScheduleError if the template would not
    accept it: the fields bm, bn, bk, num_warps, num_stages and optionally split_k, tma and
    persistent; tile sizes powers of two; BM <= 8 (GEMV mode) or every tile dim >= 16 (tl.dot's
    minimum); 1, 2, 4, 8 or 16 warps; 1 to 8 stages; split_k a power of two up to 16, above 1 only
    on the dot path; tma 0 or 1, 1 only on the dot path with tile dims up to 256 (a TMA box's
    limit); persistent 0, 1 or 2 (programs per SM), on the dot path without split-K; group_m 0 or
    a power of two up to 64 (row tiles per group), on the dot path; unroll 0 or 1, 1 only in GEMV
    mode (the dot path's loop is Triton's to pipeline); defer 0 or 1, 1 only in GEMV mode at BM 1."""
    want = {"bm", "bn", "bk", "num_warps", "num_stages"}
    optional = set(OPTIONAL_KNOBS)
    if not want <= set(d) or set(d) - want - optional:
        raise ScheduleError(
            f"gemm schedule fields must be {sorted(want)} (and optionally {', '.join(sorted(optional))}), "
            f"got {sorted(d)}")
    s = GemmSchedule(**{k: d[k] for k in want}, split_k=d.get("split_k", 1), tma=d.get("tma", 0),
                     persistent=d.get("persistent", 0), group_m=d.get("group_m", 0), unroll=d.get("unroll", 0),
                     defer=d.get("defer", 0))
    if not (_pow2(s.split_k) and s.split_k <= 16):
        raise ScheduleError(f"split_k must be a power of two up to 16: {s}")
    if s.split_k > 1 and s.gemv:
        raise ScheduleError(f"split-K runs on the dot path (BM >= 16), not in GEMV mode: {s}")
    if s.tma not in (0, 1):
        raise ScheduleError(f"tma must be 0 or 1: {s}")
    if s.tma and (s.gemv or max(s.bm, s.bn, s.bk) > 256):
        raise ScheduleError(f"TMA loads run on the dot path with tile dims up to 256: {s}")
    if s.persistent not in (0, 1, 2):
        raise ScheduleError(f"persistent must be 0, 1 or 2 (programs per SM): {s}")
    if s.persistent and (s.gemv or s.split_k > 1):
        raise ScheduleError(f"a persistent grid runs on the dot path without split-K: {s}")
    if s.group_m and not (_pow2(s.group_m) and s.group_m <= 64):
        raise ScheduleError(f"group_m must be 0 or a power of two up to 64: {s}")
    if s.group_m and s.gemv:
        raise ScheduleError(f"a grouped tile order runs on the dot path (BM >= 16), not in GEMV mode: {s}")
    if s.unroll not in (0, 1) or (s.unroll and not s.gemv):
        raise ScheduleError(f"unroll must be 0 or 1, and 1 only in GEMV mode (BM <= {GEMV_MAX_ROWS}): {s}")
    if s.defer not in (0, 1) or (s.defer and not (s.gemv and s.bm == 1)):
        raise ScheduleError(f"defer must be 0 or 1, and 1 only in GEMV mode at BM 1: {s}")
    if not all(_pow2(v) for v in (s.bm, s.bn, s.bk)):
        raise ScheduleError(f"tile sizes must be powers of two: {s}")
    if not s.gemv and min(s.bm, s.bn, s.bk) < 16:
        raise ScheduleError(f"the dot path needs BM, BN, BK >= 16 (or BM <= {GEMV_MAX_ROWS} for GEMV mode): {s}")
    if s.num_warps not in (1, 2, 4, 8, 16):
        raise ScheduleError(f"num_warps must be 1, 2, 4, 8 or 16: {s}")
    if not (isinstance(s.num_stages, int) and 1 <= s.num_stages <= 16):
        raise ScheduleError(f"num_stages must be 1..16: {s}")
    return s


def attention_schedule(d: Mapping[str, Any]) -> AttentionSchedule:
    """The AttentionSchedule a record's schedule dict names; ScheduleError if the template would
    not accept it: exactly the fields splits, bn, num_warps, num_stages (decode) or bm, bn,
    num_warps, num_stages (prefill); BN and BM powers of two from 16 (tl.dot's minimum) to 256;
    SPLITS a power of two from 1 to 256 (the decode kernel's last-arrival test masks its
    ever-growing counter with SPLITS - 1, so any other count would merge at the wrong arrival);
    1, 2, 4, 8 or 16 warps; 1 to 8 stages."""
    common = {"bn", "num_warps", "num_stages"}
    if set(d) not in (common | {"splits"}, common | {"bm"}):
        raise ScheduleError(f"attention schedule fields must be {sorted(common | {'splits'})} (decode) or "
                            f"{sorted(common | {'bm'})} (prefill), got {sorted(d)}")
    s = AttentionSchedule(**{k: d[k] for k in d})
    for knob in ("bm", "bn") if "bm" in d else ("bn",):
        v = getattr(s, knob)
        if not (_pow2(v) and 16 <= v <= 256):
            raise ScheduleError(f"{knob.upper()} must be a power of two from 16 to 256: {s}")
    if "splits" in d and not (_pow2(s.splits) and s.splits <= 256):
        raise ScheduleError(f"SPLITS must be a power of two from 1 to 256 (the arrival test masks with "
                            f"SPLITS - 1): {s}")
    if s.num_warps not in (1, 2, 4, 8, 16):
        raise ScheduleError(f"num_warps must be 1, 2, 4, 8 or 16: {s}")
    if not (isinstance(s.num_stages, int) and not isinstance(s.num_stages, bool) and 1 <= s.num_stages <= 8):
        raise ScheduleError(f"num_stages must be 1..8: {s}")
    return s


def mlp_schedule(d: Mapping[str, Any]) -> MlpSchedule:
    """The MlpSchedule a record's schedule dict names; ScheduleError if the template would not
    accept it: exactly the fields bm, bi, bk, bn, num_warps, num_stages, prefetch, dot, defer; BM
    a power of two up to 8 (all of a bucket's rows in a program); BI, BK, BN powers of two from 16
    to 1024; 1, 2, 4, 8 or 16 warps; 1 to 8 stages; prefetch, dot and defer 0 or 1; not prefetch
    with dot (the dot form's loads are pipelined by its stages); defer only at BM 1 without dot."""
    want = {"bm", "bi", "bk", "bn", "num_warps", "num_stages", "prefetch", "dot", "defer"}
    if set(d) != want:
        raise ScheduleError(f"mlp schedule fields must be {sorted(want)}, got {sorted(d)}")
    s = MlpSchedule(**{k: d[k] for k in want})
    if not (_pow2(s.bm) and s.bm <= GEMV_MAX_ROWS):
        raise ScheduleError(f"BM must be a power of two up to {GEMV_MAX_ROWS}: {s}")
    for knob in ("bi", "bk", "bn"):
        v = getattr(s, knob)
        if not (_pow2(v) and 16 <= v <= 1024):
            raise ScheduleError(f"{knob.upper()} must be a power of two from 16 to 1024: {s}")
    if s.num_warps not in (1, 2, 4, 8, 16):
        raise ScheduleError(f"num_warps must be 1, 2, 4, 8 or 16: {s}")
    if not (isinstance(s.num_stages, int) and not isinstance(s.num_stages, bool) and 1 <= s.num_stages <= 8):
        raise ScheduleError(f"num_stages must be 1..8: {s}")
    for knob in ("prefetch", "dot", "defer"):
        v = getattr(s, knob)
        if v not in (0, 1) or isinstance(v, bool):
            raise ScheduleError(f"{knob} must be 0 or 1: {s}")
    if s.prefetch and s.dot:
        raise ScheduleError(f"prefetch and dot exclude each other (the dot form pipelines its loads): {s}")
    if s.defer and (s.bm != 1 or s.dot):
        raise ScheduleError(f"deferred reductions are generated at BM 1 without dot: {s}")
    return s


def attention_o_schedule(d: Mapping[str, Any]) -> AttentionOSchedule:
    """The AttentionOSchedule a record's schedule dict names; ScheduleError if the template would
    not accept it: exactly the fields bn, bno, tiles, num_warps, num_stages; BN (keys a step) a
    power of two from 16 (tl.dot's minimum) to 256; BNO a power of two from 8 to 512; TILES a
    power of two up to 64; 1, 2, 4, 8 or 16 warps; 1 to 8 stages."""
    want = {"bn", "bno", "tiles", "num_warps", "num_stages"}
    if set(d) != want:
        raise ScheduleError(f"attention_o schedule fields must be {sorted(want)}, got {sorted(d)}")
    s = AttentionOSchedule(**{k: d[k] for k in want})
    for knob, lo, hi in (("bn", 16, 256), ("bno", 8, 512), ("tiles", 1, 64)):
        v = getattr(s, knob)
        if not (_pow2(v) and lo <= v <= hi):
            raise ScheduleError(f"{knob.upper()} must be a power of two from {lo} to {hi}: {s}")
    if s.num_warps not in (1, 2, 4, 8, 16):
        raise ScheduleError(f"num_warps must be 1, 2, 4, 8 or 16: {s}")
    if not (isinstance(s.num_stages, int) and not isinstance(s.num_stages, bool) and 1 <= s.num_stages <= 8):
        raise ScheduleError(f"num_stages must be 1..8: {s}")
    return s


# How each template reads and checks a schedule dict.
SCHEDULE_FORMS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "gemm": gemm_schedule,
    "attention": attention_schedule,
    "mlp": mlp_schedule,
    "attention_o": attention_o_schedule,
}


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
    def from_json(d: Mapping[str, Any]) -> Record:
        if d.get("regime", "") not in REGIMES:
            raise ValueError(f"not a record: regime must be one of {REGIMES}, got {d.get('regime')!r}")
        try:
            return Record(
                task_from_json(d["task"]),
                dict(d["schedule"]),
                tuple(float(x) for x in d["times_ms"]),
                float(d["median_ms"]),
                dict(d["toolchain"]),
                str(d["date"]),
                str(d.get("source", "")),
                str(d.get("note", "")),
                str(d.get("regime", "")),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a record: missing or malformed field {e}") from None


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
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    db._index(Record.from_json(json.loads(line)))
                except (ValueError, TaskError) as e:  # JSONDecodeError is a ValueError
                    db.problems.append(f"{path}:{n}: {e}")
        return db

    def best(self, task: AnyTask) -> tuple[Any, Record] | None:
        """(schedule, record) of the fastest valid record of ``task``, or None: of the records
        within ``TIE`` of the fastest, the one with the fewest optional knobs on, then the fastest,
        then the earliest. The schedule is the template's own type (GemmSchedule for "gemm",
        AttentionSchedule for "attention")."""
        form = SCHEDULE_FORMS.get(task.template)
        valid: list[tuple[Any, Record]] = []
        for rec in self._by_key.get(task.key, []):
            if form is None or not math.isfinite(rec.median_ms):
                continue
            try:
                valid.append((form(rec.schedule), rec))
            except (ScheduleError, TypeError):
                continue  # the template no longer accepts it: ignored, never fatal
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
        form = SCHEDULE_FORMS.get(record.task.template)
        if form is None:
            raise ScheduleError(f"no schedule form for template {record.task.template!r}")
        form(record.schedule)
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


def _lock(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # not POSIX: O_APPEND alone
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
