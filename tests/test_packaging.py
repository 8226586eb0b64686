"""The installed package: a wheel built from this checkout ships the tuning records
(``tuning_logs/``, installed as ``inferx/tuning_logs/``), so a compile from an installed copy
loads them, not the template heuristics alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A compile for the CPU on the H200's schedules loads the H200's records (``tuning_database``);
# the manifest says how many it read.
COMPILE = """
import json, sys
from pathlib import Path
import torch, transformers as T
import inferx
from inferx.runtime.artifact import load_artifact

torch.manual_seed(0)
cfg = T.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
art = inferx.compile(T.LlamaForCausalLM(cfg).eval(), target="cpu", schedules="h200", output=Path(sys.argv[1]),
                     dtype="fp32", max_seq_len=16, max_batch=1)
print(json.dumps({"inferx": inferx.__file__, "database": load_artifact(art).manifest["schedules"]["database"]}))
"""


@pytest.mark.slow
def test_installed_wheel_compiles_with_the_shipped_tuning_records(tmp_path: Path) -> None:
    # The build runs on a copy of the sources: setuptools writes build/ and *.egg-info beside
    # them, and a build/ left by an earlier build would put stale modules into the wheel.
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "wheels"), str(src)],
                   check=True, cwd=tmp_path)
    (wheel,) = (tmp_path / "wheels").glob("inferx-*.whl")
    site = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--no-compile", "--target", str(site), str(wheel)],
                   check=True, cwd=tmp_path)
    shipped = sorted(p.relative_to(site).as_posix() for p in (site / "inferx" / "tuning_logs").rglob("*.jsonl"))
    want = sorted("inferx/" + p.relative_to(ROOT).as_posix() for p in (ROOT / "tuning_logs").rglob("*.jsonl"))
    assert shipped == want and want, f"records in the wheel {shipped}; in the checkout {want}"
    # only the installed copy on the path (not the checkout: cwd is elsewhere, PYTHONPATH is the
    # install alone); the editable install's finder comes after the path
    env = dict(os.environ, PYTHONPATH=str(site))
    proc = subprocess.run([sys.executable, "-c", COMPILE, str(tmp_path / "a")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-5000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(out["inferx"]).resolve().is_relative_to(site.resolve()), out
    repro = "repro: pytest tests/test_packaging.py"
    assert out["database"] is not None and out["database"]["target"] == "h200", f"{out}; {repro}"
    assert out["database"]["records"] > 0, f"the installed compile read no tuning records: {out}; {repro}"
