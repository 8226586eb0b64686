"""The compiler's output is pinned: kernel sources, cubins, weight files and launch plans of every
golden case (``tests/golden.py``) hash to the recorded digests. A change that alters generated
code on purpose records them again (``python tests/golden.py record``) and says why."""

from __future__ import annotations

import json

import golden
import pytest

CASES = [c for c in golden.cases() if not c.big]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_artifact_matches_its_golden_digest(case: golden.GoldenCase) -> None:
    want = json.loads(golden.GOLDEN.read_text())[case.name]
    (name, got), = golden.compute([case])
    diff = golden.compare(want, got)
    assert not diff, f"{name}: {len(diff)} digests differ:\n" + "\n".join(diff[:20]) + \
        f"\nrepro: python tests/golden.py check --only {name}"
