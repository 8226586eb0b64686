"""The reference interpreter: runs a verified `ix` module op by op with the NumPy kernels.

It is the oracle every other session is compared with, so it is strict: inputs must have the
argument types' ranks and storage dtypes (``numerics.STORAGE``), symbols are bound once from the
input shapes, and every value an op produces is rounded to its result type and checked against
that type's shape with the symbols evaluated. Every failure is an ``InterpreterError`` naming the
func, argument, op or weight at fault and the values involved.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, SSAValue

from inferx.compiler.interpreter.context import InterpreterError, Kernel, KernelContext
from inferx.compiler.interpreter.kernels import KERNELS
from inferx.compiler.interpreter.numerics import STORAGE, round_to
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp
from inferx.compiler.ir.textio import verify_module
from inferx.compiler.ir.types import TensorType, format_shape

Step = tuple[Operation, list[np.ndarray]]  # an op about to run, with its operand values


class Interpreter:
    """Runs the funcs of one module against one weight store.

    ``weights`` maps each ``ix.weight`` name to an array in the storage of its dtype (bf16 and
    f8e4m3 as float32 holding representable values). The module is verified on construction;
    an invalid module raises ``textio.IRError``.
    """

    def __init__(
        self,
        module: ModuleOp,
        weights: Mapping[str, np.ndarray],
        kernels: Mapping[type[Operation], Kernel] = KERNELS,
    ):
        verify_module(module)
        self.module = module
        self.weights = weights
        self.kernels = kernels
        self.funcs: dict[str, FuncOp] = {op.sym_name.data: op for op in module.ops if isinstance(op, FuncOp)}

    def run(self, func_name: str, *inputs: np.ndarray) -> list[np.ndarray]:
        """Runs ``@func_name`` on ``inputs`` and returns its results, one array per returned value."""
        block, values, ctx = self._start(func_name, inputs)
        return self._run_block(func_name, block, values, ctx)

    def steps(self, func_name: str, *inputs: np.ndarray) -> Generator[Step, None, list[np.ndarray]]:
        """``run``, one op of the func's body at a time: yields each op with its operand values
        before it runs, and returns the func's results. A value is dropped once the last op that
        reads it has run, so a caller holding many paused runs (``quant.sequential``) holds only
        what each still needs, not every activation of the model."""
        block, values, ctx = self._start(func_name, inputs)
        ops = list(block.ops)
        last_use: dict[SSAValue, int] = {}
        for i, op in enumerate(ops):
            for inner in op.walk():  # an ix.kernel's body reads values of the func's body too
                for v in inner.operands:
                    last_use[v] = i
        for i, op in enumerate(ops):
            operands = [values[v] for v in op.operands]
            if isinstance(op, ReturnOp):
                return operands
            yield op, operands
            self._run_op(func_name, op, values, ctx)
            for v in [v for v in values if last_use.get(v, -1) <= i]:
                del values[v]
        raise InterpreterError(f"@{func_name}: a block ends without a terminator")

    def _start(
        self, func_name: str, inputs: Sequence[np.ndarray]
    ) -> tuple[Block, dict[SSAValue, np.ndarray], KernelContext]:
        """The body of ``@func_name``, its arguments bound to ``inputs``, and the kernels' context."""
        func = self.funcs.get(func_name)
        if func is None:
            known = ", ".join(f"@{n}" for n in self.funcs) or "none"
            raise InterpreterError(f"no func @{func_name} in the module (funcs: {known})")
        block = func.body.blocks.first
        assert block is not None
        args = [np.asarray(x) for x in inputs]
        env = bind_symbols(func_name, block.args, args)
        ctx = KernelContext(env=env, weights=self.weights)
        values: dict[SSAValue, np.ndarray] = {}
        for arg, x in zip(block.args, args, strict=True):
            assert isinstance(arg.type, TensorType)
            values[arg] = round_to(x, arg.type.dtype)
        return block, values, ctx

    def _run_block(self, func_name: str, block: Block, values: dict[SSAValue, np.ndarray],
                   ctx: KernelContext) -> list[np.ndarray]:
        """Runs a func body or an ``ix.kernel`` body; returns what its terminator returns."""
        for op in block.ops:
            if isinstance(op, ReturnOp | YieldOp):
                return [values[v] for v in op.operands]
            self._run_op(func_name, op, values, ctx)
        raise InterpreterError(f"@{func_name}: a block ends without a terminator")

    def _run_op(self, func_name: str, op: Operation, values: dict[SSAValue, np.ndarray], ctx: KernelContext) -> None:
        """Runs one op (an ``ix.kernel`` as its body) and adds its results to ``values``."""
        if isinstance(op, KernelOp):
            body = op.body.block
            inner: dict[SSAValue, np.ndarray] = dict(zip(body.args, (values[v] for v in op.operands), strict=True))
            outs = self._run_block(func_name, body, inner, ctx)
        else:
            kernel = self.kernels.get(type(op))
            if kernel is None:
                raise InterpreterError(f"@{func_name}: the interpreter has no kernel for op '{op.name}'")
            try:
                outs = kernel(op, [values[v] for v in op.operands], ctx)
            except InterpreterError as e:
                where = f"@{func_name}: " if str(e).startswith(op.name) else f"@{func_name}: {op.name}: "
                raise InterpreterError(where + str(e)) from None
        if len(outs) != len(op.results):
            raise InterpreterError(f"@{func_name}: {op.name} produced {len(outs)} values for "
                                   f"{len(op.results)} results")
        for i, (result, out) in enumerate(zip(op.results, outs, strict=True)):
            values[result] = _check_result(func_name, op, i, out, ctx)


