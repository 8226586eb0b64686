"""Writing artifacts (the format: ``inferx.runtime.artifact``), packing a directory artifact into
one ``.ixa`` file and unpacking it again.

Writing (``write_artifact``) goes to a hidden temporary sibling and renames it into place, so
``output`` is at all times absent, the old artifact or the new one, and an exception (including
KeyboardInterrupt, and SIGTERM or SIGHUP: ``inferx.signals.terminating``) leaves no temporary
files. Writing replaces only what is not the user's: an empty file or directory, or an earlier
artifact of the same form, recognised by its parsed, intact manifest and the files it lists
(``check_output``); anything else at ``output`` is refused and left as it was. The same inputs
give byte-identical output.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from inferx.runtime.artifact import (  # the format's own helpers, shared with loading
    _CHUNK,
    _HEADER,
    _REQUIRED_STR,
    _RESERVED,
    FORMAT_VERSION,
    HEADER_LEN,
    MAGIC,
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    PACKED_MAGIC,
    PACKED_SUFFIX,
    Artifact,
    ArtifactError,
    _align,
    _names_problem,
    _packed_offsets,
    _path_problem,
    _payload_len,
    _with_self_hash,
    canonical_json,
    load_artifact,
)
from inferx.signals import held, terminating

# --- writing --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Slice:
    """``size`` bytes at ``offset`` of ``path``: a file of a packed artifact being unpacked."""

    path: Path
    offset: int
    size: int


_Source = bytes | bytearray | memoryview | np.ndarray | Path | _Slice


def _as_bytes_view(name: str, src: bytes | bytearray | memoryview | np.ndarray) -> memoryview:
    """A flat byte view of in-memory content (an array's bytes in C order, no copy)."""
    if isinstance(src, np.ndarray):
        if not src.flags.c_contiguous:
            raise ArtifactError(f"file {name!r}: the array is not C-contiguous: pass np.ascontiguousarray(...)")
        return memoryview(src.reshape(-1).view(np.uint8))  # type: ignore[arg-type]  # ndarray is a buffer
    view = memoryview(src)
    if not view.c_contiguous:
        raise ArtifactError(f"file {name!r}: the buffer is not contiguous")
    return view.cast("B")


def _source_size(name: str, src: _Source) -> int:
    if isinstance(src, bytes | bytearray | memoryview | np.ndarray):
        return _as_bytes_view(name, src).nbytes
    if isinstance(src, _Slice):
        return src.size
    if isinstance(src, Path):
        try:
            st = src.stat()
        except OSError as e:
            raise ArtifactError(f"file {name!r}: cannot read its source {src}: {e}") from e
        if not stat.S_ISREG(st.st_mode):
            raise ArtifactError(f"file {name!r}: its source {src} is not a regular file")
        return st.st_size
    raise ArtifactError(
        f"file {name!r}: content must be bytes, a numpy array or a pathlib.Path, got {type(src).__name__}"
    )


def _chunks(name: str, src: _Source, size: int) -> Iterator[bytes | memoryview]:
    """The bytes of ``src``, checked to be exactly ``size`` long."""
    if isinstance(src, bytes | bytearray | memoryview | np.ndarray):
        view = _as_bytes_view(name, src)
        for i in range(0, size, _CHUNK):
            yield view[i : i + _CHUNK]
        return
    path, start = (src.path, src.offset) if isinstance(src, _Slice) else (src, 0)
    got = 0
    try:
        with path.open("rb") as f:
            if start:
                f.seek(start)
            while got < size:
                block = f.read(min(_CHUNK, size - got))
                if not block:
                    break
                got += len(block)
                yield block
            extra = isinstance(src, Path) and f.read(1)
    except OSError as e:
        raise ArtifactError(f"file {name!r}: cannot read its source {path}: {e}") from e
    if got != size or extra:
        raise ArtifactError(f"file {name!r}: its source {path} changed size while being written")


def _copy(name: str, src: _Source, size: int, out: BinaryIO) -> str:
    h = hashlib.sha256()
    for block in _chunks(name, src, size):
        h.update(block)
        out.write(block)
    return h.hexdigest()


def _check_sections(sections: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(sections, Mapping):
        raise ArtifactError(f"sections must be a dict, got {type(sections).__name__}")
    for key, value in sections.items():
        if not isinstance(key, str):
            raise ArtifactError(f"section name {key!r} is not a string")
        if key in _RESERVED:
            raise ArtifactError(f"section {key!r} is written by the artifact writer, not passed in")
        try:
            canonical_json(value)
        except (TypeError, ValueError) as e:
            raise ArtifactError(f"section {key!r} is not JSON-serializable: {e}") from e
    for key in _REQUIRED_STR:
        if not isinstance(sections.get(key), str) or not sections[key]:
            raise ArtifactError(f"section {key!r} is required: a non-empty string")
    return dict(sections)


def _check_names(names: list[str]) -> None:
    for n in names:
        problem = _path_problem(n)
        if problem:
            raise ArtifactError(problem)
    problem = _names_problem(names)
    if problem:
        raise ArtifactError(problem)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass




def _manifest_problem(raw: bytes, packed: bool) -> tuple[str | None, dict[str, Any]]:
    """Why ``raw`` is not the manifest of an inferx artifact (of any format version), or None and
    the files it lists: canonical JSON with the magic and a matching self-hash, valid paths."""
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return "its manifest is not JSON", {}
    if not isinstance(manifest, dict) or manifest.get("magic") != MAGIC:
        return "its manifest has no inferx magic", {}
    try:
        intact = canonical_json(manifest) == raw and _with_self_hash(manifest) == manifest
    except (TypeError, ValueError, RecursionError):
        intact = False
    files = manifest.get("files")
    if not intact or not isinstance(files, dict):
        return "its manifest was edited or is corrupted", {}
    keys = {"offset", "size"} if packed else {"size"}
    for name, entry in files.items():
        if _path_problem(name) or not isinstance(entry, dict) or any(type(entry.get(k)) is not int for k in keys):
            return f"its manifest lists {name!r} wrongly", {}
    return None, files


def _dir_problem(path: Path) -> str | None:
    """Why the directory ``path`` is neither empty nor an artifact directory: a parsed, intact
    manifest and exactly the files it lists, of their sizes (the contents are not hashed: a
    damaged artifact is still one to replace)."""
    entries = {p.name for p in path.iterdir()}
    if not entries:
        return None
    manifest = path / MANIFEST_NAME
    if MANIFEST_NAME not in entries:
        return f"it holds {sorted(entries)[0]!r} and no {MANIFEST_NAME}"
    st = manifest.lstat()
    if not stat.S_ISREG(st.st_mode):
        return f"its {MANIFEST_NAME} is not a regular file"
    if st.st_size > MAX_MANIFEST_BYTES:
        return f"its {MANIFEST_NAME} has {st.st_size} bytes"
    problem, files = _manifest_problem(manifest.read_bytes(), packed=False)
    if problem:
        return problem
    dirs = {"/".join(n.split("/")[:i]) for n in files for i in range(1, n.count("/") + 1)}
    seen = set()
    for root, dirnames, filenames in os.walk(path, onerror=_raise, followlinks=False):
        prefix = Path(root).relative_to(path).as_posix() + "/"
        for name in [*dirnames, *filenames]:
            rel = (prefix + name).removeprefix("./")
            st = (Path(root) / name).lstat()
            if stat.S_ISDIR(st.st_mode) and rel in dirs:
                continue
            if rel == MANIFEST_NAME:
                continue
            if rel not in files or not stat.S_ISREG(st.st_mode):
                return f"it holds {rel!r}, which its manifest does not list"
            if st.st_size != files[rel]["size"]:
                return f"its file {rel!r} is not of the size its manifest says"
            seen.add(rel)
    missing = sorted(set(files) - seen)
    return f"its file {missing[0]!r} is missing" if missing else None


def _packed_problem(path: Path, size: int) -> str | None:
    """Why the regular file ``path`` of ``size`` bytes is neither empty nor a packed artifact: the
    packed header, and a manifest as ``_manifest_problem`` asks whose files end where the file does."""
    if size == 0:
        return None
    with path.open("rb") as f:
        head = f.read(HEADER_LEN)
        if len(head) < HEADER_LEN or head[: len(PACKED_MAGIC)] != PACKED_MAGIC:
            return "it does not start as a packed artifact does"
        _, _, header_len, m_len, payload, total, _ = _HEADER.unpack(head)
        if header_len != HEADER_LEN or total != size or m_len > min(size - HEADER_LEN, MAX_MANIFEST_BYTES):
            return "its header does not match the file"
        problem, files = _manifest_problem(f.read(m_len), packed=True)
    if problem:
        return problem
    end = payload + max((e["offset"] + e["size"] for e in files.values()), default=0)
    return None if end == size else "its manifest does not match the file"


def _raise(e: OSError) -> None:
    raise e


def _not_replaceable(path: Path, packed: bool) -> str | None:
    """Why an artifact written to ``path`` (which exists) may not replace what is there, or None:
    only an empty file or directory or an earlier artifact of the same form is replaced, so
    nothing else a user keeps there is ever deleted."""
    try:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            return "it is a symbolic link"
        if packed:
            return _packed_problem(path, st.st_size) if stat.S_ISREG(st.st_mode) else "it is not a regular file"
        return _dir_problem(path) if stat.S_ISDIR(st.st_mode) else "it is not a directory"
    except OSError as e:
        return f"it cannot be read ({e.strerror or e})"


def check_output(output: Path | str) -> None:
    """Raises ArtifactError, naming ``output`` and why, unless an artifact may be written there:
    absent, an empty file or directory, or an earlier artifact of the same form (packed when
    the name ends in ``.ixa``). A compile asks before its work, the writer again before it renames."""
    output = Path(output)
    if output.name in ("", ".", ".."):
        raise ArtifactError(f"{output}: not a usable artifact name")
    if not os.path.lexists(output):
        return
    packed = output.name.endswith(PACKED_SUFFIX)
    problem = _not_replaceable(output, packed)
    if problem:
        form = "packed artifact" if packed else "artifact directory"
        raise ArtifactError(f"{output}: exists and is not an inferx {form}: refusing to overwrite it ({problem})")


_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swaps two paths (Linux renameat2); False where the system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    return rc == 0


def _install(tmp: Path, output: Path, packed: bool) -> Path | None:
    """Renames ``tmp`` to ``output`` atomically; returns where the replaced artifact now lies. What
    is at ``output`` is checked again here: it may have changed while the artifact was written."""
    if not os.path.lexists(output):
        os.rename(tmp, output)
        return None
    check_output(output)
    if packed:
        os.replace(tmp, output)
        return None
    if _exchange(tmp, output):
        return tmp
    # No atomic exchange: output is briefly absent, never partial.
    old = Path(tempfile.mkdtemp(prefix=f".{output.name}.", suffix=".old", dir=output.parent))
    os.rename(output, old / "a")
    try:
        os.rename(tmp, output)
    except BaseException:
        os.rename(old / "a", output)
        raise
    return old


def _make_parents(parent: Path, created: list[Path]) -> None:
    """Creates ``parent`` and its missing ancestors, each put first in ``created`` once made."""
    missing = []
    for d in [parent, *parent.parents]:
        if os.path.lexists(d):
            break
        missing.append(d)
    for d in reversed(missing):
        d.mkdir()
        created.insert(0, d)


def _write_dir(
    tmp: Path, sections: dict[str, Any], sources: Mapping[str, _Source], sizes: Mapping[str, int]
) -> dict[str, str]:
    hashes: dict[str, str] = {}
    for name in sorted(sources):
        dest = tmp / name
        for parent in reversed(dest.relative_to(tmp).parents[:-1]):
            d = tmp / parent
            if not d.exists():
                d.mkdir()
                d.chmod(0o755)
        with dest.open("xb") as f:
            hashes[name] = _copy(name, sources[name], sizes[name], f)
            f.flush()
            os.fsync(f.fileno())
        dest.chmod(0o644)
    files = {n: {"sha256": hashes[n], "size": sizes[n]} for n in sorted(sources)}
    manifest = _with_self_hash({**sections, "magic": MAGIC, "format_version": FORMAT_VERSION, "files": files})
    with (tmp / MANIFEST_NAME).open("xb") as f:
        f.write(canonical_json(manifest))
        f.flush()
        os.fsync(f.fileno())
    (tmp / MANIFEST_NAME).chmod(0o644)
    tmp.chmod(0o755)
    _fsync_dir(tmp)
    return hashes


def _write_packed(
    f: BinaryIO, sections: dict[str, Any], sources: Mapping[str, _Source], sizes: Mapping[str, int]
) -> dict[str, str]:
    offsets = _packed_offsets(sizes)

    def render(hashes: Mapping[str, str]) -> bytes:
        files = {n: {"offset": offsets[n], "sha256": hashes[n], "size": sizes[n]} for n in sorted(sizes)}
        manifest = {**sections, "magic": MAGIC, "format_version": FORMAT_VERSION, "files": files}
        return canonical_json(_with_self_hash(manifest))

    # Hashes are fixed-width hex, so the manifest's length is known before the files are read.
    m_len = len(render({n: "0" * 64 for n in sizes}))
    payload = _align(HEADER_LEN + m_len)
    total = payload + _payload_len(sizes, offsets)
    f.write(bytes(payload))
    hashes: dict[str, str] = {}
    pos = 0
    for name in sorted(sizes):
        f.write(bytes(offsets[name] - pos))
        hashes[name] = _copy(name, sources[name], sizes[name], f)
        pos = offsets[name] + sizes[name]
    manifest = render(hashes)
    assert len(manifest) == m_len, "manifest length changed between drafts"
    f.seek(0)
    f.write(_HEADER.pack(PACKED_MAGIC, FORMAT_VERSION, HEADER_LEN, m_len, payload, total, bytes(24)))
    f.write(manifest)
    f.flush()
    os.fsync(f.fileno())
    return hashes


def _check_manifest_size(sections: Mapping[str, Any], sizes: Mapping[str, int]) -> None:
    """Refuses, before any file is copied, a manifest longer than loading reads
    (``MAX_MANIFEST_BYTES``): the artifact could be written but never loaded. The length is
    known beforehand: hashes are fixed-width hex and offsets are at most the payload's length."""
    end = _payload_len(sizes, _packed_offsets(sizes))
    files = {n: {"offset": end, "sha256": "0" * 64, "size": sizes[n]} for n in sorted(sizes)}
    manifest = {**sections, "magic": MAGIC, "format_version": FORMAT_VERSION, "files": files}
    n = len(canonical_json(_with_self_hash(manifest)))
    if n > MAX_MANIFEST_BYTES:
        raise ArtifactError(f"the manifest would be {n} bytes, past the {MAX_MANIFEST_BYTES} bytes loading reads")


def _write(
    output: Path, sections: Mapping[str, Any], sources: Mapping[str, _Source], expect: Mapping[str, str] | None = None
) -> Path:
    packed = output.name.endswith(PACKED_SUFFIX)
    tmp: Path | None = None
    replaced: Path | None = None
    created: list[Path] = []
    done = False
    try:
        with terminating():
            try:
                check_output(output)
                checked = _check_sections(sections)
                _check_names(list(sources))
                sizes = {n: _source_size(n, sources[n]) for n in sources}
                _check_manifest_size(checked, sizes)
                with held():
                    _make_parents(output.parent, created)
                    if packed:
                        fd, tmp_name = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent)
                        tmp = Path(tmp_name)
                        f = os.fdopen(fd, "wb")
                    else:
                        tmp = Path(tempfile.mkdtemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent))
                if packed:
                    with f:
                        os.fchmod(f.fileno(), 0o644)
                        hashes = _write_packed(f, checked, sources, sizes)
                else:
                    hashes = _write_dir(tmp, checked, sources, sizes)
                changed = sorted(n for n, h in (expect or {}).items() if hashes.get(n) != h)
                if changed:
                    raise ArtifactError(f"file {changed[0]!r} changed while being copied")
                with held():
                    replaced = _install(tmp, output, packed)
                    done = True
                _fsync_dir(output.parent)
            finally:
                with held():
                    if tmp is not None and os.path.lexists(tmp):
                        _remove(tmp)
                    if replaced is not None:
                        _remove(replaced)
                    for d in created if not done else []:
                        with contextlib.suppress(OSError):
                            d.rmdir()
    except ArtifactError as e:
        if str(e).startswith(f"{output}: "):
            raise
        raise ArtifactError(f"{output}: {e}") from e
    return output


