"""The fuzzing suite in CI (tests/fuzz): the CI set of seeded cases (over 2,500: artifacts in both
forms, manifests, config.json, safetensors headers, shard indexes, GGUF metadata, IR text and
tuning records) must each end ok or in a clean error: never in another exception, a wrong result,
a refused input accepted, a hang, a crash or a file touched outside the case. Each bad case is
listed with its one-line repro (``python -m tests.fuzz --kind K --seed N``); the longer mode is in
the package's docstring.

The CI set runs as one test, so that pytest-xdist gives it to one worker: its cases are spread
over ``JOBS`` processes of the suite's own.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from tests.fuzz.__main__ import ci_cases
from tests.fuzz.cases import SELFTEST
from tests.fuzz.harness import Result, run_cases
from tests.fuzz.seeds import build

# A case takes well under a second (the slowest, an artifact loaded and run in Triton's
# interpreter, about 1 s on a busy machine): 10 s marks a hang without waiting long on one.
DEADLINE = 10.0
JOBS = max(1, min(2, os.cpu_count() or 1))


def _line(r: Result) -> str:
    return f"{r.kind} seed {r.seed}: {r.detail}  [{'; '.join(r.notes)[:300]}]\n    repro: {r.repro()}"


@pytest.mark.thorough  # minutes on two cores: outside CI's run
def test_the_ci_set_ends_ok_or_in_clean_errors(tmp_path: Path) -> None:
    results = run_cases(ci_cases(), build(tmp_path / "bases").root, jobs=JOBS, deadline=DEADLINE)
    assert len(results) >= 2500
    bad = [r for r in results if r.status == "bad"]
    assert not bad, f"{len(bad)} bad cases:\n" + "\n".join(_line(r) for r in bad[:40])
    counts = Counter((r.kind, r.status) for r in results)
    # every kind reaches past its checks to a valid result, and (but the tuning database, which
    # skips and reports a bad record rather than failing) to clean errors
    for kind in {r.kind for r in results}:
        assert counts[(kind, "ok")] > 0, f"{kind}: {counts}"
        assert kind == "tuning" or counts[(kind, "clean")] > 0, f"{kind}: {counts}"


@pytest.mark.slow  # a few seconds: CI runs it, the fast tier does not
def test_the_harness_classifies_each_outcome(tmp_path: Path) -> None:
    """An error of the CLI's types is clean, another exception or an empty message bad, a file
    touched in $HOME bad, a hang and a segfault bad and attributed to their seed."""
    bases = build(tmp_path / "bases")
    cases = [("selftest", i) for i in range(len(SELFTEST))]
    got = {r.seed: r for r in run_cases(cases, bases.root, deadline=2.0)}
    want = {"ok": "ok", "clean": "clean"}
    for i, what in enumerate(SELFTEST):
        assert got[i].status == want.get(what, "bad"), (what, got[i])
    assert got[SELFTEST.index("KeyError")].detail.startswith("KeyError")
    assert "touched outside the case" in got[SELFTEST.index("touch")].detail
    assert got[SELFTEST.index("hang")].detail.startswith("hang")
    assert "SIGSEGV" in got[SELFTEST.index("crash")].detail
