"""The fuzzed kinds of input: for each, how a seed makes a mutated input from a base (``make``)
and which of InferX's entry points reads it (``run``): ``artifacts``, ``checkpoints``, and here IR
text and tuning records. Outcomes are classified in ``outcome``."""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tests.fuzz.artifacts import make_artifact_dir, make_artifact_ixa, make_manifest, run_artifact
from tests.fuzz.checkpoints import make_config, make_gguf, make_index, make_safetensors, run_checkpoint
from tests.fuzz.mutators import expand_deep, mutate_bytes, mutate_json, mutate_text
from tests.fuzz.outcome import Case, Outcome, call, cli, runtime_errors, tune_errors
from tests.fuzz.seeds import Bases, ir_chunks, tuning_tasks

# --- IR text, tuning records ----------------------------------------------------------------


@cache
def _chunks() -> list[Any]:
    return ir_chunks()


def make_ir(rng: random.Random, bases: Bases, d: Path) -> Case:
    """A filecheck module with token-level mutations (or nesting, repetition, huge numbers),
    given to ``inferx opt`` with its file's pipeline."""
    valid = [c for c in _chunks() if "invalid" not in c.name and "/cli/" not in c.name]
    chunk = rng.choice(valid if rng.random() < 0.75 else _chunks())
    text, notes = mutate_text(rng, chunk.text)
    target = d / "in.mlir"
    target.write_text(text, encoding="utf-8", errors="surrogatepass")
    args = ("-p", chunk.pipeline) if chunk.pipeline else ()
    return Case("ir", 0, d, target, [chunk.name, *notes], args=args)


def run_ir(case: Case) -> Outcome:
    return cli(["opt", str(case.target), *case.args, "-o", str(case.dir / "out.mlir")])


def make_tuning(rng: random.Random, bases: Bases, d: Path) -> Case:
    """A tuning database whose records (.jsonl lines) are mutated, or whose files are not
    regular files."""
    root = d / "tuning"
    shutil.copytree(bases.tuning, root)
    case = Case("tuning", 0, d, root)
    path = rng.choice(sorted((root / "h200").glob("*.jsonl")))
    lines = path.read_bytes().splitlines()
    i = rng.randrange(len(lines))
    op = rng.random()
    if op < 0.7:
        record, notes = mutate_json(rng, json.loads(lines[i]))
        lines[i] = expand_deep(json.dumps(record, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        case.notes += [f"{path.name}:{i + 1} {n}" for n in notes]
    elif op < 0.85:
        lines[i], note = mutate_bytes(rng, lines[i])
        case.notes.append(f"{path.name}:{i + 1}: {note}")
    elif op < 0.93:
        lines[i] = rng.choice((b"[]", b'"x"', b"1", b"null", b"[" * 100000, b"{}", b"\xff"))
        case.notes.append(f"{path.name}:{i + 1} -> {lines[i][:20]!r}")
    else:
        path.unlink()
        what = rng.choice(("fifo", "dir", "symlink"))
        if what == "fifo":
            os.mkfifo(path)
        elif what == "dir":
            path.mkdir()
        else:
            path.symlink_to("/dev/zero")
        case.notes.append(f"{path.name} is a {what}")
        return case
    path.write_bytes(b"\n".join(lines) + b"\n")
    return case


@cache
def _base_tasks(bases: Bases) -> list[Any]:
    from inferx.compiler.database import task_from_json

    return [task_from_json(t) for t in tuning_tasks(bases)]


def run_tuning(case: Case, bases: Bases) -> Outcome:
    """``Database.load`` as compiling and tuning read it, then the best record of every task."""
    from inferx.compiler.database import Database

    def read() -> None:
        db = Database.load(case.target, "h200")
        for task in [*_base_tasks(bases), *(r.task for r in db.records)]:
            db.best(task)
        db.problem_lines()

    outcome, _ = call(read, tune_errors())
    return outcome


# --- the harness's own check ----------------------------------------------------------------

SELFTEST = ("ok", "clean", "KeyError", "empty message", "touch", "hang", "crash")


def make_selftest(rng: random.Random, bases: Bases, d: Path) -> Case:
    """Not an input: seed i behaves as ``SELFTEST[i]`` says, so tests see each outcome classified."""
    return Case("selftest", 0, d, d)


def run_selftest(case: Case, bases: Bases) -> Outcome:
    from inferx.runtime.artifact import ArtifactError

    what = SELFTEST[case.seed % len(SELFTEST)]

    def act() -> None:
        if what == "clean":
            raise ArtifactError("selftest: a clean error")
        if what == "KeyError":
            raise KeyError("selftest")
        if what == "empty message":
            raise ArtifactError("")
        if what == "touch":
            (Path(os.environ["HOME"]) / "selftest-touched").write_text("x")
        if what == "hang":
            while True:
                pass
        if what == "crash":
            import ctypes

            ctypes.string_at(0)

    outcome, _ = call(act, runtime_errors())
    return outcome


# --- the registry ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    name: str
    make: Callable[[random.Random, Bases, Path], Case]
    run: Callable[[Case, Bases], Outcome]
    ci_cases: int  # cases of this kind in the CI run


KINDS = {
    k.name: k
    for k in (
        Kind("manifest", make_manifest, lambda c, b: run_artifact(c), 200),
        Kind("artifact-dir", make_artifact_dir, lambda c, b: run_artifact(c), 125),
        Kind("artifact-ixa", make_artifact_ixa, lambda c, b: run_artifact(c), 125),
        Kind("config", make_config, lambda c, b: run_checkpoint(c), 350),
        Kind("safetensors", make_safetensors, lambda c, b: run_checkpoint(c), 350),
        Kind("index", make_index, lambda c, b: run_checkpoint(c), 175),
        Kind("gguf", make_gguf, lambda c, b: run_checkpoint(c), 350),
        Kind("ir", make_ir, lambda c, b: run_ir(c), 500),
        Kind("tuning", make_tuning, run_tuning, 350),
        Kind("selftest", make_selftest, run_selftest, 0),
    )
}


def make(kind: str, seed: int, bases: Bases, d: Path) -> Case:
    """The case ``seed`` of ``kind``, written under ``d``."""
    rng = random.Random(f"{kind}:{seed}")
    case = KINDS[kind].make(rng, bases, d)
    case.kind, case.seed = kind, seed
    return case
