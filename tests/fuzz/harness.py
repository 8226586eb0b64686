"""Running cases: worker processes and the parent that watches them.

A worker (``python -m tests.fuzz.harness``) gets its cases as one JSON line on stdin and answers
one JSON line per case on its stdout: ``start`` before the case, then its outcome. It runs with
HOME, XDG_CACHE_HOME and TMPDIR in a sandbox of its own (the kernel cache, under TMPDIR, too),
its working directory in it, an address-space limit, and a deadline per case (SIGALRM). Each
case's input is written to its own directory, removed after the case. Before and after every
case the worker lists the sandbox (but the case's directory and the kernel cache) and the bases:
any file created, changed or removed there is a bad outcome.

The parent reads the workers' lines with a deadline of its own: a worker that dies (a segfault,
an abort, the memory limit) or says nothing past the deadline (a hang in C code, where SIGALRM
cannot reach) is killed, its case is bad, attributed to the seed it had started, and a new
worker takes the remaining cases."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 6 << 30  # address space of a worker: torch and the interpreter need about 3 GiB


@dataclass(frozen=True)
class Result:
    kind: str
    seed: int
    status: str  # ok, clean, bad
    detail: str
    notes: tuple[str, ...] = ()
    seconds: float = 0.0

    def repro(self) -> str:
        return f"python -m tests.fuzz --kind {self.kind} --seed {self.seed}"


class Deadline(BaseException):
    """A case ran past its deadline (a BaseException: no ``except Exception`` swallows it)."""


# --- the worker -----------------------------------------------------------------------------


def _listing(root: Path, skip: Sequence[Path]) -> dict[str, tuple[int, int, int]]:
    """{path: (mode, size, mtime)} of everything under ``root`` but ``skip`` (iteratively)."""
    out: dict[str, tuple[int, int, int]] = {}
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            p = Path(e.path)
            if p in skip:
                continue
            st = e.stat(follow_symlinks=False)
            out[e.path] = (st.st_mode, st.st_size, st.st_mtime_ns)
            if e.is_dir(follow_symlinks=False):
                stack.append(p)
    return out


def _changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    created = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(
        p for p in set(before) & set(after) if before[p] != after[p] and not _dir_time_only(before[p], after[p])
    )
    return [f"created {p}" for p in created] + [f"removed {p}" for p in removed] + [f"changed {p}" for p in changed]


def _dir_time_only(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    """A directory whose entries came and went (its mtime moved): the entries themselves show."""
    import stat

    return stat.S_ISDIR(a[0]) and stat.S_ISDIR(b[0]) and a[0] == b[0]


def _on_alarm(signum: int, frame: Any) -> None:
    raise Deadline


def worker_main() -> None:
    """Runs the cases of the JSON line on stdin (see the module docstring)."""
    job = json.loads(sys.stdin.readline())
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what InferX prints goes to stderr, not into the protocol
    import faulthandler
    import resource

    faulthandler.enable()
    limit = job.get("memory", MEMORY_LIMIT)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ["HF_HUB_OFFLINE"] = "1"
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))

    from tests.fuzz import cases
    from tests.fuzz.seeds import Bases

    bases = Bases(Path(job["bases"]))
    sandbox = Path(job["sandbox"])
    case_root = sandbox / "cases"
    from inferx.runtime.triton_kernels import CACHE  # under the sandbox's TMPDIR

    skip = [case_root, CACHE]
    verbose = job.get("verbose", False)
    keep = job.get("keep")
    signal.signal(signal.SIGALRM, _on_alarm)
    _warm_up(bases, case_root)
    for kind, seed in job["cases"]:
        out.write(json.dumps({"start": [kind, seed]}) + "\n")
        before = _listing(sandbox, skip), _listing(bases.root, [])
        d = case_root / f"{kind}-{seed}"
        d.mkdir(parents=True)
        notes: list[str] = []
        clock = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, job["deadline"])
        try:
            case = cases.make(kind, seed, bases, d)
            notes = case.notes
            if keep:
                _keep(case, Path(keep))
            outcome = cases.KINDS[kind].run(case, bases)
        except Deadline:
            outcome = cases.Outcome("bad", f"hang: past the {job['deadline']} s deadline")
            if verbose:
                traceback.print_exc()
        except Exception as e:  # noqa: BLE001 - a case the fuzzer itself could not make or run
            outcome = cases.Outcome("bad", f"harness: {type(e).__name__}: {e}")
            traceback.print_exc()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        seconds = time.perf_counter() - clock
        touched = _changes(before[0], _listing(sandbox, skip)) + _changes(before[1], _listing(bases.root, []))
        if touched:
            outcome = cases.Outcome("bad", f"touched outside the case: {'; '.join(touched[:3])}")
            _restore(sandbox, before[0], skip)
        if verbose and outcome.status != "ok":
            _explain(kind, seed, bases, case_root, job["deadline"])
        shutil.rmtree(d, ignore_errors=True)
        out.write(
            json.dumps(
                {
                    "kind": kind,
                    "seed": seed,
                    "status": outcome.status,
                    "detail": outcome.detail,
                    "notes": notes,
                    "seconds": round(seconds, 4),
                }
            )
            + "\n"
        )


def _warm_up(bases: Any, case_root: Path) -> None:
    """Loads and runs the base artifact once, so that what the first load makes for good (the
    kernel cache, Triton's own state) is in place before the first listing."""
    import numpy as np

    import inferx

    case_root.mkdir(parents=True, exist_ok=True)
    session = inferx.load(bases.art, device="cpu")
    session.prefill(np.array([[1, 2]]))
    session.decode(np.array([[3]]))
    inferx.import_model(bases.hf)


def _restore(sandbox: Path, before: dict[str, Any], skip: Sequence[Path]) -> None:
    """Removes what a case created in the sandbox, so the next case's listing starts clean."""
    for p in sorted(set(_listing(sandbox, skip)) - set(before), reverse=True):
        path = Path(p)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _keep(case: Any, where: Path) -> None:
    where.mkdir(parents=True, exist_ok=True)
    dest = where / case.target.name
    if case.target.is_dir():
        shutil.copytree(case.target, dest, symlinks=True, dirs_exist_ok=True)
    elif case.target.is_file():
        shutil.copyfile(case.target, dest)
    print(f"input kept at {dest}", file=sys.stderr)


def _explain(kind: str, seed: int, bases: Any, case_root: Path, deadline: float) -> None:
    """Runs the case again without the harness's classification, so its traceback shows."""
    from tests.fuzz import cases
    from tests.fuzz import outcome as classification

    d = case_root / f"{kind}-{seed}-again"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    case = cases.make(kind, seed, bases, d)
    print(f"--- {kind} seed {seed}: {'; '.join(case.notes)}", file=sys.stderr)
    classification.trace = True
    signal.setitimer(signal.ITIMER_REAL, deadline)
    try:
        cases.KINDS[kind].run(case, bases)
    except BaseException:  # noqa: BLE001 - shown, not handled
        traceback.print_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        classification.trace = False
        shutil.rmtree(d, ignore_errors=True)


# --- the parent -----------------------------------------------------------------------------


def _sandbox(root: Path) -> Path:
    for sub in ("home", "cache", "tmp", "cwd", "cases"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return root


def _run_worker(
    cases: list[tuple[str, int]],
    bases: Path,
    root: Path,
    deadline: float,
    verbose: bool,
    keep: str | None,
    record: Callable[[Result], None],
) -> None:
    """Runs ``cases`` in as many worker processes as crashes and hangs make it take."""
    todo = list(cases)
    attempt = 0
    while todo:
        attempt += 1
        sandbox = _sandbox(root / f"w{attempt}")
        env = {
            **os.environ,
            "HOME": str(sandbox / "home"),
            "XDG_CACHE_HOME": str(sandbox / "cache"),
            "TMPDIR": str(sandbox / "tmp"),
            "TRITON_INTERPRET": "1",
            "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "PYTHONFAULTHANDLER": "1",
        }
        log = (root / f"w{attempt}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.harness"],
            cwd=sandbox / "cwd",
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None if verbose else log,
        )
        job = {
            "bases": str(bases),
            "sandbox": str(sandbox),
            "cases": todo,
            "deadline": deadline,
            "verbose": verbose,
            "keep": keep,
        }
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(job) + "\n").encode())
        proc.stdin.close()
        started: tuple[str, int] | None = None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        buffer = b""
        # the first case waits for the worker's imports and warm-up as well
        limit = time.monotonic() + deadline * 3 + 120
        why = ""
        while True:
            if not sel.select(timeout=max(0.0, limit - time.monotonic())):
                why = "hang: no answer past the deadline (killed)"
                break
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                why = "crash"
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                msg = json.loads(line)
                if "start" in msg:
                    started = (msg["start"][0], msg["start"][1])
                    limit = time.monotonic() + deadline * 2 + 10
                else:
                    record(
                        Result(
                            msg["kind"], msg["seed"], msg["status"], msg["detail"], tuple(msg["notes"]), msg["seconds"]
                        )
                    )
                    todo.remove((msg["kind"], msg["seed"]))
                    started = None
            if not todo:
                break
        if todo:
            proc.kill()
        code = proc.wait()
        sel.close()
        log.close()
        if not todo:
            return
        if started is None:  # died in its imports or warm-up, or between cases: no seed to blame
            tail = (root / f"w{attempt}.log").read_bytes()[-1500:].decode(errors="replace")
            raise RuntimeError(f"fuzz worker failed outside any case ({_exit(code)}; {why}):\n{tail}")
        if why == "crash":
            tail = (root / f"w{attempt}.log").read_bytes()[-600:].decode(errors="replace").strip().splitlines()
            why = f"crash: the process ended with {_exit(code)}" + (f" ({tail[-1].strip()[:200]})" if tail else "")
        kind, seed = started
        record(Result(kind, seed, "bad", why))
        todo.remove(started)
        shutil.rmtree(sandbox, ignore_errors=True)


