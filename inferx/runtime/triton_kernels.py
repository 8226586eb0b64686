"""Loading generated Triton kernels and launching them with bound arguments.

``load_kernel`` turns a kernel's source into its ``@triton.jit`` function: compiled for the GPU,
or run by Triton's interpreter on the CPU (fp32/fp16 only; bf16 is wrong there). Executing the
source is the one place InferX runs text it did not write itself in this process: an artifact is
code, like a shared library (docs/architecture.md, "Trust"). Sessions call it only after the
artifact and every kernel source in it are verified (``inferx.runtime.manifest.read_kernels``).

Triton reads a kernel's source through ``inspect``, so the text also goes to a cache file: a
directory private to the user (``CACHE``, mode 0700, owned by the user: anything else is
refused), one file per source named by the kernel and the sha256 of its text. The file is checked
against that hash before it is used and rewritten when it differs, and the code that runs is
compiled from the verified text itself: a file planted in the cache never runs. The directory is
named by the user's id, so users of one machine never share (or block) one.

Interpreted kernels run whatever mode Triton was imported in: a CPU session in a process where
something imported Triton before ``TRITON_INTERPRET=1`` was set (as importing transformers can)
runs each launch with Triton's own ``@jit`` library functions (``tl.sum``, ``tl.cdiv``, ...)
swapped for interpreted ones, and puts them back after.
"""

from __future__ import annotations

import functools
import hashlib
import linecache
import os
import re
import stat
import sys
import tempfile
import threading
import types
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from inferx.runtime import expr
from inferx.runtime.artifact import ArtifactError
from inferx.runtime.kernel_source import KernelSource

CACHE = Path(tempfile.gettempdir()) / f"inferx-kernels-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_LOCK = threading.RLock()


@contextmanager
def _interpret(on: bool) -> Iterator[None]:
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = old


@functools.cache
def _scratch_allocator() -> None:
    """Triton's launcher asks an allocator for a kernel's global scratch (the TMA descriptors a
    program makes on the device); torch's caching allocator serves it, inside graph capture too.
    Set once per process."""
    import torch
    import triton

    def alloc(size: int, alignment: int, stream: Any) -> Any:
        return torch.empty(size, dtype=torch.int8, device="cuda")  # 512-byte aligned

    triton.set_allocator(alloc)


def private_cache(path: Path) -> Path:
    """``path`` as a directory only this user can use: made with mode 0700, or an existing one
    owned by this user (its group and other bits cleared). PermissionError naming the directory
    for anything else: a symlink, a file, another user's directory."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.lstat()
    except OSError as e:
        raise PermissionError(
            e.errno, f"kernel cache: cannot make a private directory: {e.strerror}", str(path)
        ) from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise PermissionError(
            1, "kernel cache: not a directory of this user's (a symlink or a file); remove it", str(path)
        )
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise PermissionError(
            1,
            f"kernel cache: owned by user {st.st_uid}, not by this user ({os.getuid()}): "
            "another user made it; remove it",
            str(path),
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def _cached_source(ks: KernelSource, digest: str) -> Path:
    """The cache file holding exactly ``ks.source`` (sha256 ``digest``), written if missing or different."""
    data = ks.source.encode()
    path = private_cache(CACHE) / f"{ks.name}_{digest[:16]}.py"
    for _ in range(2):
        try:
            st = path.lstat()
            if stat.S_ISREG(st.st_mode) and hashlib.sha256(path.read_bytes()).hexdigest() == digest:
                return path
        except FileNotFoundError:
            pass
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    raise PermissionError(1, "kernel cache: a kernel's source file does not keep what was written", str(path))


def load_kernel(ks: KernelSource, *, interpret: bool) -> Any:
    """The kernel function of ``ks`` (a fresh module per call); with ``interpret``, one that runs in
    Triton's interpreter whatever mode Triton was imported in (``fn[grid](*args)`` launches both)."""
    if not _NAME.fullmatch(ks.name):
        raise ArtifactError(f"kernel name {ks.name[:80]!r} is not an identifier of at most 128 characters")
    if not interpret and "make_tensor_descriptor" in ks.source:
        _scratch_allocator()
    digest = hashlib.sha256(ks.source.encode()).hexdigest()
    path = str(_cached_source(ks, digest))
    module = types.ModuleType(f"inferx_kernel_{ks.name}_{digest[:16]}_{'i' if interpret else 'c'}")
    module.__file__ = path
    # Triton reads the source through inspect (linecache): it reads the verified text, not the file.
    linecache.cache[path] = (len(ks.source), None, ks.source.splitlines(keepends=True), path)
    # The documented kernel-loading step: the verified source of an artifact's kernel runs here.
    code = compile(ks.source, path, "exec")
    with _LOCK, _interpret(interpret):
        exec(code, module.__dict__)  # noqa: S102
    fn = getattr(module, ks.name)
    return _Interpreted(fn, ks.name) if interpret else fn


class _Interpreted:
    """An interpreted kernel: ``fn[grid](*args, **kwargs)`` launches it under ``interpreting``. A
    kernel that fails in the interpreter raises ArtifactError naming it (the message of Triton's
    error, the error itself chained)."""

    def __init__(self, fn: Any, name: str):
        self.fn = fn
        self.name = name

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        launch = self.fn[grid]

        def run(*args: Any, **kwargs: Any) -> Any:
            with interpreting():
                try:
                    return launch(*args, **kwargs)
                except Exception as e:
                    why = " ".join(str(e).split())[:300]
                    raise ArtifactError(
                        f"kernel {self.name} failed in Triton's interpreter (grid {list(grid)}): "
                        f"{type(e).__name__}: {why}"
                    ) from e

        return run


@contextmanager
def interpreting() -> Iterator[None]:
    """Triton's interpreter on, for kernels launched inside: ``TRITON_INTERPRET=1``, and Triton's
    ``@jit`` library functions that were made for compiling (Triton imported without it) swapped
    for interpreted twins until the block ends. One thread at a time."""
    with _LOCK, _interpret(True):
        swaps = _twins()
        for holder, name, _, twin in swaps:
            setattr(holder, name, twin)
        try:
            yield
        finally:
            for holder, name, original, _ in swaps:
                setattr(holder, name, original)


_TWINS: dict[int, tuple[Any, Any]] = {}  # id of a compiled function -> (it, its interpreted twin)


def _twins() -> list[tuple[Any, str, Any, Any]]:
    """(holder, attribute, compiled function, interpreted twin) for every ``@jit`` function of
    ``triton.language`` made for compiling: in its modules and as methods of ``tl.tensor``."""
    try:
        import triton.language as tl
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction
    except ImportError:  # a Triton without these: its own mode decides
        return []
    holders: list[Any] = [
        m
        for n, m in list(sys.modules.items())
        if m is not None and (n == "triton.language" or n.startswith("triton.language."))
    ]
    holders.append(tl.core.tensor)
    swaps = []
    for holder in holders:
        for name, value in list(vars(holder).items()):
            if isinstance(value, JITFunction):
                if id(value) not in _TWINS:
                    _TWINS[id(value)] = (value, InterpretedFunction(value.fn))
                swaps.append((holder, name, value, _TWINS[id(value)][1]))
    return swaps


def grid(ks: KernelSource, env: Mapping[str, int]) -> tuple[int, ...]:
    """The launch grid of ``ks`` at the symbol values ``env`` (each dim at least 1)."""
    return tuple(max(1, expr.evaluate(g, env)) for g in ks.grid)
