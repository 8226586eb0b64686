"""Code generation: each ``ix.kernel`` becomes Triton source from its kernel family (the
registry in ``inferx.compiler.families``), made safe for programmatic dependent launch on sm_90."""

from __future__ import annotations

import dataclasses
from typing import Any

from inferx.compiler.families import family
from inferx.compiler.families.common.errors import CodegenError
from inferx.compiler.families.common.tile import GRID_WAIT
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource


def generate(kernel: KernelOp, name: str, target: str = "sm_90", schedule: Any = None,
             grid_dependency: bool | None = None, overlap: bool = False, rows: int | None = None) -> KernelSource:
    """Triton source for ``kernel``, from its family; CodegenError if the family does not
    implement it (the reason said) or ``schedule`` is not the family's kind. ``target`` ("sm_90"
    or "cpu") picks schedules, never semantics; ``schedule`` None is the family's heuristic.
    ``grid_dependency`` (default: on for sm_90) makes the kernel safe for PDL; kernels that
    Triton's interpreter runs must not have it. ``overlap``: a decode GEMV loads its first weight
    tiles before anything else, and with the grid dependency waits only after them and lets the
    next kernel start right after its wait (see ``with_grid_dependency``); without it the same
    code runs with no wait (how the interpreter checks it). ``rows``: the row bucket the kernel is
    generated for (None: the largest), which may decide what a schedule leaves unsaid
    (``KernelFamily.at_rows``) and picks the heuristic's schedule where ``schedule`` is None."""
    try:
        fam = family(kernel.template.data)
    except ValueError as e:
        raise CodegenError(f"kernel {name}: {e}") from None
    gdc = target != "cpu" if grid_dependency is None else grid_dependency
    reason = fam.applies(kernel)
    if reason is not None:
        raise CodegenError(f"kernel {name}: no template implements it ({fam.name}: {reason})")
    fam.check_schedule(name, schedule)
    if schedule is None and rows is not None:
        schedule = fam.heuristic(kernel, target, rows)
    if schedule is not None:
        schedule = fam.at_rows(kernel, schedule, rows)
    ks = fam.generate(kernel, name, schedule, target, overlap, gdc)
    ks = dataclasses.replace(ks, cost=fam.launch_cost())
    return with_grid_dependency(ks, early_release=overlap) if gdc else ks


def heuristic_schedule(kernel: KernelOp, target: str = "sm_90", rows: int | None = None) -> Any:
    """The schedule the kernel's family picks itself for ``rows`` (its row bucket: a decode
    batch bucket, a prefill's bucket of batch x seq; None for the family's default), used where
    the tuning database has no record; None for families that take no schedule, or when the
    family does not implement the kernel (``generate`` then says why)."""
    return family(kernel.template.data).heuristic(kernel, target, rows)


GDC_IMPORT = "from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait\n"


def with_grid_dependency(ks: KernelSource, early_release: bool = False) -> KernelSource:
    """``ks`` made safe for programmatic dependent launch (PDL) on sm_90: before it touches data
    the previous kernel may write, it waits until that kernel has finished and its writes are
    visible (``griddepcontrol.wait``: its first statement, or where the template put
    ``GRID_WAIT``), and it lets the next kernel's programs be scheduled
    (``griddepcontrol.launch_dependents``; a program that ends counts as having said so) at its
    end, or, with ``early_release`` and where the template placed the wait (it loads weights
    before it), right after its wait. So every ordering of plain launches
    still holds; what PDL saves is the launch latency and ramp-up of each kernel, overlapped with
    the tail of the one before. Without PDL both instructions do nothing. Not for the CPU:
    Triton's interpreter has no grid dependency control.

    The release point is at the end by default: released at the start by every kernel, the next
    kernel's programs occupy SMs waiting while this one runs, which makes decode steps slower than
    without PDL; released early only by the GEMVs that preload, the gain is within run-to-run
    spread at best; released at the end, decode steps are faster than without PDL
    (docs/performance.md)."""
    head, sep, body = ks.source.partition(f"def {ks.name}(")
    signature, colon, rest = body.partition("):\n")
    if not sep or not colon:
        raise CodegenError(f"kernel {ks.name}: cannot find its def line to add the grid dependency")
    head = head.replace("import triton.language as tl\n", "import triton.language as tl\n" + GDC_IMPORT, 1)
    lines = rest.rstrip("\n").split("\n")
    waits = [i for i, line in enumerate(lines) if line.strip() == GRID_WAIT]
    if len(waits) > 1:
        raise CodegenError(f"kernel {ks.name}: its template waits for the grid {len(waits)} times")
    preloads = bool(waits)
    if not waits:
        lines.insert(0, "    " + GRID_WAIT)
        waits = [0]
    release = "gdc_launch_dependents()"
    if early_release and preloads:
        at = lines[waits[0]]
        lines.insert(waits[0] + 1, at[: len(at) - len(at.lstrip())] + release)
    else:
        lines.append("    " + release)
    source = head + sep + signature + colon + "\n".join(lines) + "\n"
    return dataclasses.replace(ks, source=source, grid_dependency=True)


__all__ = ["CodegenError", "KernelSource", "generate", "heuristic_schedule"]
