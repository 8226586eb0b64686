"""Artifact kinds: the manifest's fields (hashes fixed up), the directory form's files, the
packed form's header, padding and bytes; read by ``inferx inspect`` and ``inferx.load``."""

from __future__ import annotations

import json
import os
import random
from functools import cache
from pathlib import Path
from typing import Any

from tests.fuzz import formats
from tests.fuzz.mutators import ODD_INTS, mutate_bytes, mutate_json
from tests.fuzz.outcome import OK, Case, Outcome, call, cli, runtime_errors, worst
from tests.fuzz.seeds import Bases

# --- artifacts: directory, packed, manifest -------------------------------------------------


@cache
def _art(bases: Bases) -> tuple[dict[str, Any], dict[str, bytes]]:
    return formats.read_artifact_dir(bases.art)


def _fresh_art(bases: Bases) -> tuple[dict[str, Any], dict[str, bytes]]:
    m, files = _art(bases)
    return json.loads(json.dumps(m)), dict(files)


def canary_source(source: bytes) -> bytes:
    """A kernel source that leaves a file in $HOME when it is executed: a load that runs it where
    it must not (inspect, a failed verification) shows as a file touched outside the case."""
    marker = Path(os.environ.get("HOME", "/nonexistent")) / "CANARY-kernel-source-ran"
    return f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n".encode() + source


def _sections(m: dict[str, Any]) -> list[str]:
    return sorted(k for k in m if k not in ("files", "manifest_sha256"))


