"""Code generation: each ``ix.kernel`` becomes Triton source from the first template that
applies (style rule 6: each rule says whether it applies, in order, general fallback last)."""

from __future__ import annotations

from collections.abc import Callable

from inferx.compiler.codegen import attention, gemm, rowwise
from inferx.compiler.codegen.errors import CodegenError
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource

# (template name, applies -> reason or None, generate)
RULES: list[tuple[str, Callable[[KernelOp], str | None], Callable[..., KernelSource]]] = [
    ("gemm", gemm.applies, gemm.generate),
    ("attention", attention.applies, attention.generate),
    ("gather", rowwise.gather_applies, rowwise.gather),
    ("reduction", rowwise.reduction_applies, rowwise.reduction),
    ("pointwise", lambda k: None, rowwise.pointwise),
]


def generate(kernel: KernelOp, name: str, target: str = "sm_90") -> KernelSource:
    """Triton source for ``kernel``, from the rule for its template; CodegenError if none fits.
    ``target`` ("sm_90" or "cpu") picks schedules only, never semantics."""
    wanted = kernel.template.data
    reasons = []
    for template, applies, gen in RULES:
        if template != wanted:
            continue
        reason = applies(kernel)
        if reason is None:
            if template == "gemm":
                return gemm.generate(kernel, name, target=target)
            return gen(kernel, name, target) if template == "attention" else gen(kernel, name)
        reasons.append(f"{template}: {reason}")
    raise CodegenError(f"kernel {name}: no template implements it ({'; '.join(reasons) or wanted})")


__all__ = ["CodegenError", "KernelSource", "generate"]
