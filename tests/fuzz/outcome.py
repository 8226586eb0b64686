"""What a case is and how its outcome is classified.

Outcomes: ``ok`` (a valid result), ``clean`` (one of the errors the CLI turns into one
``error:`` line, with a message), ``bad`` (anything else: another exception, an error with no
message, a wrong result, an input accepted that the trust model says must be refused). The
harness adds the bad outcomes it sees from outside: a hang past the deadline, a crash of the
process, a file touched outside the case's directory and the kernel cache."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any


@dataclass
class Case:
    """One mutated input: ``target`` is what the entry point is given."""

    kind: str
    seed: int
    dir: Path
    target: Path
    notes: list[str] = field(default_factory=list)
    must_refuse: str = ""  # why an ok outcome is bad: the trust model refuses this input
    load: bool = True  # artifacts: load (and run) after inspect; off where a kernel file is a canary
    args: tuple[str, ...] = ()  # ir: the CLI's arguments after the file


@dataclass(frozen=True)
class Outcome:
    status: str  # "ok", "clean" or "bad"
    detail: str


OK = Outcome("ok", "")
trace = False  # set by the harness to show the traceback of a case it runs again


# --- classification -------------------------------------------------------------------------


@cache
def compile_errors() -> tuple[type[BaseException], ...]:
    """What ``inferx compile`` turns into one ``error:`` line (the CLI's own list)."""
    from inferx.cli import UserError, _compile_errors

    return (UserError, *_compile_errors())


@cache
def runtime_errors() -> tuple[type[BaseException], ...]:
    """What ``inferx run`` and ``inferx inspect`` turn into one ``error:`` line."""
    from inferx.cli import UserError, _runtime_errors

    return (UserError, *_runtime_errors())


@cache
def tune_errors() -> tuple[type[BaseException], ...]:
    """What ``inferx tune`` turns into one ``error:`` line (it reads the tuning database)."""
    from inferx.autotune.tune import TuneError

    return (TuneError, *compile_errors())


def classify(e: BaseException, clean: tuple[type[BaseException], ...]) -> Outcome:
    if isinstance(e, clean):
        message = str(e).strip()
        if not message:
            return Outcome("bad", f"{type(e).__name__} with an empty message")
        return Outcome("clean", f"{type(e).__name__}: {_line(message)}")
    return Outcome("bad", f"{type(e).__name__}: {_line(str(e))}")


def _line(text: str) -> str:
    text = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    return text if len(text) <= 300 else text[:297] + "..."


def call(fn: Callable[[], Any], clean: tuple[type[BaseException], ...]) -> tuple[Outcome, Any]:
    """(outcome, result) of ``fn()``; Exceptions are classified, BaseExceptions (the harness's
    deadline, KeyboardInterrupt) pass through."""
    try:
        return OK, fn()
    except Exception as e:  # noqa: BLE001 - classifying every exception is the point
        if trace:
            raise
        return classify(e, clean), None


def cli(args: list[str]) -> Outcome:
    """The outcome of ``inferx ARGS`` as a user sees it: exit 0 is ok; exit 1 with a message
    holding ``error:`` and no escaped exception is clean; anything else is bad."""
    from click.testing import CliRunner

    from inferx.cli import main

    r = CliRunner().invoke(main, args)
    if trace and r.exc_info is not None and not isinstance(r.exception, SystemExit):
        raise r.exception  # type: ignore[misc]
    if trace and r.exit_code:
        print(r.stderr, file=sys.stderr)
    escaped = r.exception if r.exception is not None and not isinstance(r.exception, SystemExit) else None
    if escaped is not None:
        return Outcome("bad", f"inferx {args[0]}: {type(escaped).__name__}: {_line(str(escaped))}")
    if r.exit_code == 0:
        return OK
    err = r.stderr.strip()
    if r.exit_code == 1 and "error:" in err and "Traceback" not in err:
        return Outcome("clean", f"inferx {args[0]}: {_line(err)}")
    return Outcome("bad", f"inferx {args[0]}: exit {r.exit_code}: {_line(err)[:200]!r}")


def worst(*outcomes: Outcome) -> Outcome:
    for status in ("bad", "clean", "ok"):
        for o in outcomes:
            if o.status == status:
                return o
    return OK
