"""bind-families: binds each unbound ``ix.kernel`` (``template`` empty, as fuse leaves them) to
the kernel family that implements it: the first family in the registry's order one of whose
anchor ops is in the kernel's body, else the fallback family.

Runs right after fuse. Guarantees: every kernel names a registered family; kernels already bound
(by a family's own pass) are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from inferx.compiler.families import families
from inferx.compiler.ir.ops_kernel import KernelOp


def bind(kernel: KernelOp) -> str:
    """The name of the family ``kernel`` binds to."""
    ops = list(kernel.body.block.ops)
    for f in families():
        if f.anchors and any(isinstance(o, f.anchors) for o in ops):
            return f.name
    return next(f.name for f in families() if f.fallback)


@dataclass(frozen=True)
class BindFamilies(ModulePass):
    name = "bind-families"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [o for o in op.walk() if isinstance(o, KernelOp)]:
            if not kernel.template.data:
                kernel.attributes["template"] = StringAttr(bind(kernel))
