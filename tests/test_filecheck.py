"""Runs the IR text tests (tests/filecheck, lit + filecheck) through lit: all of them as one
pytest test, and the first test file of each folder as another (the fast tier's)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "filecheck"


def _lit(*paths: Path) -> None:
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    lit = shutil.which("lit", path=env["PATH"])
    assert lit, "lit is not installed: run the README's set-up command"
    proc = subprocess.run([lit, "-sv", *map(str, paths)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-20000:] + proc.stderr[-5000:]


@pytest.mark.slow
def test_lit_filecheck_suite() -> None:
    tests = sorted(HERE.rglob("*.mlir"))
    assert len(tests) >= 10, f"expected the IR test files under {HERE}, found {len(tests)}"
    _lit(HERE)


def test_lit_filecheck_one_of_each_folder() -> None:
    firsts = {}
    for path in sorted(HERE.rglob("*.mlir")):
        firsts.setdefault(path.parent, path)
    assert len(firsts) >= 3, f"expected folders of IR test files under {HERE}, found {sorted(firsts)}"
    _lit(*firsts.values())