def _check_result(func_name: str, op: Operation, i: int, out: np.ndarray, ctx: KernelContext) -> np.ndarray:
    t = op.results[i].type
    assert isinstance(t, TensorType)
    value = round_to(out, t.dtype)
    try:
        want = ctx.shape(t)
    except InterpreterError as e:
        raise InterpreterError(f"@{func_name}: {op.name} result #{i}: {e}") from None
    if value.shape != want:
        raise InterpreterError(
            f"@{func_name}: {op.name} result #{i} has shape {list(value.shape)} but its type "
            f"{format_shape(t.shape)} evaluates to {list(want)} with {_fmt_env(ctx.env)}"
        )
    return value


def _fmt_env(env: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(env.items())) or "no symbols"


def _arg_name(func_name: str, i: int, arg: SSAValue) -> str:
    hint = f" (%{arg.name_hint})" if arg.name_hint else ""
    return f"@{func_name} argument #{i}{hint}"


def _single_symbol(d: sy.Dim) -> str | None:
    if isinstance(d, sy.SymExpr) and len(d.terms) == 1:
        mono, coeff = d.terms[0]
        if coeff == 1 and len(mono) == 1 and isinstance(mono[0], str):
            return mono[0]
    return None


def _solve_affine(d: sy.SymExpr, env: Mapping[str, int], size: int) -> tuple[str, int] | None:
    """Solves ``a * s + c == size`` for the one unbound symbol ``s`` of an affine ``d``."""
    free = sorted(d.symbols() - set(env))
    if len(free) != 1:
        return None
    (name,) = free
    c = sy.evaluate(sy.substitute(d, {name: 0}), env) if _affine_in(d, name) else None
    if c is None:
        return None
    a = sy.evaluate(sy.substitute(d, {name: 1}), env) - c
    if a == 0 or (size - c) % a:
        return None
    return name, (size - c) // a


def _affine_in(d: sy.SymExpr, name: str) -> bool:
    return all(mono.count(name) <= 1 and all(isinstance(x, str) for x in mono) for mono, _ in d.terms)


def bind_symbols(func_name: str, params: Sequence[SSAValue], inputs: Sequence[np.ndarray]) -> dict[str, int]:
    """Binds every symbol of the argument types from the input shapes; checks ranks and dtypes."""
    if len(inputs) != len(params):
        raise InterpreterError(f"@{func_name} takes {len(params)} arguments, got {len(inputs)}")
    env: dict[str, int] = {}
    origin: dict[str, str] = {}
    pending: list[tuple[str, int, sy.SymExpr, int]] = []
    for i, (param, x) in enumerate(zip(params, inputs, strict=True)):
        t = param.type
        assert isinstance(t, TensorType)
        where = _arg_name(func_name, i, param)
        if x.ndim != t.rank:
            raise InterpreterError(f"{where}: expected rank {t.rank} ({t}), got shape {list(x.shape)}")
        if x.dtype != STORAGE[t.dtype]:
            raise InterpreterError(
                f"{where}: expected {t.dtype.value} (numpy {STORAGE[t.dtype]}), got numpy {x.dtype}"
            )
        for axis, (d, n) in enumerate(zip(t.shape, x.shape, strict=True)):
            name = _single_symbol(d)
            if isinstance(d, int):
                if d != n:
                    raise InterpreterError(
                        f"{where}: dim {axis} must be {d} ({t}), got shape {list(x.shape)}"
                    )
            elif name is not None:
                if name in env and env[name] != n:
                    raise InterpreterError(
                        f"{where}: symbol '{name}' is {n} at dim {axis}, but {origin[name]} bound it to "
                        f"{env[name]}"
                    )
                if n < 1:
                    raise InterpreterError(f"{where}: symbol '{name}' at dim {axis} must be >= 1, got {n}")
                env.setdefault(name, n)
                origin.setdefault(name, f"{where} dim {axis}")
            else:
                assert isinstance(d, sy.SymExpr)
                pending.append((where, axis, d, n))
    for where, axis, d, n in pending:
        if not d.symbols() <= set(env):
            solved = _solve_affine(d, env, n)
            if solved is None or solved[1] < 1:
                raise InterpreterError(
                    f"{where}: cannot bind the symbols of dim {axis} ({sy.format_dim(d)}) from size {n}"
                )
            env[solved[0]] = solved[1]
            origin[solved[0]] = f"{where} dim {axis}"
        value = sy.evaluate(d, env)
        if value != n:
            raise InterpreterError(
                f"{where}: dim {axis} is {sy.format_dim(d)} = {value} with {_fmt_env(env)}, got size {n}"
            )
    return env


__all__ = ["Interpreter", "InterpreterError", "bind_symbols"]
