"""What the interpreter hands each kernel, and the one error type it raises."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation

from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.types import TensorType


class InterpreterError(Exception):
    """A module, input or weight the interpreter cannot run; the message names the culprit."""


@dataclass(frozen=True)
class KernelContext:
    """What a kernel may read besides its operands: the bound symbols and the weight store."""

    env: Mapping[str, int]
    weights: Mapping[str, np.ndarray]

    def shape(self, t: TensorType) -> tuple[int, ...]:
        """The concrete shape of ``t``; a symbol no argument bound raises ``InterpreterError``."""
        try:
            return tuple(sy.evaluate(d, self.env) for d in t.shape)
        except KeyError as e:
            raise InterpreterError(
                f"symbol '{e.args[0]}' of type {t} is not bound by any argument of the func"
            ) from None


Kernel = Callable[[Operation, Sequence[np.ndarray], KernelContext], list[np.ndarray]]
