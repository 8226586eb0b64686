"""Runs the IR text tests (tests/filecheck, lit + filecheck) as one pytest test."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent / "filecheck"


def test_lit_filecheck_suite() -> None:
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    lit = shutil.which("lit", path=env["PATH"])
    assert lit, "lit is not installed: run the README's set-up command"
    tests = sorted(HERE.rglob("*.mlir"))
    assert len(tests) >= 10, f"expected the IR test files under {HERE}, found {len(tests)}"
    proc = subprocess.run([lit, "-sv", str(HERE)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-20000:] + proc.stderr[-5000:]