def _exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def run_cases(
    cases: Sequence[tuple[str, int]],
    bases: Path,
    *,
    jobs: int = 1,
    deadline: float = 20.0,
    verbose: bool = False,
    keep: str | None = None,
    progress: Callable[[Result], None] | None = None,
) -> list[Result]:
    """The result of every case, run across ``jobs`` workers (interleaved), in case order."""
    results: list[Result] = []
    lock = threading.Lock()

    def record(r: Result) -> None:
        with lock:
            results.append(r)
            if progress is not None:
                progress(r)

    with tempfile.TemporaryDirectory(prefix="inferx-fuzz-") as tmp:
        shares = [list(cases[i::jobs]) for i in range(jobs)]
        threads = [
            threading.Thread(
                target=_run_worker, args=(share, bases, Path(tmp) / f"j{i}", deadline, verbose, keep, record)
            )
            for i, share in enumerate(shares)
            if share
        ]
        errors: list[BaseException] = []

        def guarded(t: threading.Thread) -> None:
            try:
                t.run()
            except BaseException as e:  # noqa: BLE001 - raised in the caller's thread below
                errors.append(e)

        runners = [threading.Thread(target=guarded, args=(t,)) for t in threads]
        for t in runners:
            t.start()
        for t in runners:
            t.join()
        if errors:
            raise errors[0]
    order = {c: i for i, c in enumerate(cases)}
    return sorted(results, key=lambda r: order[(r.kind, r.seed)])


if __name__ == "__main__":
    worker_main()
