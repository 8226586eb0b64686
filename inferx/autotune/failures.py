"""Failed candidates, beside the tuning database: ``<root>/<target>/failed/<template>.jsonl``.

The database keeps only finite times; a schedule that failed to build or run is kept here so a
resumed run does not measure it again. A line is ``{"task", "schedule", "error", "runner",
"toolchain", "date"}``; it counts only for the runner that wrote it (a replay's "not recorded"
says nothing about the GPU). Append-only; unreadable lines are skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from inferx.autotune.space import schedule_key
from inferx.compiler.database import task_from_json
from inferx.compiler.families.interface import AnyTask


@dataclass
class FailureLog:
    root: Path
    target: str
    _seen: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict, repr=False)

    def path(self, template: str) -> Path:
        return self.root / self.target / "failed" / f"{template}.jsonl"

    def load(self, template: str | None = None) -> FailureLog:
        """Reads what is on disk (for ``template``; None: every template's file) into the log;
        returns the log."""
        paths = [self.path(template)] if template else sorted((self.root / self.target / "failed").glob("*.jsonl"))
        for path in (p for p in paths if p.is_file()):
            for line in path.read_text().splitlines():
                try:
                    d = json.loads(line)
                    task = task_from_json(d["task"])
                    self._seen.setdefault((task.key, schedule_key(d["schedule"])), {})[d["runner"]] = d["error"]
                except (ValueError, KeyError, TypeError):
                    continue
        return self

    def failed(self, task: AnyTask, runner: str) -> dict[str, str]:
        """schedule key -> error, of the schedules of ``task`` that failed under ``runner``."""
        return {sk: by[runner] for (tk, sk), by in self._seen.items() if tk == task.key and runner in by}

    def append(self, task: AnyTask, schedule: dict[str, int], error: str, runner: str,
               toolchain: dict[str, str], date: str) -> None:
        path = self.path(task.template)
        path.parent.mkdir(parents=True, exist_ok=True)
        line = {"task": task.to_json(), "schedule": schedule, "error": error, "runner": runner,
                "toolchain": toolchain, "date": date}
        with path.open("a") as f:
            f.write(json.dumps(line, sort_keys=True) + "\n")
        self._seen.setdefault((task.key, schedule_key(schedule)), {})[runner] = error
