"""What the families' cost models share."""

from __future__ import annotations

from inferx.compiler.families.common.hardware import DTYPE_BYTES
from inferx.compiler.families.interface import AnyTask


def out_bytes(task: AnyTask) -> int:
    """Bytes of one output element: the widest of the task's output dtypes ("bf16+f32")."""
    return max(DTYPE_BYTES.get(d, 4) for d in task.out_dtype.split("+"))
