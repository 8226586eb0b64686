"""Cubins from kernel sources, in worker processes: what the compiler's build phase and the tuner's
runner share. Triton's interpreter mode (used by CPU sessions) is process-wide, so compilation
never runs in the caller's process."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from inferx.compiler.families.common.tile import SIG_DTYPE
from inferx.compiler.ir.types import DType
from inferx.compiler.options import CompileError
from inferx.runtime.kernel_source import KernelSource


def build_cubins(kernels: Mapping[str, KernelSource], target: str, jobs: int,
           say: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """Compiles every kernel to a cubin in worker processes (Triton's interpreter mode, used by
    CPU sessions, is process-wide, so compilation never runs in the caller's process)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    arch = int(target.removeprefix("sm_"))
    out: dict[str, dict[str, Any]] = {}
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=ctx) as pool:
        futures = {name: pool.submit(compile_one, json.dumps(ks.to_json()), arch) for name, ks in kernels.items()}
        for i, (name, fut) in enumerate(sorted(futures.items()), 1):
            try:
                out[name] = fut.result()
            except BrokenProcessPool:
                raise CompileError(
                    f"a kernel build worker died while building {name} for {target}. Kernels are built in "
                    "worker processes that import your __main__ module: a script that calls inferx.compile must "
                    "do so under `if __name__ == '__main__':`"
                ) from None
            except Exception as e:  # a kernel that does not compile is a compiler bug: name it
                raise CompileError(f"kernel {name} failed to compile for {target}: {e}") from None
            say(f"        built {i}/{len(futures)}: {name}")
    return out


def compile_one(ks_json: str, arch: int) -> dict[str, Any]:
    """One kernel's cubin and what a launcher needs beside it: dynamic shared memory, and how many
    pointer parameters the compiler appends after the kernel's own (``extra_params``, counted in
    the PTX entry; Triton's scratch pointers: the first is ``global_scratch`` bytes per program,
    aligned to ``global_scratch_align``, or NULL when that is 0, as is the second), and the warps
    a program runs (``launch_warps``, from the compiled metadata, as Triton's own launcher takes
    it: a pass such as warp specialization may change it). Every
    pointer parameter is declared 16-byte aligned (runtimes allocate every buffer separately with
    at least that alignment), so loads vectorize as they do under Triton's JIT."""
    import os
    import re

    os.environ["TRITON_INTERPRET"] = "0"
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
