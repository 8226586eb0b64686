"""The artifact container: round trips of both forms, determinism, memory maps, atomic writes,
and the acceptance fuzz (over a thousand corrupted artifacts, each refused with ArtifactError)."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import pathlib
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inferx.runtime.artifact import FORMAT_VERSION, ArtifactError, canonical_json, load_artifact
from inferx.runtime.artifact_write import pack, unpack, write_artifact

SECTIONS: dict[str, Any] = {
    "compiler_version": "0.1.0",
    "triton_version": "3.6.0",
    "target": "sm_90",
    "entry_points": {"decode": {"inputs": ["input_ids"], "outputs": ["logits"]}},
    "symbolic_dims": {"batch": {"buckets": [1, 2, 4, 8]}, "ctx": {"buckets": [128, 256]}},
    "memory_plan": {"arena_bytes": 4096, "buffers": [{"name": "h", "offset": 0, "size": 1024}]},
    "launch_plan": [{"kernel": "k0", "grid": ["batch", 1, 1], "args": ["h", "w"]}],
}
WEIGHT = np.arange(300, dtype=np.float32).reshape(100, 3) / 7


def _files() -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    return {
        "kernels/k0.cubin": b"\x7fELF" + rng.integers(0, 256, 300, dtype=np.uint8).tobytes(),
        "kernels/k0.py": b"import triton\n\n@triton.jit\ndef k0(x):\n    pass\n",
        "plan.json": b'{"steps": [1, 2, 3]}\n',
        "weights/empty.bin": b"",
        "weights/w.bin": WEIGHT.tobytes(),
    }


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file and directory under root with its bytes and mode, for exact comparison."""
    out: dict[str, tuple[bytes, int]] = {".": (b"", root.stat().st_mode)}
    for p in sorted(root.rglob("*")):
        out[p.relative_to(root).as_posix()] = (p.read_bytes() if p.is_file() else b"", p.stat().st_mode)
    return out


def _listing(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir())


@pytest.fixture()
def built(tmp_path: Path) -> tuple[Path, Path]:
    return (write_artifact(tmp_path / "model", SECTIONS, _files()),
            write_artifact(tmp_path / "model.ixa", SECTIONS, _files()))


# --- round trips and determinism --------------------------------------------------------------


@pytest.mark.parametrize("form", ["directory", "packed"])
def test_round_trip(built: tuple[Path, Path], form: str) -> None:
    art = load_artifact(built[form == "packed"], target="sm_90")
    assert art.packed == (form == "packed")
    assert art.format_version == FORMAT_VERSION and art.target == "sm_90"
    assert art.compiler_version == "0.1.0" and art.triton_version == "3.6.0"
    assert art.sections() == SECTIONS
    assert sorted(art.files) == sorted(_files())
    for name, data in _files().items():
        assert art.file_bytes(name) == data
        assert art.files[name].size == len(data)
        assert art.files[name].sha256 == hashlib.sha256(data).hexdigest()
    if art.packed:
        assert all(e.data_offset % 64 == 0 for e in art.files.values())


def test_directory_layout_and_manifest_are_canonical(built: tuple[Path, Path]) -> None:
    directory, _ = built
    assert sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()) == sorted(
        [*_files(), "manifest.json"])
    raw = (directory / "manifest.json").read_bytes()
    assert raw == canonical_json(json.loads(raw)) and raw.endswith(b"}\n")
    manifest = json.loads(raw)
    assert manifest["magic"] == "inferx-artifact" and manifest["format_version"] == 3
    assert manifest["files"]["weights/w.bin"] == {"sha256": hashlib.sha256(WEIGHT.tobytes()).hexdigest(), "size": 1200}


