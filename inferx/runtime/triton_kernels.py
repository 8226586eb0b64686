"""Loading generated Triton kernels and launching them with bound arguments.

``load_kernel`` turns a kernel's source into its ``@triton.jit`` function: compiled for the GPU,
or run by Triton's interpreter on the CPU (fp32/fp16 only; bf16 is wrong there). The source is
written to a cache file first because Triton reads a kernel's source through ``inspect``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from inferx.runtime.kernel_source import KernelSource

_CACHE = Path(tempfile.gettempdir()) / "inferx-kernels"


@contextmanager
def _interpret(on: bool):
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


def load_kernel(ks: KernelSource, *, interpret: bool) -> Any:
    """The kernel function of ``ks`` (a fresh module per source text and mode)."""
    if not interpret and "make_tensor_descriptor" in ks.source:
        _scratch_allocator()
    digest = hashlib.sha256(ks.source.encode()).hexdigest()[:16]
    _CACHE.mkdir(parents=True, exist_ok=True)
    path = _CACHE / f"{ks.name}_{digest}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(ks.source)
        tmp.replace(path)
    mod_name = f"inferx_kernel_{ks.name}_{digest}_{'i' if interpret else 'c'}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    with _interpret(interpret):
        spec.loader.exec_module(module)
    return getattr(module, ks.name)


def grid(ks: KernelSource, env: Mapping[str, int]) -> tuple[int, ...]:
    names = {f"S_{k}": v for k, v in env.items()}
    names["cdiv"] = lambda a, b: -(-a // b)  # type: ignore[assignment]
    names["min"] = min  # type: ignore[assignment]  # a persistent grid: min(tiles, programs)
    return tuple(max(1, int(eval(g, {"__builtins__": {}}, names))) for g in ks.grid)  # noqa: S307
