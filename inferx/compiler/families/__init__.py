"""The kernel-family registry: every family the compiler can bind a fused group to, in the order
they are tried (style rule 6: each says whether it applies; the general fallback, pointwise, last).

Adding a family is its folder (an object implementing ``interface.KernelFamily``) and one line
in ``_FAMILIES``. The compiler, the tuner and the runtime loop over this registry; nothing outside
a family's folder and this file names a family.
"""

from __future__ import annotations

from functools import cache

from inferx.compiler.families.interface import KernelFamily


@cache
def families() -> tuple[KernelFamily, ...]:
    """Every family, in binding order (explicit: nothing registers itself on import)."""
    from inferx.compiler.families import attention, attention_o, dequant, fp8gemm, fp8quant, gemm, mlp, qgemm, rowwise

    return (gemm.FAMILY, qgemm.FAMILY, fp8gemm.FAMILY, dequant.FAMILY, fp8quant.FAMILY, attention.FAMILY, mlp.FAMILY,
            attention_o.FAMILY, rowwise.GATHER, rowwise.REDUCTION, rowwise.POINTWISE)


def family(name: str) -> KernelFamily:
    """The family called ``name``; ValueError naming the families for any other name."""
    for f in families():
        if f.name == name:
            return f
    raise ValueError(f"no kernel family {name!r}; the families are {', '.join(f.name for f in families())}")


def tunable() -> tuple[KernelFamily, ...]:
    """The families that take a schedule (and so have tasks, spaces and cost models)."""
    return tuple(f for f in families() if f.tunable)


__all__ = ["KernelFamily", "families", "family", "tunable"]
