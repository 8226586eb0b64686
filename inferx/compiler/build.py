"""Cubins from kernel sources, in worker processes: what the compiler's build phase and the tuner's
runner share (``compile_one``). Compilation never runs in the caller's process: Triton's
interpreter mode (used by CPU sessions) is process-wide.

``build_cubins`` runs ``jobs`` workers, each ``python -m inferx.compiler.build_worker`` (requests
and answers as JSON lines): a process started by module name never imports the caller's
``__main__``, so compiling from a notebook, a REPL or ``python -`` works as from a script."""

from __future__ import annotations

import base64
import json
import os
import queue
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from typing import IO, Any

from inferx.compiler.families.common.tile import SIG_DTYPE
from inferx.compiler.ir.types import DType
from inferx.compiler.options import CompileError
from inferx.runtime.kernel_source import KernelSource


def build_cubins(kernels: Mapping[str, KernelSource], target: str, jobs: int,
                 say: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """Every kernel's cubin (``compile_one``'s answer), built by up to ``jobs`` workers at once; the
    first kernel that does not build stops the build with a CompileError naming it."""
    from concurrent.futures import ThreadPoolExecutor

    arch = int(target.removeprefix("sm_"))
    names = sorted(kernels)
    out: dict[str, dict[str, Any]] = {}
    if not names:
        return out
    workers: list[_Worker] = []
    idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()

    def build(name: str) -> dict[str, Any]:
        worker = idle.get()
        try:
            return worker.build(kernels[name], arch)
        finally:
            idle.put(worker)

    n = min(max(1, jobs), len(names))
    threads = ThreadPoolExecutor(max_workers=n)
    try:
        for _ in range(n):
            workers.append(_Worker())
            idle.put(workers[-1])
        futures = {name: threads.submit(build, name) for name in names}
        for i, name in enumerate(names, 1):
            try:
                out[name] = futures[name].result()
            except _WorkerDied as e:
                raise CompileError(f"a kernel build worker died while building {name} for {target}: {e}") from None
            except _BuildFailed as e:  # a kernel that does not compile is a compiler bug: name it
                raise CompileError(f"kernel {name} failed to compile for {target}: {e}") from None
            say(f"        built {i}/{len(names)}: {name}")
    finally:
        for w in workers:
            w.stop(now=len(out) < len(names))  # after an error, those still building too
        threads.shutdown(wait=True, cancel_futures=True)
        for w in workers:
            w.close()
    return out


class _BuildFailed(Exception):
    """The worker answered that the kernel does not compile (the message is Triton's)."""


class _WorkerDied(Exception):
    """The worker ended without answering (the message is the end of its stderr)."""


class _Worker:
    """One ``inferx.compiler.build_worker`` process: a request line in, an answer line out. It sees
    the caller's module search path, and its stderr is kept to say why it died."""

    def __init__(self) -> None:
        self.log: IO[bytes] = tempfile.TemporaryFile()
        env = {**os.environ, "TRITON_INTERPRET": "0",
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            self.proc = subprocess.Popen([sys.executable, "-P", "-m", "inferx.compiler.build_worker"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env)
        except OSError as e:
            self.log.close()
            raise CompileError(f"cannot start a kernel build worker with {sys.executable!r}: {e}") from None

    def build(self, ks: KernelSource, arch: int) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps({"kernel": ks.to_json(), "arch": arch}).encode() + b"\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, ValueError):  # ValueError: closed after another kernel failed
            line = b""
        if not line:
            raise _WorkerDied(self._why())
        answer = json.loads(line)
        if "error" in answer:
            raise _BuildFailed(answer["error"])
        built: dict[str, Any] = answer["built"]
        built["cubin"] = base64.b64decode(built["cubin"])
        return built

    def _why(self) -> str:
        code = self.proc.wait()
        self.log.seek(0)
        lines = [ln for ln in self.log.read().decode(errors="replace").splitlines() if ln.strip()]
        return f"exit code {code}" + (f": {lines[-1].strip()}" if lines else "")

    def stop(self, now: bool) -> None:
        """Ends the process: at once, or at the end of its stdin (it is idle)."""
        assert self.proc.stdin is not None
        if now:
            self.proc.kill()
        try:
            self.proc.stdin.close()
        except OSError:  # a broken pipe: it has ended
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self.log.close()


def compile_one(ks_json: str, arch: int) -> dict[str, Any]:
    """One kernel's cubin and what a launcher needs beside it: dynamic shared memory, and how many
    pointer parameters the compiler appends after the kernel's own (``extra_params``, counted in
    the PTX entry; Triton's scratch pointers: the first is ``global_scratch`` bytes per program,
    aligned to ``global_scratch_align``, or NULL when that is 0, as is the second), and the warps
    a program runs (``launch_warps``, from the compiled metadata, as Triton's own launcher takes
    it: a pass such as warp specialization may change it). Every
    pointer parameter is declared 16-byte aligned (runtimes allocate every buffer separately with
    at least that alignment), so loads vectorize as they do under Triton's JIT.

    Cubins carry no source line information: it names absolute paths (the kernel's source file,
    Triton's installation), so with it the same kernel built on two machines, or from two
    virtual environments, gave different bytes. Without it an artifact's bytes depend only on
    the model, the options and the toolchain's versions."""
    import os
    import re

    os.environ["TRITON_INTERPRET"] = "0"
    os.environ["TRITON_DISABLE_LINE_INFO"] = "1"  # a cache-key variable: Triton's cache keeps the two apart
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from inferx.runtime.triton_kernels import load_kernel

    ks = KernelSource.from_json(json.loads(ks_json))
    fn = load_kernel(ks, interpret=False)
    sig = signature(ks)
    aligned = {(i,): [["tt.divisibility", 16]] for i, ty in enumerate(sig.values()) if ty.startswith("*")}
    compiled = triton.compile(
        ASTSource(fn=fn, signature=sig, constexprs=ks.constexprs, attrs=aligned),
        target=GPUTarget("cuda", arch, 64),
        options={"num_warps": ks.num_warps, "num_stages": ks.num_stages},
    )
    entry = re.search(r"\.entry\s+" + re.escape(ks.name) + r"\s*\((.*?)\)", compiled.asm["ptx"], re.S)
    n_params = entry.group(1).count(".param") if entry else 0
    own = sum(1 for ty in sig.values() if ty != "constexpr")
    return {"cubin": compiled.asm["cubin"], "shared": int(compiled.metadata.shared),
            "launch_warps": int(compiled.metadata.num_warps),
            "extra_params": n_params - own, "global_scratch": int(getattr(compiled.metadata, "global_scratch_size", 0)),
            "global_scratch_align": int(getattr(compiled.metadata, "global_scratch_align", 1) or 1)}


def signature(ks: KernelSource) -> dict[str, str]:
    """The Triton compile signature of a kernel (pointer dtypes, i32 symbols, constexprs)."""
    sig: dict[str, str] = {}
    for p in ks.params:
        sig[p.name] = f"*{SIG_DTYPE[DType(p.dtype)]}" if p.kind in ("in", "out", "scratch") else "i32"
    for c in ks.constexprs:
        sig[c] = "constexpr"
    return sig
