"""Code generation: each ``ix.kernel`` becomes Triton source from the first template that
applies (style rule 6: each rule says whether it applies, in order, general fallback last)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from inferx.compiler.codegen import attention, attention_o, gemm, gemm_heuristic, mlp, rowwise
from inferx.compiler.codegen.errors import CodegenError
from inferx.compiler.codegen.tile import GRID_WAIT
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource

# (template name, applies -> reason or None, generate)
RULES: list[tuple[str, Callable[[KernelOp], str | None], Callable[..., KernelSource]]] = [
    ("gemm", gemm.applies, gemm.generate),
    ("attention", attention.applies, attention.generate),
    ("mlp", mlp.applies, mlp.generate),
    ("attention_o", attention_o.applies, attention_o.generate),
    ("gather", rowwise.gather_applies, rowwise.gather),
    ("reduction", rowwise.reduction_applies, rowwise.reduction),
    ("pointwise", lambda k: None, rowwise.pointwise),
]
# The schedule type each tunable template takes.
SCHEDULES: dict[str, type] = {"gemm": gemm.GemmSchedule, "attention": attention.AttentionSchedule,
                              "mlp": mlp.MlpSchedule, "attention_o": attention_o.AttentionOSchedule}


Schedule = gemm.GemmSchedule | attention.AttentionSchedule | mlp.MlpSchedule | attention_o.AttentionOSchedule


def generate(kernel: KernelOp, name: str, target: str = "sm_90", schedule: Schedule | None = None,
             grid_dependency: bool | None = None, overlap: bool = False) -> KernelSource:
    """Triton source for ``kernel``, from the rule for its template; CodegenError if none fits.
    ``target`` ("sm_90" or "cpu") picks schedules, never semantics; a GEMM takes a GemmSchedule,
    attention an AttentionSchedule, the fused MLP an MlpSchedule and the fused attention and
    projection an AttentionOSchedule when given (the template's heuristic when None; a schedule
    of another template is a CodegenError). ``grid_dependency``
    (default: on for sm_90) makes the kernel safe for PDL; kernels that Triton's interpreter runs
    must not have it. ``overlap``: a decode GEMV loads its first weight tiles before anything else,
    and with the grid dependency waits only after them and lets the next kernel start right after
    its wait (see ``with_grid_dependency``); without it the same code runs with no wait (how the
    interpreter checks it)."""
    wanted = kernel.template.data
    gdc = target != "cpu" if grid_dependency is None else grid_dependency
    reasons = []
    for template, applies, gen in RULES:
        if template != wanted:
            continue
        reason = applies(kernel)
        if reason is None:
            if schedule is not None and not isinstance(schedule, SCHEDULES.get(template, ())):
                raise CodegenError(f"kernel {name}: a {type(schedule).__name__} cannot schedule a {template} kernel")
            if template == "gemm":
                assert schedule is None or isinstance(schedule, gemm.GemmSchedule)
                ks = gemm.generate(kernel, name, schedule, target=target, preload=overlap, grid_wait=gdc)
            elif template == "attention":
                assert schedule is None or isinstance(schedule, attention.AttentionSchedule)
                ks = attention.generate(kernel, name, target, schedule)
            elif template == "mlp":
                assert schedule is None or isinstance(schedule, mlp.MlpSchedule)
                ks = mlp.generate(kernel, name, schedule, target)
            elif template == "attention_o":
                assert schedule is None or isinstance(schedule, attention_o.AttentionOSchedule)
                ks = attention_o.generate(kernel, name, schedule, target)
            else:
                ks = gen(kernel, name)
            return with_grid_dependency(ks, early_release=overlap) if gdc else ks
        reasons.append(f"{template}: {reason}")
    raise CodegenError(f"kernel {name}: no template implements it ({'; '.join(reasons) or wanted})")


def heuristic_schedule(kernel: KernelOp, target: str = "sm_90", rows: int | None = None) -> Schedule | None:
    """The schedule the kernel's template picks itself for ``rows`` (its row bucket: a decode
    batch bucket, a prefill's bucket of batch x seq; None for the template's default), used where
    the tuning database has no record; None for templates that take no schedule, or when the
    template does not implement the kernel (``generate`` then says why)."""
    template = kernel.template.data
    if template == "gemm" and gemm.applies(kernel) is None:
        return gemm_heuristic.heuristic_schedule(kernel, target, rows)
    if template == "attention" and attention.applies(kernel) is None:
        return attention.heuristic_schedule(kernel, target, rows)
    if template == "mlp" and mlp.applies(kernel) is None:
        return mlp.heuristic_schedule(kernel, target, rows)
    if template == "attention_o" and attention_o.applies(kernel) is None:
        return attention_o.heuristic_schedule(kernel, target, rows)
    return None


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