def test_same_inputs_byte_identical(tmp_path: Path, built: tuple[Path, Path]) -> None:
    directory, packed = built
    # From files on disk instead of bytes, in another order, under another name: same bytes.
    srcdir = tmp_path / "src"
    sources: dict[str, bytes | Path] = {}
    for name, data in reversed(list(_files().items())):
        (srcdir / name).parent.mkdir(parents=True, exist_ok=True)
        (srcdir / name).write_bytes(data)
        sources[name] = srcdir / name
    again = write_artifact(tmp_path / "other", dict(reversed(list(SECTIONS.items()))), sources)
    assert _tree(again) == _tree(directory)
    assert write_artifact(tmp_path / "other.ixa", SECTIONS, sources).read_bytes() == packed.read_bytes()


def test_overwrite_in_place_is_identical_and_leaves_no_litter(tmp_path: Path, built: tuple[Path, Path]) -> None:
    directory, packed = built
    before_dir, before_packed, listing = _tree(directory), packed.read_bytes(), _listing(tmp_path)
    write_artifact(directory, SECTIONS, _files())
    write_artifact(packed, SECTIONS, _files())
    assert _tree(directory) == before_dir and packed.read_bytes() == before_packed
    assert _listing(tmp_path) == listing
    # A different artifact replaces the old one entirely (no stale files survive).
    write_artifact(directory, SECTIONS, {"only.bin": b"x"})
    assert sorted(load_artifact(directory).files) == ["only.bin"]
    assert _listing(tmp_path) == listing


def test_arrays_are_stored_as_their_bytes(tmp_path: Path, built: tuple[Path, Path]) -> None:
    files: dict[str, Any] = {**_files(), "weights/w.bin": WEIGHT}
    assert write_artifact(tmp_path / "arr.ixa", SECTIONS, files).read_bytes() == built[1].read_bytes()


def test_overwrite_without_atomic_exchange(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           built: tuple[Path, Path]) -> None:
    """Where renameat2 is missing, the old directory is moved aside first: never partial, no litter."""
    import inferx.runtime.artifact_write as artifact_module

    monkeypatch.setattr(artifact_module, "_exchange", lambda a, b: False)
    directory, _ = built
    listing = _listing(tmp_path)
    write_artifact(directory, SECTIONS, {"only.bin": b"x"})
    assert sorted(load_artifact(directory).files) == ["only.bin"]
    assert _listing(tmp_path) == listing


def test_pack_unpack_byte_identical(tmp_path: Path, built: tuple[Path, Path]) -> None:
    directory, packed = built
    packed2 = pack(directory, tmp_path / "p2.ixa")
    assert packed2.read_bytes() == packed.read_bytes()
    unpacked = unpack(packed, tmp_path / "u")
    assert _tree(unpacked) == _tree(directory)
    assert pack(unpacked, tmp_path / "p3.ixa").read_bytes() == packed.read_bytes()
    assert unpack(tmp_path / "p3.ixa") == tmp_path / "p3"
    assert pack(tmp_path / "p3") == tmp_path / "p3.ixa"


