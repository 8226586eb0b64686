"""The artifact container: its on-disk format and its verification (loading).

An artifact is what ``inferx.compile`` produces and ``inferx.load`` reads. This module knows
nothing of what the compiler puts inside (kernels, weights, plans are opaque files and JSON
sections here) and imports only numpy and the standard library, so a runtime loads artifacts
without the compiler installed.

Directory form
--------------
A directory holding ``manifest.json`` and the artifact's files, at any depth below it
(``kernels/k3.cubin``, ``weights/NAME.bin``, ...). Nothing else: no extra files, no symlinks, no
empty directories. Files are written with mode 0644 and directories with 0755.

The manifest
------------
A JSON object, written canonically: UTF-8, keys sorted, two-space indent, ``", "`` and ``": "``
separators, no NaN or infinity, a trailing newline. Loading refuses bytes that are not the
canonical rendering of what they parse to. Keys:

- ``magic``: ``"inferx-artifact"``; ``format_version``: int, ``FORMAT_VERSION`` (3: the sections
  follow the schema of ``inferx.runtime.manifest``; 2 wrote them without one, its launches
  listing their kernel variants by rows, ``by_rows``; 1 listed them by batch). A runtime reads
  its own version alone: any other is refused, naming both;
- ``compiler_version``, ``triton_version``, ``target`` (``"sm_90"``, ``"cpu"``): non-empty strings;
- ``files``: ``{relative path: {"size": bytes, "sha256": lowercase hex}}`` for every file but the
  manifest; in the packed form each entry also has ``"offset"`` (see below);
- ``manifest_sha256``: sha256 of the canonical manifest without this key, so that any change of
  the manifest, even one that parses, is caught (integrity against corruption, not a signature);
- any other key is a caller's section, stored as given (as JSON: tuples come back as lists);
  this module checks none of them but the three strings above. The compiler's sections and their
  checks are ``inferx.runtime.manifest``'s.

A path is relative, ``/``-separated, made of components of ``[A-Za-z0-9._+=@-]`` that are not
``.`` or ``..``; no two paths differ only in case, no path is a directory of another, and
``manifest.json`` at the top is reserved.

Packed form (``.ixa``)
----------------------
One file; integers little-endian::

    offset   size  field
    0        8     magic b"\\x89IXA\\r\\n\\x1a\\n"
    8        4     u32 format version (equal to the manifest's format_version)
    12       4     u32 header length, 64
    16       8     u64 manifest length M, in bytes, with its trailing newline
    24       8     u64 payload offset P = align64(64 + M)
    32       8     u64 length of the whole packed file
    40       24    reserved, zero
    64       M     the canonical manifest (packed variant: entries carry "offset")
    64 + M   ..    zero bytes up to P
    P        ..    the files in sorted path order; the file at P + files[path]["offset"]; the
                   first offset is 0, each next one is the end of the previous file rounded up to
                   a multiple of 64; zero bytes between files; the packed file ends where the
                   last file ends

so every file starts 64-byte aligned in the packed file and a weight can be memory-mapped in place.
The packed manifest is the directory manifest with offsets added (and its ``manifest_sha256``
recomputed): ``unpack(pack(d))`` is byte-identical to ``d`` and ``pack(unpack(p))`` to ``p``.

Verification (``load_artifact``)
--------------------------------
Always: the header, the manifest (at most ``MAX_MANIFEST_BYTES``, checked before it is read;
JSON, canonical, self-hash, magic, version, required keys and their types, paths), the target if
asked, every file's presence, type and size, no extra files, the packed layout.
``verify="full"`` (the default) also hashes every file and checks that every padding byte of the
packed form is zero: then any flipped bit anywhere is refused. ``verify="structure"`` skips the
reading of file contents, for fast loads of trusted artifacts; ``Artifact.file_bytes`` still
checks the hash of what it returns.

Writing, packing and unpacking: ``inferx.runtime.artifact_write``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO

import numpy as np

MAGIC = "inferx-artifact"
FORMAT_VERSION = 3
PACKED_MAGIC = b"\x89IXA\r\n\x1a\n"
PACKED_SUFFIX = ".ixa"
HEADER_LEN = 64
ALIGN = 64
MANIFEST_NAME = "manifest.json"

_HEADER = struct.Struct("<8sIIQQQ24s")
_RESERVED = frozenset({"magic", "format_version", "files", "manifest_sha256"})
_REQUIRED_STR = ("compiler_version", "triton_version", "target")
_COMPONENT = re.compile(r"[A-Za-z0-9._+=@-]+")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20
_MAX_PATH = 1024
MAX_MANIFEST_BYTES = 64 << 20  # a large model's manifest is a few MiB; checked before it is read
_VERIFY_MODES = ("full", "structure")


class ArtifactError(ValueError):
    """An artifact that cannot be written or loaded; the message names the artifact, the file
    inside it where there is one, and what failed."""


@dataclass(frozen=True)
class FileEntry:
    """One file of a loaded artifact: its content is ``size`` bytes at byte ``data_offset`` of
    ``holder`` (the file itself in the directory form, the ``.ixa`` file in the packed form)."""

    name: str
    size: int
    sha256: str
    holder: Path
    data_offset: int


@dataclass(frozen=True)
class Artifact:
    """A verified artifact. ``manifest`` is the manifest as stored (read-only view)."""

    path: Path
    packed: bool
    manifest: Mapping[str, Any]
    files: Mapping[str, FileEntry]
    verified: str

    @property
    def format_version(self) -> int:
        return int(self.manifest["format_version"])

    @property
    def target(self) -> str:
        return str(self.manifest["target"])

    @property
    def compiler_version(self) -> str:
        return str(self.manifest["compiler_version"])

    @property
    def triton_version(self) -> str:
        return str(self.manifest["triton_version"])

    def sections(self) -> dict[str, Any]:
        """The caller's sections: the manifest without the keys this module owns."""
        return {k: v for k, v in self.manifest.items() if k not in _RESERVED}

    def _entry(self, name: str) -> FileEntry:
        entry = self.files.get(name)
        if entry is None:
            raise ArtifactError(f"{self.path}: no file {name!r} in this artifact")
        return entry

    def file_bytes(self, name: str) -> bytes:
        """The content of file ``name``, checked against its size and sha256 as it is read."""
        entry = self._entry(name)
        try:
            with entry.holder.open("rb") as f:
                f.seek(entry.data_offset)
                data = f.read(entry.size)
        except OSError as e:
            raise ArtifactError(f"{self.path}: file {name!r}: cannot read: {e}") from e
        if len(data) != entry.size:
            raise ArtifactError(f"{self.path}: file {name!r}: truncated: {len(data)} of {entry.size} bytes")
        if hashlib.sha256(data).hexdigest() != entry.sha256:
            raise ArtifactError(f"{self.path}: file {name!r}: sha256 mismatch (changed since load)")
        return data

    def mmap(self, name: str, dtype: Any, shape: tuple[int, ...] | int, *, offset: int | None = None) -> np.ndarray:
        """A read-only array mapped onto file ``name`` (in place, in the packed form too).

        With ``offset=None`` the array must cover the file exactly (a wrong dtype or shape is
        refused, not silently truncated); with an ``offset`` (bytes into the file) it must fit.
        """
        entry = self._entry(name)
        try:
            dt = np.dtype(dtype)
        except TypeError as e:
            raise ArtifactError(f"{self.path}: file {name!r}: bad dtype {dtype!r}: {e}") from e
        shp = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
        if any(d < 0 for d in shp):
            raise ArtifactError(f"{self.path}: file {name!r}: negative shape {shp}")
        nbytes = int(np.prod(shp, dtype=np.int64)) * dt.itemsize
        start = 0 if offset is None else int(offset)
        what = f"{dt}{list(shp)} ({nbytes} bytes)"
        if offset is None and nbytes != entry.size:
            raise ArtifactError(f"{self.path}: file {name!r} holds {entry.size} bytes, {what} does not cover it")
        if start < 0 or start + nbytes > entry.size:
            raise ArtifactError(f"{self.path}: file {name!r} holds {entry.size} bytes, {what} at {start} overruns it")
        if nbytes == 0:
            empty = np.zeros(shp, dtype=dt)
            empty.flags.writeable = False
            return empty
        try:
            return np.memmap(entry.holder, dtype=dt, mode="r", offset=entry.data_offset + start, shape=shp)
        except (OSError, ValueError) as e:
            raise ArtifactError(f"{self.path}: file {name!r}: cannot memory-map: {e}") from e


