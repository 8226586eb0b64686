"""``python -m tests.fuzz``: see the package docstring."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.fuzz.cases import KINDS
from tests.fuzz.harness import Result, run_cases
from tests.fuzz.seeds import build


def ci_cases() -> list[tuple[str, int]]:
    """The CI set: seeds 0.. of each kind, as many as its ``ci_cases``."""
    return [(k.name, seed) for k in KINDS.values() for seed in range(k.ci_cases)]


def spread(total: int, first: int = 0) -> list[tuple[str, int]]:
    """``total`` cases over the kinds in the proportions of the CI set, from seed ``first``."""
    weight = sum(k.ci_cases for k in KINDS.values())
    return [
        (k.name, first + s) for k in KINDS.values() if k.ci_cases for s in range(max(1, total * k.ci_cases // weight))
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    p.add_argument("--kind", choices=sorted(KINDS), action="append", help="Only this kind (repeatable).")
    p.add_argument("--seed", type=int, help="Run this one seed (of each --kind), showing tracebacks.")
    p.add_argument("--first", type=int, default=0, help="First seed (with --count or --cases).")
    p.add_argument("--count", type=int, help="Seeds per kind.")
    p.add_argument("--cases", type=int, help="Cases in all, spread over the kinds (the long mode).")
    p.add_argument("-j", "--jobs", type=int, default=2, help="Worker processes.")
    p.add_argument("--deadline", type=float, default=20.0, help="Seconds a case may take.")
    p.add_argument("--bases", type=Path, help="Build the bases here, or reuse those built here.")
    p.add_argument("--keep", help="Copy each case's input into this directory.")
    a = p.parse_args(argv)

    kinds = a.kind or [k.name for k in KINDS.values() if k.ci_cases]
    if a.seed is not None:
        todo = [(k, a.seed) for k in kinds]
    elif a.count is not None:
        todo = [(k, a.first + s) for k in kinds for s in range(a.count)]
    elif a.cases is not None:
        todo = [c for c in spread(a.cases, a.first) if c[0] in kinds]
    else:
        todo = [c for c in ci_cases() if c[0] in kinds]
    verbose = a.seed is not None
    with tempfile.TemporaryDirectory(prefix="inferx-fuzz-bases-") as tmp:
        bases = build(a.bases or Path(tmp) / "bases")
        clock = time.perf_counter()

        def show(r: Result) -> None:
            if r.status == "bad" or verbose:
                print(
                    f"{r.status}: {r.kind} seed {r.seed}: {r.detail}  [{'; '.join(r.notes)}]  {r.repro()}", flush=True
                )

        results = run_cases(
            todo, bases.root, jobs=a.jobs, deadline=a.deadline, verbose=verbose, keep=a.keep, progress=show
        )
    counts = Counter((r.kind, r.status) for r in results)
    print(f"{len(results)} cases in {time.perf_counter() - clock:.0f} s")
    slowest = sorted((r for r in results if r.status != "bad"), key=lambda r: -r.seconds)[:3]
    print("slowest: " + ", ".join(f"{r.kind} seed {r.seed} {r.seconds:.2f} s" for r in slowest))
    for k in kinds:
        spent = sum(r.seconds for r in results if r.kind == k)
        print(f"  {k:14} " + "  ".join(f"{s} {counts[(k, s)]}" for s in ("ok", "clean", "bad")) + f"  ({spent:.0f} s)")
    return 1 if any(r.status == "bad" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