def write_artifact(
    output: Path | str,
    sections: Mapping[str, Any],
    files: Mapping[str, bytes | bytearray | memoryview | np.ndarray | Path],
) -> Path:
    """Writes an artifact at ``output`` (packed when its name ends in ``.ixa``) and returns it.

    ``sections`` must hold ``compiler_version``, ``triton_version`` and ``target`` (non-empty
    strings) and may hold any other JSON-serializable sections; ``files`` maps relative paths to
    contents (bytes, or a C-contiguous numpy array whose bytes are stored) or to files to copy.
    The write is atomic (an existing artifact is replaced in one step; anything at ``output``
    that is not an artifact of the same form, or empty, is refused: ``check_output``) and
    deterministic. Bad input and unreadable sources raise ArtifactError; other errors (a full
    disk, KeyboardInterrupt, SIGTERM) propagate; either way nothing is left behind, not even the
    missing parent directories it created.
    """
    return _write(Path(output), sections, dict(files))


# --- packing --------------------------------------------------------------------------------


def _stored_sections(art: Artifact) -> dict[str, Any]:
    return {k: v for k, v in art.manifest.items() if k not in _RESERVED}


def pack(directory: Path | str, output: Path | str | None = None) -> Path:
    """Packs a directory artifact (verified in full first) into ``output`` (default: the
    directory's name plus ``.ixa``). ``unpack`` of the result gives back the same bytes."""
    src = Path(directory)
    art = load_artifact(src)
    if art.packed:
        raise ArtifactError(f"{src}: already packed")
    out = Path(output) if output is not None else src.with_name(src.name + PACKED_SUFFIX)
    if not out.name.endswith(PACKED_SUFFIX):
        raise ArtifactError(f"{out}: a packed artifact's name ends in {PACKED_SUFFIX}")
    sources: dict[str, _Source] = {n: e.holder for n, e in art.files.items()}
    return _write(out, _stored_sections(art), sources, {n: e.sha256 for n, e in art.files.items()})


def unpack(packed: Path | str, output: Path | str | None = None) -> Path:
    """Unpacks a packed artifact (verified in full first) into the directory ``output``
    (default: the name without ``.ixa``). ``pack`` of the result gives back the same bytes."""
    src = Path(packed)
    art = load_artifact(src)
    if not art.packed:
        raise ArtifactError(f"{src}: not a packed artifact")
    if output is not None:
        out = Path(output)
    elif src.name.endswith(PACKED_SUFFIX) and len(src.name) > len(PACKED_SUFFIX):
        out = src.with_name(src.name[: -len(PACKED_SUFFIX)])
    else:
        raise ArtifactError(f"{src}: name does not end in {PACKED_SUFFIX}: pass the output directory")
    if out.name.endswith(PACKED_SUFFIX):
        raise ArtifactError(f"{out}: a directory artifact's name must not end in {PACKED_SUFFIX}")
    sources: dict[str, _Source] = {n: _Slice(e.holder, e.data_offset, e.size) for n, e in art.files.items()}
    return _write(out, _stored_sections(art), sources, {n: e.sha256 for n, e in art.files.items()})