def test_packed_header_layout(built: tuple[Path, Path]) -> None:
    """The packed file follows the byte layout of the module docstring, re-encoded independently."""
    directory, packed = built
    data = packed.read_bytes()
    magic, version, header_len, m_len, payload, total, reserved = struct.unpack("<8sIIQQQ24s", data[:64])
    assert (magic, version, header_len, total, reserved) == (b"\x89IXA\r\n\x1a\n", 3, 64, len(data), bytes(24))
    manifest = json.loads(data[64:64 + m_len])
    assert payload == -(-(64 + m_len) // 64) * 64
    assert data == _encode_packed(manifest, _files())
    dir_manifest = json.loads((directory / "manifest.json").read_bytes())
    for entry in manifest["files"].values():
        assert entry.pop("offset") % 64 == 0
    manifest.pop("manifest_sha256")
    dir_manifest.pop("manifest_sha256")
    assert manifest == dir_manifest


def test_runtime_module_imports_no_compiler() -> None:
    code = ("import sys, inferx.runtime.artifact; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('xdsl', 'torch', 'triton', 'transformers')"
            " or m.startswith(('inferx.compiler', 'inferx.passes', 'inferx.models'))]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- memory maps ------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["directory", "packed"])
def test_mmap_values_read_only(built: tuple[Path, Path], form: str) -> None:
    art = load_artifact(built[form == "packed"])
    w = art.mmap("weights/w.bin", np.float32, (100, 3))
    np.testing.assert_array_equal(w, WEIGHT)
    assert not w.flags.writeable
    with pytest.raises(ValueError):
        w[0, 0] = 1.0
    row = art.mmap("weights/w.bin", np.float32, (3,), offset=12)
    np.testing.assert_array_equal(row, WEIGHT[1])
    assert art.mmap("weights/empty.bin", np.float16, (0, 4)).shape == (0, 4)
    with pytest.raises(ArtifactError, match="weights/w.bin.*1200 bytes"):
        art.mmap("weights/w.bin", np.float16, (100, 3))
    with pytest.raises(ArtifactError, match="overruns"):
        art.mmap("weights/w.bin", np.float32, (3,), offset=1190)
    with pytest.raises(ArtifactError, match="no file 'weights/nope.bin'"):
        art.mmap("weights/nope.bin", np.float32, (1,))


# --- verification messages --------------------------------------------------------------------


def test_messages_name_what_failed(tmp_path: Path, built: tuple[Path, Path]) -> None:
    directory, packed = built
    with pytest.raises(ArtifactError, match="artifact built for sm_90, this device is sm_80"):
        load_artifact(packed, target="sm_80")
    manifest = json.loads((directory / "manifest.json").read_bytes())
    manifest["format_version"] = 7
    _write_manifest(directory, manifest)
    with pytest.raises(ArtifactError, match="artifact format version 7 is newer than this runtime's 3: upgrade inferx"):
        load_artifact(directory)
    with pytest.raises(ArtifactError, match=r"artifact format version 7 is newer"):
        load_artifact(_header_version(packed, tmp_path / "v7.ixa", 7))
    d2 = write_artifact(tmp_path / "d2", SECTIONS, _files())
    (d2 / "kernels/k0.py").write_bytes(b"import triton\n\n@triton.jit\ndef k0(y):\n    pass\n")
    with pytest.raises(ArtifactError, match=r"d2: file 'kernels/k0.py': sha256 mismatch"):
        load_artifact(d2)
    assert load_artifact(d2, verify="structure").verified == "structure"
    with pytest.raises(ArtifactError, match="kernels/k0.py.*sha256"):
        load_artifact(d2, verify="structure").file_bytes("kernels/k0.py")
    with pytest.raises(ArtifactError, match="verify must be one of"):
        load_artifact(d2, verify="quick")
    with pytest.raises(ArtifactError, match="no such artifact"):
        load_artifact(tmp_path / "absent")


def _header_version(packed: Path, out: Path, version: int) -> Path:
    data = bytearray(packed.read_bytes())
    data[8:12] = struct.pack("<I", version)
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize(("sections", "files", "match"), [
    ({**SECTIONS, "files": {}}, {}, "section 'files' is written by the artifact writer"),
    ({k: v for k, v in SECTIONS.items() if k != "target"}, {}, "section 'target' is required"),
    ({**SECTIONS, "bad": {1, 2}}, {}, "section 'bad' is not JSON-serializable"),
    ({**SECTIONS, "bad": float("nan")}, {}, "section 'bad' is not JSON-serializable"),
    (SECTIONS, {"../x.bin": b""}, "escapes the artifact"),
    (SECTIONS, {"/abs.bin": b""}, "is absolute"),
    (SECTIONS, {"a//b.bin": b""}, "not a plain relative path"),
    (SECTIONS, {"a/./b.bin": b""}, "not a plain relative path"),
    (SECTIONS, {"manifest.json": b""}, "is reserved"),
    (SECTIONS, {"W.bin": b"", "w.bin": b""}, "differ only in case"),
    (SECTIONS, {"a": b"", "a/b": b""}, "both a file and a directory"),
    (SECTIONS, {"a.bin": "text"}, "must be bytes, a numpy array or a pathlib.Path"),
    (SECTIONS, {"a.bin": np.zeros((4, 4))[:, 1]}, "not C-contiguous"),
])
def test_write_refuses_bad_input_and_leaves_nothing(tmp_path: Path, sections: dict[str, Any],
                                                    files: dict[str, Any], match: str) -> None:
    for name in ("out", "out.ixa"):
        with pytest.raises(ArtifactError, match=match):
            write_artifact(tmp_path / name, sections, files)
    assert _listing(tmp_path) == []


def test_overwrite_refuses_what_is_not_an_artifact(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("precious")
    (tmp_path / "notes.ixa").write_text("precious")
    with pytest.raises(ArtifactError, match="not an inferx artifact directory: refusing"):
        write_artifact(tmp_path / "home", SECTIONS, _files())
    with pytest.raises(ArtifactError, match="not an inferx packed artifact: refusing"):
        write_artifact(tmp_path / "notes.ixa", SECTIONS, _files())
    assert (tmp_path / "home" / "notes.txt").read_text() == "precious"
    assert (tmp_path / "notes.ixa").read_text() == "precious"
    assert _listing(tmp_path) == ["home", "notes.ixa"]


# --- atomic writes ----------------------------------------------------------------------------


class _FailingReader(io.RawIOBase):
    """Gives some bytes, then raises ``exc``: a source whose read fails midway."""

    def __init__(self, exc: BaseException) -> None:
        self.exc, self.calls = exc, 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        self.calls += 1
        if self.calls > 1:
            raise self.exc
        return b"\1" * 10


@pytest.mark.parametrize("name", ["out", "out.ixa"])
@pytest.mark.parametrize("exc", [OSError("disk on fire"), KeyboardInterrupt()])
@pytest.mark.parametrize("existing", [False, True])
def test_failure_midway_leaves_no_partial_artifact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                                   exc: BaseException, existing: bool) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "boom.bin").write_bytes(b"\1" * 100)
    out_parent = tmp_path / "out_parent"
    out_parent.mkdir()
    if existing:
        write_artifact(out_parent / name, SECTIONS, _files())
    before = {p.name: (_tree(p) if p.is_dir() else p.read_bytes()) for p in out_parent.iterdir()}
    real_open = pathlib.Path.open

    def fake_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        return _FailingReader(exc) if self == src / "boom.bin" else real_open(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", fake_open)
    files: dict[str, bytes | Path] = {"a.bin": b"first", "m/boom.bin": src / "boom.bin", "z.bin": b"last"}
    with pytest.raises(ArtifactError if isinstance(exc, OSError) else KeyboardInterrupt) as info:
        write_artifact(out_parent / name, SECTIONS, files)
    if isinstance(exc, OSError):
        assert "m/boom.bin" in str(info.value) and "disk on fire" in str(info.value)
    monkeypatch.undo()
    after = {p.name: (_tree(p) if p.is_dir() else p.read_bytes()) for p in out_parent.iterdir()}
    assert after == before  # no temporary litter; the old artifact, if any, untouched
    if existing:
        load_artifact(out_parent / name)


def test_source_that_changes_size_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "w.bin"
    src.write_bytes(b"1234")
    real_stat = pathlib.Path.stat

    class Growing(type(tmp_path)):  # type: ignore[misc]
        def stat(self, **kwargs: Any) -> os.stat_result:  # type: ignore[override]
            st = real_stat(self, **kwargs)
            return os.stat_result((st.st_mode, *st[1:6], 2, *st[7:]))

    with pytest.raises(ArtifactError, match="changed size"):
        write_artifact(tmp_path / "out", SECTIONS, {"w.bin": Growing(src)})
    assert _listing(tmp_path) == ["w.bin"]


# --- the acceptance fuzz ----------------------------------------------------------------------


def _canonical_rehashed(manifest: dict[str, Any]) -> bytes:
    """The manifest as a consistent writer would store it: canonical, with its self-hash fixed."""
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return canonical_json({**body, "manifest_sha256": hashlib.sha256(canonical_json(body)).hexdigest()})


def _write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    (directory / "manifest.json").write_bytes(_canonical_rehashed(manifest))


def _encode_packed(manifest: dict[str, Any] | bytes, blobs: dict[str, bytes]) -> bytes:
    """An independent encoder of the documented packed layout (manifest bytes taken as given)."""
    raw = manifest if isinstance(manifest, bytes) else canonical_json(manifest)
    payload_at = -(-(64 + len(raw)) // 64) * 64
    payload = bytearray()
    for name in sorted(blobs):
        payload += bytes(-len(payload) % 64) + blobs[name]
    header = struct.pack("<8sIIQQQ24s", b"\x89IXA\r\n\x1a\n", FORMAT_VERSION, 64, len(raw), payload_at,
                         payload_at + len(payload), bytes(24))
    return header + raw + bytes(payload_at - 64 - len(raw)) + bytes(payload)


Edit = Callable[[dict[str, Any]], "dict[str, Any] | bytes"]


def _set(path: tuple[Any, ...], value: Any) -> Edit:
    def edit(m: dict[str, Any]) -> dict[str, Any]:
        node = m
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return m
    return edit


def _map(path: tuple[Any, ...], fn: Callable[[Any], Any]) -> Edit:
    def edit(m: dict[str, Any]) -> dict[str, Any]:
        node = m
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = fn(node[path[-1]])
        return m
    return edit


def _bump(path: tuple[Any, ...], delta: int) -> Edit:
    return _map(path, lambda v: v + delta)


def _delete(path: tuple[Any, ...]) -> Edit:
    def edit(m: dict[str, Any]) -> dict[str, Any]:
        node = m
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
        return m
    return edit


def _rename(old: str, new: str) -> Edit:
    def edit(m: dict[str, Any]) -> dict[str, Any]:
        m["files"][new] = m["files"].pop(old)
        return m
    return edit


def _raw(make: Callable[[bytes], bytes]) -> Edit:
    """An edit of the manifest's stored (canonical) bytes."""
    return lambda m: make(canonical_json(m))


def _manifest_edits(packed: bool, sizes: dict[str, int]) -> Iterator[tuple[str, Edit, bool]]:
    """(description, edit, whether to fix the self-hash afterwards) for one form's manifest."""
    names = sorted(sizes)
    v_now = FORMAT_VERSION
    for v in (1, v_now - 1, v_now + 1000, 0, -1, str(v_now), float(v_now), True, None, 10**30):
        yield f"format_version={v!r}", _set(("format_version",), v), True
    for v in ("inferx-artifacX", "", 1, None):
        yield f"magic={v!r}", _set(("magic",), v), True
    for key in ("magic", "format_version", "compiler_version", "triton_version", "target", "files"):
        yield f"delete {key}", _delete((key,)), True
    yield "delete manifest_sha256", _delete(("manifest_sha256",)), False
    for key in ("compiler_version", "triton_version", "target"):
        for v in (3, "", None, ["x"]):
            yield f"{key}={v!r}", _set((key,), v), True
    yield "target=sm_80", _set(("target",), "sm_80"), True
    for v in ([], "x", {}, None):
        yield f"files={v!r}", _set(("files",), v), True
    yield "a section edited, hash not fixed", _set(("launch_plan", 0, "kernel"), "k1"), False
    yield "a section value edited, hash not fixed", _set(("memory_plan", "arena_bytes"), 4097), False
    for v in ("0" * 64, "A" * 64, "", 5, None):
        yield f"manifest_sha256={v!r}", _set(("manifest_sha256",), v), False
    for name in names:
        for delta in (+1, -1):
            yield f"{name}: size{delta:+d}", _bump(("files", name, "size"), delta), True
        for v in (2**64, "12", True, 1.5, None):
            yield f"{name}: size={v!r}", _set(("files", name, "size"), v), True
        for label, make in (("flip a hex digit", lambda h: ("1" if h[0] != "1" else "2") + h[1:]),
                            ("uppercase", str.upper), ("short", lambda h: h[:-1]), ("empty", lambda h: "")):
            yield f"{name}: sha256 {label}", _map(("files", name, "sha256"), make), True
        yield f"{name}: sha256=5", _set(("files", name, "sha256"), 5), True
        yield f"{name}: entry=[]", _set(("files", name), []), True
        yield f"{name}: entry={{}}", _set(("files", name), {}), True
        yield f"{name}: extra key", _set(("files", name, "mode"), 420), True
        yield f"{name}: no size", _delete(("files", name, "size")), True
        # In the packed form names live only in the manifest: a consistent rename of a file, or
        # dropping an empty one, that keeps the layout is a valid artifact, so those edits keep the
        # old self-hash (a corruption); in the directory form the files on disk contradict them.
        yield f"{name}: delete entry", _delete(("files", name)), not (packed and sizes[name] == 0)
        for new in ("x/y.bin", name.upper(), name + "/sub"):
            yield f"{name}: path -> {new!r}", _rename(name, new), not packed
        for new in ("../escape.bin", "/abs.bin", "a//b", "./a", "a/./b", "C:/x", "a\\b", "manifest.json", "",
                    "sp ace"):
            yield f"{name}: path -> {new!r}", _rename(name, new), True
        if packed:
            for delta in (64, -64, 1):
                yield f"{name}: offset{delta:+d}", _bump(("files", name, "offset"), delta), True
            for v in ("0", None, 1.0):
                yield f"{name}: offset={v!r}", _set(("files", name, "offset"), v), True
            yield f"{name}: no offset", _delete(("files", name, "offset")), True
        else:
            yield f"{name}: offset added", _set(("files", name, "offset"), 0), True
    yield "ghost file added", _set(("files", "ghost.bin"), {"sha256": "0" * 64, "size": 5, **(
        {"offset": 4096} if packed else {})}), True
    raws: list[tuple[str, Callable[[bytes], bytes]]] = [
        ("invalid JSON: cut in half", lambda c: c[: len(c) // 2]),
        ("invalid JSON: empty", lambda c: b""),
        ("not UTF-8", lambda c: c[:10] + b"\xff" + c[11:]),
        ("NaN size", lambda c: c.replace(b'"size": 0', b'"size": NaN', 1)),
        ("non-canonical: compact", lambda c: json.dumps(json.loads(c), sort_keys=True).encode() + b"\n"),
        ("non-canonical: no trailing newline", lambda c: c[:-1]),
        ("non-canonical: CRLF", lambda c: c.replace(b"\n", b"\r\n")),
        ("non-canonical: escaped ASCII", lambda c: c.replace(b'"magic"', b'"\\u006dagic"', 1)),
        ("duplicate key", lambda c: c.replace(b'{\n  "compiler_version"',
                                              b'{\n  "target": "cpu",\n  "compiler_version"', 1)),
        ("deep nesting", lambda c: b"[" * 100_000 + b"]" * 100_000),
        ("top-level list", lambda c: b"[]\n"),
        ("top-level null", lambda c: b"null\n"),
        ("huge integer", lambda c: b"1" * 5000 + b"\n"),
    ]
    for label, make in raws:
        yield label, _raw(make), False


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"took longer than {seconds} s")
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _flip(data: bytes, offset: int, bit: int) -> bytes:
    out = bytearray(data)
    out[offset] ^= 1 << bit
    return bytes(out)


@pytest.mark.slow
def test_fuzz_corrupted_artifacts_are_all_refused(tmp_path: Path) -> None:
    """Over a thousand corruptions of a small artifact, in both forms: every one raises
    ArtifactError naming the artifact (and the file, where one file is at fault), fast."""
    rng = random.Random(1234)
    files = _files()
    names = sorted(files)
    base_dir = write_artifact(tmp_path / "base", SECTIONS, files)
    base_packed = write_artifact(tmp_path / "base.ixa", SECTIONS, files).read_bytes()
    load_artifact(base_dir, target="sm_90")
    m_len = struct.unpack_from("<Q", base_packed, 16)[0]
    packed_manifest = json.loads(base_packed[64:64 + m_len])
    dir_manifest = json.loads((base_dir / "manifest.json").read_bytes())
    assert _encode_packed(packed_manifest, files) == base_packed
    payload_at = struct.unpack_from("<Q", base_packed, 24)[0]

    cases: list[tuple[str, Callable[[Path], Path], str | None]] = []  # (description, make, file named)

    def packed_case(desc: str, data: bytes, names_file: str | None = None) -> None:
        def make(where: Path) -> Path:
            out = where.with_suffix(".ixa")
            out.write_bytes(data)
            return out
        cases.append((f"packed: {desc}", make, names_file))

    def dir_case(desc: str, mutate: Callable[[Path], None], names_file: str | None = None) -> None:
        def make(where: Path) -> Path:
            shutil.copytree(base_dir, where, symlinks=True)
            mutate(where)
            return where
        cases.append((f"directory: {desc}", make, names_file))

    # 1. Packed: truncation at every section boundary (and one byte either side), and at random points.
    starts = [payload_at + e["offset"] for e in packed_manifest["files"].values()]
    ends = [s + e["size"] for s, e in zip(starts, packed_manifest["files"].values(), strict=True)]
    boundaries = sorted({0, 8, 12, 16, 24, 32, 40, 64, 64 + m_len, payload_at, *starts, *ends})
    for b in boundaries:
        for cut in (b - 1, b, b + 1):
            if 0 <= cut < len(base_packed):
                packed_case(f"truncated at {cut} (boundary {b})", base_packed[:cut])
    for cut in rng.sample(range(len(base_packed)), 100):
        packed_case(f"truncated at {cut}", base_packed[:cut])
    for extra in (b"\0", b"\0" * 64, b"x"):
        packed_case(f"extended by {extra!r}", base_packed + extra)

    # 2. Packed: single bit flips at random offsets, and at every header byte.
    for offset in range(64):
        packed_case(f"flip bit 0 of header byte {offset}", _flip(base_packed, offset, 0))
    for _ in range(400):
        offset, bit = rng.randrange(len(base_packed)), rng.randrange(8)
        packed_case(f"flip bit {bit} at byte {offset}", _flip(base_packed, offset, bit))

    # 3. Packed: header fields set to other values (the rest left intact).
    for field, at, fmt, values in (("version", 8, "<I", (1, FORMAT_VERSION - 1, FORMAT_VERSION + 1, 2**32 - 1)),
                                   ("header length", 12, "<I", (0, 65, 128)),
                                   ("manifest length", 16, "<Q", (0, m_len - 1, m_len + 1, 2**63)),
                                   ("payload offset", 24, "<Q", (0, payload_at + 64, 2**64 - 1)),
                                   ("total length", 32, "<Q", (0, len(base_packed) + 1))):
        for v in values:
            data = bytearray(base_packed)
            struct.pack_into(fmt, data, at, v)
            packed_case(f"header {field} = {v}", bytes(data))

    # 4. Manifest edits in both forms (self-hash fixed where the edit is meant to reach deeper checks).
    #    Every edit is also tried with the old self-hash left in place: plain corruption.
    sizes = {n: len(files[n]) for n in names}
    for packed, manifest in ((True, packed_manifest), (False, dir_manifest)):
        for desc, edit, rehash in _manifest_edits(packed, sizes):
            for fix in sorted({rehash, False}):
                m = edit(copy.deepcopy(manifest))
                raw = m if isinstance(m, bytes) else _canonical_rehashed(m) if fix else canonical_json(m)
                label = f"manifest {desc}" + ("" if fix or isinstance(m, bytes) else " (self-hash not fixed)")
                if packed:
                    packed_case(label, _encode_packed(raw, files))
                else:
                    dir_case(label, lambda d, raw=raw: (d / "manifest.json").write_bytes(raw))

    # 5. Directory: bit flips in every file (the manifest included), truncations, structural damage.
    for _ in range(250):
        name = rng.choice([n for n in names if files[n]] + ["manifest.json"])
        size = (base_dir / name).stat().st_size
        offset, bit = rng.randrange(size), rng.randrange(8)

        def flip(d: Path, name: str = name, offset: int = offset, bit: int = bit) -> None:
            (d / name).write_bytes(_flip((d / name).read_bytes(), offset, bit))
        dir_case(f"flip bit {bit} at byte {offset} of {name}", flip, None if name == "manifest.json" else name)
    for name in [*names, "manifest.json"]:
        size = (base_dir / name).stat().st_size
        for cut in sorted({0, size // 2, max(size - 1, 0), rng.randrange(size + 1)}):
            if cut < size:
                dir_case(f"{name} truncated at {cut}",
                         lambda d, name=name, cut=cut: os.truncate(d / name, cut),
                         None if name == "manifest.json" else name)
        if name != "manifest.json":
            dir_case(f"{name} extended", lambda d, name=name: (d / name).write_bytes(
                (d / name).read_bytes() + b"\0"), name)
            dir_case(f"{name} deleted", lambda d, name=name: (d / name).unlink(), name)
            dir_case(f"{name} replaced by a symlink", lambda d, name=name: (
                (d / name).rename(d / "moved"), (d / name).symlink_to(d / "moved")))
            dir_case(f"{name} replaced by a symlink to itself elsewhere", lambda d, name=name: (
                shutil.copy(d / name, d.parent / (d.name + ".outside")), (d / name).unlink(),
                (d / name).symlink_to(d.parent / (d.name + ".outside"))), name)
            dir_case(f"{name} replaced by a FIFO", lambda d, name=name: ((d / name).unlink(), os.mkfifo(d / name)),
                     name)
            dir_case(f"{name} replaced by a directory", lambda d, name=name: (
                (d / name).unlink(), (d / name).mkdir()), name)
    dir_case("extra file", lambda d: (d / "weights" / "extra.bin").write_bytes(b"x"), "weights/extra.bin")
    dir_case("extra empty directory", lambda d: (d / "cache").mkdir(), "cache")
    dir_case("extra hidden file", lambda d: (d / ".DS_Store").write_bytes(b""), ".DS_Store")
    dir_case("manifest deleted", lambda d: (d / "manifest.json").unlink(), "manifest.json")
    dir_case("manifest is a FIFO", lambda d: ((d / "manifest.json").unlink(), os.mkfifo(d / "manifest.json")),
             "manifest.json")
    dir_case("manifest is a directory", lambda d: ((d / "manifest.json").unlink(), (d / "manifest.json").mkdir()),
             "manifest.json")
    dir_case("directory symlink", lambda d: (d / "kernels2").symlink_to(d / "kernels"), "kernels2")

    assert len(cases) >= 1000, len(cases)
    failures: list[str] = []
    slowest = (0.0, "")
    started = time.perf_counter()
    for i, (desc, make, names_file) in enumerate(cases):
        target = make(tmp_path / f"case{i}")
        t0 = time.perf_counter()
        try:
            with _deadline(2.0):
                load_artifact(target, target="sm_90")
            failures.append(f"case {i}: {desc}: loaded without error")
        except ArtifactError as e:
            msg = str(e)
            if not msg.startswith(str(target)):
                failures.append(f"case {i}: {desc}: message does not name the artifact: {msg}")
            elif names_file is not None and names_file not in msg:
                failures.append(f"case {i}: {desc}: message does not name {names_file!r}: {msg}")
        except BaseException as e:  # noqa: BLE001 - the point is to catch anything else
            failures.append(f"case {i}: {desc}: {type(e).__name__}: {e}")
        slowest = max(slowest, (time.perf_counter() - t0, desc))
    elapsed = time.perf_counter() - started
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(failures[:30])
    assert elapsed < 30, f"fuzz took {elapsed:.1f} s; slowest case {slowest[1]!r} at {slowest[0]:.2f} s"
