"""The reference interpreter: executes any `ix` module on CPU with NumPy (the numeric oracle).

``Interpreter(module, weights).run("prefill", *inputs)`` returns one array per func result.
Kernels live in ``kernels.py`` (one function per op, in the explicit ``KERNELS`` table) and
``attention.py``; element-type storage and rounding in ``numerics.py``.
"""

from inferx.compiler.interpreter.context import InterpreterError
from inferx.compiler.interpreter.interpreter import Interpreter, bind_symbols
from inferx.compiler.interpreter.kernels import KERNELS

__all__ = ["Interpreter", "InterpreterError", "KERNELS", "bind_symbols"]