# --- canonical JSON and the manifest --------------------------------------------------------


def canonical_json(obj: Any) -> bytes:
    """The canonical bytes of a JSON value (the manifest's encoding). Raises TypeError or
    ValueError for what JSON cannot hold."""
    text = json.dumps(obj, sort_keys=True, indent=2, separators=(",", ": "), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8") + b"\n"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _with_self_hash(manifest: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return {**body, "manifest_sha256": _sha256(canonical_json(body))}


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _packed_offsets(sizes: Mapping[str, int]) -> dict[str, int]:
    """Payload-relative offsets of files in sorted order, each 64-byte aligned."""
    offsets: dict[str, int] = {}
    end = 0
    for name in sorted(sizes):
        offsets[name] = _align(end)
        end = offsets[name] + sizes[name]
    return offsets


def _payload_len(sizes: Mapping[str, int], offsets: Mapping[str, int]) -> int:
    return max((offsets[n] + sizes[n] for n in sizes), default=0)


def _path_problem(name: Any) -> str | None:
    """Why ``name`` is not an acceptable file path inside an artifact, or None."""
    if not isinstance(name, str):
        return f"path {name!r} is not a string"
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return f"path {name!r} is absolute"
    parts = name.split("/")
    if ".." in parts:
        return f"path {name!r} escapes the artifact"
    if not name or len(name) > _MAX_PATH or any(p in ("", ".") or not _COMPONENT.fullmatch(p) for p in parts):
        return f"path {name!r} is not a plain relative path of [A-Za-z0-9._+=@-] components"
    if name == MANIFEST_NAME:
        return f"path {name!r} is reserved"
    return None


def _names_problem(names: list[str]) -> str | None:
    """A clash between paths (case-only difference, a file that is also a directory), or None."""
    folded: dict[str, str] = {}
    for n in names:
        other = folded.setdefault(n.casefold(), n)
        if other != n:
            return f"paths {other!r} and {n!r} differ only in case"
    dirs = {"/".join(n.split("/")[:i]) for n in names for i in range(1, n.count("/") + 1)}
    clash = sorted(dirs.intersection(names))
    return f"path {clash[0]!r} is both a file and a directory" if clash else None


# --- loading --------------------------------------------------------------------------------


def _fail(where: Path, msg: str) -> ArtifactError:
    return ArtifactError(f"{where}: {msg}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _parse_manifest(where: Path, raw: bytes, packed: bool) -> dict[str, Any]:
    """Parses and checks a manifest up to (not including) the files on disk."""
    m = "manifest"
    try:
        manifest = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as e:
        raise _fail(where, f"{m}: not UTF-8: {e}") from e
    except (ValueError, RecursionError) as e:
        raise _fail(where, f"{m}: invalid JSON: {e}") from e
    if not isinstance(manifest, dict):
        raise _fail(where, f"{m}: not a JSON object")
    if manifest.get("magic") != MAGIC:
        raise _fail(where, f"{m}: magic is {manifest.get('magic')!r}, not {MAGIC!r}: not an inferx artifact")
    version = manifest.get("format_version")
    if type(version) is not int:
        raise _fail(where, f"{m}: format_version {version!r} is not an integer")
    if version > FORMAT_VERSION:
        raise _fail(
            where, f"artifact format version {version} is newer than this runtime's {FORMAT_VERSION}: upgrade inferx"
        )
    if version < FORMAT_VERSION:
        raise _fail(
            where,
            f"artifact format version {version} is not supported (this runtime reads {FORMAT_VERSION}): "
            "compile the model again",
        )
    try:
        canonical = canonical_json(manifest)
    except (TypeError, ValueError, RecursionError) as e:
        raise _fail(where, f"{m}: cannot be re-encoded: {e}") from e
    if canonical != raw:
        at = next(
            (i for i, (a, b) in enumerate(zip(canonical, raw, strict=False)) if a != b), min(len(canonical), len(raw))
        )
        raise _fail(where, f"{m}: not in canonical form (differs at byte {at}): edited or corrupted")
    claimed = manifest.get("manifest_sha256")
    if not isinstance(claimed, str) or not _HEX64.fullmatch(claimed):
        raise _fail(where, f"{m}: manifest_sha256 {claimed!r} is not a lowercase sha256 hex digest")
    actual = _with_self_hash(manifest)["manifest_sha256"]
    if claimed != actual:
        raise _fail(where, f"{m}: manifest_sha256 mismatch (says {claimed[:12]}..., content {actual[:12]}...)")
    for key in _REQUIRED_STR:
        value = manifest.get(key)
        if not isinstance(value, str) or not value:
            raise _fail(where, f"{m}: {key} {value!r} is not a non-empty string")
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise _fail(where, f"{m}: files is {type(files).__name__}, not an object")
    keys = {"offset", "sha256", "size"} if packed else {"sha256", "size"}
    for name, entry in files.items():
        problem = _path_problem(name)
        if problem:
            raise _fail(where, f"{m}: {problem}")
        if not isinstance(entry, dict) or set(entry) != keys:
            got = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise _fail(where, f"{m}: file {name!r}: entry must have exactly the keys {sorted(keys)}, has {got}")
        for key in keys - {"sha256"}:
            if type(entry[key]) is not int or entry[key] < 0:
                raise _fail(where, f"{m}: file {name!r}: {key} {entry[key]!r} is not a non-negative integer")
        if not isinstance(entry["sha256"], str) or not _HEX64.fullmatch(entry["sha256"]):
            raise _fail(where, f"{m}: file {name!r}: sha256 {entry['sha256']!r} is not a lowercase hex digest")
    problem = _names_problem(list(files))
    if problem:
        raise _fail(where, f"{m}: {problem}")
    return manifest


def _check_target(where: Path, manifest: Mapping[str, Any], target: str | None) -> None:
    if target is not None and manifest["target"] != target:
        raise _fail(where, f"artifact built for {manifest['target']}, this device is {target}")


def _hash_range(f: BinaryIO, offset: int, size: int) -> tuple[str, int]:
    """sha256 of ``size`` bytes at ``offset`` and how many bytes could be read."""
    h = hashlib.sha256()
    f.seek(offset)
    got = 0
    while got < size:
        block = f.read(min(_CHUNK, size - got))
        if not block:
            break
        h.update(block)
        got += len(block)
    return h.hexdigest(), got


def _load_dir(path: Path, target: str | None, full: bool) -> Artifact:
    mpath = path / MANIFEST_NAME
    try:
        st = mpath.lstat()
        if not stat.S_ISREG(st.st_mode):
            raise _fail(path, f"{MANIFEST_NAME} is not a regular file")
        if st.st_size > MAX_MANIFEST_BYTES:
            raise _fail(path, f"{MANIFEST_NAME}: {st.st_size} bytes, past the bound of {MAX_MANIFEST_BYTES}")
        with mpath.open("rb") as f:
            raw = f.read(MAX_MANIFEST_BYTES + 1)
        if len(raw) > MAX_MANIFEST_BYTES:
            raise _fail(path, f"{MANIFEST_NAME}: grew past the bound of {MAX_MANIFEST_BYTES} bytes while read")
    except FileNotFoundError as e:
        raise _fail(path, f"{MANIFEST_NAME} is missing: not an artifact directory") from e
    except OSError as e:
        raise _fail(path, f"{MANIFEST_NAME}: cannot read: {e}") from e
    manifest = _parse_manifest(path, raw, packed=False)
    _check_target(path, manifest, target)
    listed: dict[str, dict[str, Any]] = manifest["files"]

    present: set[str] = set()
    needed_dirs = {"/".join(n.split("/")[:i]) for n in listed for i in range(1, n.count("/") + 1)}
    try:
        for root, dirnames, filenames in os.walk(path, onerror=_raise, followlinks=False):
            rel_root = Path(root).relative_to(path).as_posix()
            prefix = "" if rel_root == "." else rel_root + "/"
            for d in dirnames:
                rel = prefix + d
                if os.path.islink(os.path.join(root, d)):
                    raise _fail(path, f"{rel!r} is a symlink")
                if rel not in needed_dirs:
                    raise _fail(path, f"extra directory {rel!r} not listed in the manifest")
            for fn in filenames:
                rel = prefix + fn
                if rel == MANIFEST_NAME:
                    continue
                if rel not in listed:
                    raise _fail(path, f"extra file {rel!r} not listed in the manifest")
                present.add(rel)
    except OSError as e:
        raise _fail(path, f"cannot list: {e}") from e
    missing = sorted(set(listed) - present)
    if missing:
        raise _fail(path, f"file {missing[0]!r} listed in the manifest is missing")

    entries: dict[str, FileEntry] = {}
    for name in sorted(listed):
        fpath = path / name
        want = listed[name]
        try:
            st = fpath.lstat()
            if not stat.S_ISREG(st.st_mode):
                raise _fail(path, f"file {name!r} is not a regular file")
            if st.st_size != want["size"]:
                raise _fail(path, f"file {name!r}: size {st.st_size}, the manifest says {want['size']}")
            if full:
                with fpath.open("rb") as f:
                    digest, got = _hash_range(f, 0, want["size"])
                if got != want["size"] or digest != want["sha256"]:
                    raise _fail(
                        path,
                        f"file {name!r}: sha256 mismatch (content {digest[:12]}..., manifest {want['sha256'][:12]}...)",
                    )
        except OSError as e:
            raise _fail(path, f"file {name!r}: cannot read: {e}") from e
        entries[name] = FileEntry(name, want["size"], want["sha256"], fpath, 0)
    return Artifact(path, False, MappingProxyType(manifest), MappingProxyType(entries), "full" if full else "structure")


def _raise(e: OSError) -> None:
    raise e


def _load_packed(path: Path, target: str | None, full: bool) -> Artifact:
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise _fail(path, "not a regular file")
        with path.open("rb") as f:
            return _read_packed(path, f, os.fstat(f.fileno()).st_size, target, full)
    except OSError as e:
        raise _fail(path, f"cannot read: {e}") from e


def _read_packed(path: Path, f: BinaryIO, size: int, target: str | None, full: bool) -> Artifact:
    if size < HEADER_LEN:
        raise _fail(path, f"header: truncated: the file has {size} bytes, the header alone takes {HEADER_LEN}")
    magic, version, header_len, m_len, payload, total, reserved = _HEADER.unpack(f.read(HEADER_LEN))
    if magic != PACKED_MAGIC:
        raise _fail(path, f"header: magic bytes {magic!r} are not {PACKED_MAGIC!r}: not a packed inferx artifact")
    if version > FORMAT_VERSION:
        raise _fail(
            path, f"artifact format version {version} is newer than this runtime's {FORMAT_VERSION}: upgrade inferx"
        )
    if version < FORMAT_VERSION:
        raise _fail(
            path,
            f"artifact format version {version} is not supported (this runtime reads {FORMAT_VERSION}): "
            "compile the model again",
        )
    if header_len != HEADER_LEN:
        raise _fail(path, f"header: header length {header_len}, expected {HEADER_LEN}")
    if reserved != bytes(24):
        raise _fail(path, "header: reserved bytes are not zero")
    if total != size:
        raise _fail(path, f"header: says the file has {total} bytes, it has {size}: truncated or extended")
    if HEADER_LEN + m_len > size:
        raise _fail(path, f"header: manifest length {m_len} runs past the end of the file ({size} bytes)")
    if m_len > MAX_MANIFEST_BYTES:
        raise _fail(path, f"header: manifest length {m_len}, past the bound of {MAX_MANIFEST_BYTES} bytes")
    if payload != _align(HEADER_LEN + m_len):
        raise _fail(path, f"header: payload offset {payload}, expected {_align(HEADER_LEN + m_len)}")
    if payload > size:
        raise _fail(path, f"header: payload offset {payload} is past the end of the file ({size} bytes)")
    raw = f.read(m_len)
    manifest = _parse_manifest(path, raw, packed=True)
    if manifest["format_version"] != version:
        raise _fail(path, f"manifest format_version {manifest['format_version']} differs from the header's {version}")
    _check_target(path, manifest, target)
    listed: dict[str, dict[str, Any]] = manifest["files"]
    sizes = {n: e["size"] for n, e in listed.items()}
    expected = _packed_offsets(sizes)
    for name in sorted(listed):
        if listed[name]["offset"] != expected[name]:
            raise _fail(path, f"file {name!r}: offset {listed[name]['offset']}, the layout puts it at {expected[name]}")
    end = payload + _payload_len(sizes, expected)
    if end != size:
        raise _fail(path, f"the files end at byte {end}, the file has {size} bytes")

    if full:
        gaps = [(HEADER_LEN + m_len, payload, "manifest")]
        pos = payload
        for name in sorted(listed):
            start = payload + expected[name]
            gaps.append((pos, start, name))
            digest, got = _hash_range(f, start, sizes[name])
            if got != sizes[name] or digest != listed[name]["sha256"]:
                raise _fail(
                    path,
                    f"file {name!r}: sha256 mismatch (content {digest[:12]}..., "
                    f"manifest {listed[name]['sha256'][:12]}...)",
                )
            pos = start + sizes[name]
        for lo, hi, after in gaps:
            f.seek(lo)
            if f.read(hi - lo).strip(b"\0"):
                raise _fail(path, f"padding before {after!r} (bytes {lo}..{hi}) is not zero")
    entries = {n: FileEntry(n, sizes[n], listed[n]["sha256"], path, payload + expected[n]) for n in sorted(listed)}
    return Artifact(path, True, MappingProxyType(manifest), MappingProxyType(entries), "full" if full else "structure")


def load_artifact(path: Path | str, *, target: str | None = None, verify: str = "full") -> Artifact:
    """Loads and verifies an artifact, directory or packed (see the module docstring for what
    is checked). Every failure raises ArtifactError naming the artifact, the file, and what failed.
    """
    path = Path(path)
    if verify not in _VERIFY_MODES:
        raise ArtifactError(f"verify must be one of {_VERIFY_MODES}, got {verify!r}")
    try:
        st = path.stat()
    except OSError as e:
        raise _fail(path, f"no such artifact: {e}") from e
    if stat.S_ISDIR(st.st_mode):
        return _load_dir(path, target, verify == "full")
    return _load_packed(path, target, verify == "full")