def _mutate_manifest(rng: random.Random, m: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """A mutation of the manifest's sections (or, one time in ten, of anything in it)."""
    under: tuple[Any, ...] = (rng.choice(_sections(m)),) if rng.random() < 0.9 else ()
    mm, n = mutate_json(rng, m, under=under)
    notes += [f"manifest {x}" for x in n]
    return mm


def make_manifest(rng: random.Random, bases: Bases, d: Path) -> Case:
    """A directory artifact whose manifest's fields are mutated and every hash fixed up, so the
    mutation reaches the schema and the sizes, past the sha256 checks."""
    m, files = _fresh_art(bases)
    notes: list[str] = []
    mm = _mutate_manifest(rng, m, notes)
    if not any(x.startswith("manifest files") or x.startswith("manifest root") for x in notes):
        formats.fix_file_entries(mm, files)
    target = d / "art"
    formats.write_artifact_dir(target, formats.canonical(formats.self_hashed(mm)), files)
    return Case("manifest", 0, d, target, notes)


def _weights(files: dict[str, bytes]) -> list[str]:
    return sorted(n for n in files if n.startswith("weights/"))


def _kernels(files: dict[str, bytes]) -> list[str]:
    return sorted(n for n in files if n.startswith("kernels/"))


def make_artifact_dir(rng: random.Random, bases: Bases, d: Path) -> Case:
    """A directory artifact with its files changed: weights with their hashes fixed up (a result
    or a size refused), any file without (refused), files removed, added, made symlinks, FIFOs
    or directories (refused), a kernel source that leaves a canary when it runs."""
    m, files = _fresh_art(bases)
    target = d / "art"
    case = Case("artifact-dir", 0, d, target)
    op = rng.choice(
        (
            "weight",
            "weight",
            "file",
            "manifest-bytes",
            "remove",
            "extra",
            "symlink",
            "fifo",
            "dir",
            "canary",
            "canary-unhashed",
            "manifest+weight",
        )
    )
    manifest_bytes = None
    if op in ("weight", "manifest+weight"):
        name = rng.choice(_weights(files))
        files[name], note = mutate_bytes(rng, files[name])
        formats.fix_file_entries(m, files)
        case.notes.append(f"{name}: {note} (hashes fixed up)")
        if op == "manifest+weight":
            m = _mutate_manifest(rng, m, case.notes)
    elif op == "file":
        name = rng.choice(sorted(files))
        files[name], note = mutate_bytes(rng, files[name])
        case.notes.append(f"{name}: {note}")
        case.must_refuse = "a file that does not match its sha256"
    elif op == "manifest-bytes":
        manifest_bytes, note = mutate_bytes(rng, formats.canonical(m))
        case.notes.append(f"manifest.json: {note}")
        case.must_refuse = "a manifest changed after it was hashed"
    elif op in ("canary", "canary-unhashed"):
        name = rng.choice(_kernels(files))
        files[name] = canary_source(files[name])
        if op == "canary":
            formats.fix_file_entries(m, files)
            case.load = False  # an artifact is code: loading may run it, inspecting may not
            case.notes.append(f"{name}: a canary source, hashes fixed up (inspect only)")
        else:
            case.must_refuse = "a kernel source that does not match its sha256"
            case.notes.append(f"{name}: a canary source, hash not fixed up")
    raw = manifest_bytes if manifest_bytes is not None else formats.canonical(formats.self_hashed(m))
    formats.write_artifact_dir(target, raw, files)
    if op in ("remove", "extra", "symlink", "fifo", "dir"):
        name = rng.choice([*sorted(files), "manifest.json"])
        path = target / name
        if op == "remove":
            path.unlink()
        elif op == "extra":
            extra = target / rng.choice(("notes.txt", "weights/extra.bin", ".hidden", "kernels/sub/x.py", "empty"))
            if extra.name == "empty":
                extra.mkdir()
            else:
                extra.parent.mkdir(parents=True, exist_ok=True)
                extra.write_bytes(b"x")
            name = str(extra.relative_to(target))
        elif op == "symlink":
            outside = d / "outside.bin"
            outside.write_bytes(path.read_bytes())
            path.unlink()
            path.symlink_to(outside)
        elif op == "fifo":
            path.unlink()
            os.mkfifo(path)
        else:
            path.unlink()
            path.mkdir()
        case.notes.append(f"{name}: {op}")
        case.must_refuse = f"an artifact with a file that is a {op}" if op != "remove" else "a missing file"
    return case


def make_artifact_ixa(rng: random.Random, bases: Bases, d: Path) -> Case:
    """A packed artifact with its header fields, padding, manifest (hashes and offsets fixed up),
    files (with or without their hashes fixed up) or raw bytes changed."""
    m, files = _fresh_art(bases)
    p = formats.packed_of(m, files)
    target = d / "art.ixa"
    case = Case("artifact-ixa", 0, d, target)
    op = rng.choice(("header", "manifest", "manifest", "weight", "file", "padding", "bytes", "canary"))
    if op == "header":
        fld = rng.choice(("magic", "version", "header_len", "manifest_len", "payload_offset", "total_len", "reserved"))
        if fld == "magic":
            p.magic = rng.choice((b"\x89IXA\r\n\x1a\x00", b"GGUF", b"", b"\x89IXA"))
        elif fld == "reserved":
            p.reserved = bytes([1]) + bytes(23)
        else:
            base = {"version": 3, "header_len": 64}.get(fld, 0)
            value = rng.choice((*ODD_INTS, base + 1, base - 1, base + 64))
            if fld in ("manifest_len", "payload_offset", "total_len") and rng.random() < 0.5:
                whole = len(p.render())
                value = rng.choice((whole - 1, whole + 1, whole * 2, 64, 63, 0))
            setattr(p, fld, value)
        case.notes.append(f"header {fld} -> {getattr(p, fld)!r}")
        case.must_refuse = "a packed header that does not describe the file"
    elif op == "manifest":
        p.manifest = _mutate_manifest(rng, p.manifest, case.notes)
        if not any(x.startswith("manifest files") or x.startswith("manifest root") for x in case.notes):
            formats.fix_file_entries(p.manifest, p.files)
    elif op in ("weight", "file"):
        name = rng.choice(_weights(files) if op == "weight" else sorted(files))
        p.files[name], note = mutate_bytes(rng, p.files[name])
        if op == "weight":
            formats.fix_file_entries(p.manifest, p.files)
            case.notes.append(f"{name}: {note} (hashes fixed up)")
        else:
            case.notes.append(f"{name}: {note}")
            case.must_refuse = "a file that does not match its sha256"
    elif op == "padding":
        p.padding = rng.choice((1, 0xFF))
        case.notes.append(f"padding bytes {p.padding}")
        case.must_refuse = "padding that is not zero"
    elif op == "canary":
        name = rng.choice(_kernels(files))
        p.files[name] = canary_source(p.files[name])
        formats.fix_file_entries(p.manifest, p.files)
        case.load = False
        case.notes.append(f"{name}: a canary source, hashes fixed up (inspect only)")
    data = p.render()
    if op == "bytes":
        data, note = mutate_bytes(rng, data)
        case.notes.append(f"packed file: {note}")
        case.must_refuse = "a packed file changed after it was hashed"
    target.write_bytes(data)
    return case


def run_artifact(case: Case) -> Outcome:
    """``inferx inspect`` through the CLI, then (unless the case says not to) ``inferx.load`` on the
    CPU and, when it loads, one prefill of two tokens and one decode step."""
    import numpy as np

    import inferx

    inspected = cli(["inspect", str(case.target)])
    if inspected.status == "bad" or not case.load:
        return inspected
    loaded, session = call(lambda: inferx.load(case.target, device="cpu"), runtime_errors())
    if loaded.status != "ok":
        return worst(inspected, loaded)
    if inspected.status != "ok":
        return Outcome("bad", f"inspect refuses what load accepts: {inspected.detail}")
    vocab = session.info.vocab_size

    def steps() -> Outcome:
        logits = np.asarray(session.prefill(np.array([[1, 2]])))
        if logits.shape != (1, 2, vocab):
            return Outcome("bad", f"prefill logits of shape {logits.shape}, not (1, 2, {vocab})")
        logits = np.asarray(session.decode(np.array([[3]])))
        if logits.shape != (1, 1, vocab):
            return Outcome("bad", f"decode logits of shape {logits.shape}, not (1, 1, {vocab})")
        return OK

    ran, result = call(steps, runtime_errors())
    return result if ran.status == "ok" else ran
