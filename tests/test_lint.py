"""The code passes ruff (the linter CI and developers use) and mypy."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    assert ruff, "ruff is not installed: run the README's set-up command"
    proc = subprocess.run([ruff, "check", "--output-format", "concise", "inferx", "tests"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-5000:]


@pytest.mark.slow
def test_mypy_clean() -> None:
    """The package type-checks (settings in pyproject.toml's [tool.mypy])."""
    proc = subprocess.run([sys.executable, "-m", "mypy", "inferx"], cwd=ROOT, capture_output=True, text=True)
    assert "No module named mypy" not in proc.stderr, "mypy is not installed: run the README's set-up command"
    assert proc.returncode == 0, proc.stdout[-5000:]
