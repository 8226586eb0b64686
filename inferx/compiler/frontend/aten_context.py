"""What an ATen lowering sees: the FX node being lowered, its operands as ix values, and an emitter.

``LowerCtx`` holds the state of one graph being lowered into one ix func body: the ix value of each
FX node lowered so far, the concrete tensor of each node known at import time (buffers, lifted
constants, folded results), and the ops emitted so far, in order. A lowering (see
``aten_table.py``) asks it for operand values (``value``), dims (``dim``), torch's own result type
(``out_type``) and emits ops (``emit``); it never touches FX or xDSL plumbing itself.

Symbolic sizes: torch.export gives every dynamic size a sympy expression over its own symbols
(``s77``); ``to_dim`` maps them to ix dims through ``symbols`` (sympy name -> ix symbol name,
e.g. ``s77 -> batch``), supporting integers, symbols, ``+``, ``*``, positive integer powers and
``FloorDiv`` by a positive constant. Anything else raises ``TorchImportError`` naming the
expression.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any

import numpy as np
import sympy
import torch
from torch.utils._sympy.functions import FloorDiv
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue

from inferx.compiler.interpreter.numerics import round_to
from inferx.compiler.ir import ops_tensor as ts
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_base import IxOp, float_attr, int_attr
from inferx.compiler.ir.symbolic import Dim
from inferx.compiler.ir.types import DType, TensorType

Lowered = SSAValue | tuple[SSAValue | None, ...] | None


class TorchImportError(Exception):
    """A graph the torch.export frontend cannot lower; the message names the node and its origin."""


class UnsupportedOpError(TorchImportError):
    """An ATen op with no lowering; the message names the op, its module path and source line."""


INT_DTYPES: dict[torch.dtype, DType] = {
    torch.int64: DType.i64, torch.int32: DType.i32, torch.int8: DType.i8, torch.bool: DType.bool,
}
FLOAT_TORCH = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def where(node: torch.fx.Node) -> str:
    """``in module 'encoder.layer.0' (BertLayer), at file.py:12: `code` ``, from the node's meta."""
    parts: list[str] = []
    stack = node.meta.get("nn_module_stack") or {}
    if stack:
        path, cls = list(stack.values())[-1]
        cls_name = cls.rsplit(".", 1)[-1] if isinstance(cls, str) else getattr(cls, "__name__", str(cls))
        parts.append(f"in module '{path}' ({cls_name})" if path else f"in the root module ({cls_name})")
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in \S+\n\s*(.*)', trace)
    if frames:
        file, line, code = frames[-1]
        parts.append(f"at {file}:{line}: `{code.strip()}`")
    return ", ".join(parts) or "(no source information)"


def op_name(target: object) -> str:
    """``aten.linear.default`` for an OpOverload, the qualified name for any other callable."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', repr(target))}".lstrip(".")


def to_dim(value: int | torch.SymInt | sympy.Expr, symbols: Mapping[str, str]) -> Dim:
    """An ix dim for a concrete or symbolic torch size (see the module docstring)."""
    if isinstance(value, bool):
        raise TorchImportError(f"expected a size, got the bool {value}")
    if isinstance(value, int):
        return value
    expr = value.node.expr if isinstance(value, torch.SymInt) else value
    return _sympy_dim(sympy.sympify(expr), symbols, expr)


def _sympy_dim(e: sympy.Expr, symbols: Mapping[str, str], whole: object) -> Dim:
    if isinstance(e, sympy.Integer):
        return int(e)
    if isinstance(e, sympy.Symbol):
        return sy.sym(symbols.get(e.name, e.name))
    if isinstance(e, sympy.Add):
        total: Dim = 0
        for a in e.args:
            total = sy.add(total, _sympy_dim(a, symbols, whole))
        return total
    if isinstance(e, sympy.Mul):
        return sy.product(_sympy_dim(a, symbols, whole) for a in e.args)
    if isinstance(e, sympy.Pow) and isinstance(e.exp, sympy.Integer) and int(e.exp) >= 1:
        return sy.product([_sympy_dim(e.base, symbols, whole)] * int(e.exp))
    if isinstance(e, FloorDiv) and isinstance(e.args[1], sympy.Integer) and int(e.args[1]) > 0:
        return sy.floordiv(_sympy_dim(e.args[0], symbols, whole), int(e.args[1]))
    raise TorchImportError(
        f"the symbolic size {whole} has the term {e} ({type(e).__name__}), which the ix dim algebra "
        "cannot express (it has integers, symbols, +, * and floordiv by a positive constant)"
    )


class LowerCtx:
    """The state of lowering one FX graph into one ix func body (see the module docstring).

    ``float_dtype`` is the ix element type every torch float becomes. ``params`` maps the
    placeholder of each parameter to its tensor; ``known`` maps nodes whose value is known at
    import time (buffers, lifted constants, folded results) to that value; ``names`` gives the
    state-dict name of parameters, buffers and constants; ``values`` maps lowered nodes to ix
    values. A known node that ``lowerable`` ops derive from named weights alone is lowered on
    first use through ``relower`` rather than folded into a new weight.
    """

    def __init__(
        self,
        float_dtype: DType,
        symbols: Mapping[str, str],
        lowerable: Container[object] = (),
        relower: Callable[[torch.fx.Node], Lowered] | None = None,
    ):
        self.float_dtype = float_dtype
        self.symbols = dict(symbols)
        self.ops: list[Operation] = []
        self.values: dict[torch.fx.Node, Lowered] = {}
        self.params: dict[torch.fx.Node, torch.Tensor] = {}
        self.known: dict[torch.fx.Node, Any] = {}
        self.names: dict[torch.fx.Node, str] = {}  # weight name of a parameter/buffer/constant
        self.weights: dict[str, np.ndarray] = {}
        self.node: torch.fx.Node | None = None  # the node being lowered, for error messages
        self.lowerable = lowerable
        self.relower = relower
        self.derivable: dict[torch.fx.Node, bool] = {}

    # types -------------------------------------------------------------------------------------
    def ix_dtype(self, dtype: torch.dtype) -> DType:
        if dtype in FLOAT_TORCH:
            return self.float_dtype
        if dtype in INT_DTYPES:
            return INT_DTYPES[dtype]
        raise self.error(f"the element type {dtype} has no ix equivalent")

    def type_of(self, fake: torch.Tensor) -> TensorType:
        return TensorType([to_dim(d, self.symbols) for d in fake.shape], self.ix_dtype(fake.dtype))

    def out_type(self, node: torch.fx.Node | None = None, index: int | None = None) -> TensorType:
        """Torch's own result type of ``node`` (default: the node being lowered), as an ix type."""
        node = node or self.node
        assert node is not None
        val = node.meta.get("val")
        if index is not None:
            val = val[index]  # type: ignore[index]
        if not isinstance(val, torch.Tensor):
            raise self.error(f"expected a tensor result, torch says {type(val).__name__}")
        return self.type_of(val)

    def dim(self, value: object) -> Dim:
        """A dim from an int, a SymInt, or an FX node computing a SymInt (``aten.sym_size``)."""
        if isinstance(value, torch.fx.Node):
            value = value.meta.get("val")
        if isinstance(value, (int, torch.SymInt)) and not isinstance(value, bool):
            return to_dim(value, self.symbols)
        raise self.error(f"expected a size (int or SymInt), got {value!r}")

    # values ------------------------------------------------------------------------------------
    def value(self, arg: object, dtype: DType | None = None) -> SSAValue:
        """The ix value of an FX node, or a Python scalar as a rank-0 ``ix.constant`` of ``dtype``.

        A node known at import time is materialized on first use: a parameter, buffer or lifted
        constant as ``ix.weight`` named by its state-dict key, a folded splat as ``ix.constant``,
        any other folded tensor as ``ix.weight`` named ``folded.<node>``. With ``dtype`` given,
        a tensor of another element type is cast to it.
        """
        if isinstance(arg, torch.fx.Node):
            v = self.values.get(arg)
            if v is None and (arg in self.known or arg in self.params):
                v = self._materialize(arg)
                self.values[arg] = v
            if not isinstance(v, SSAValue):
                raise self.error(f"operand '{arg.name}' has no ix value (it is {type(v).__name__})")
            return self.cast(v, dtype) if dtype is not None else v
        if isinstance(arg, (bool, int, float)):
            if dtype is None:
                dtype = self.float_dtype if isinstance(arg, float) else DType.i64
            return self.constant(arg, (), dtype)
        raise self.error(f"expected a tensor or a scalar operand, got {arg!r}")

    def cast(self, v: SSAValue, dtype: DType) -> SSAValue:
        t = v.type
        assert isinstance(t, TensorType)
        if t.dtype == dtype:
            return v
        return self.emit(ts.CastOp, v, result_types=[t.with_dtype(dtype)])

    def constant(self, value: float | int | bool, shape: Sequence[Dim], dtype: DType) -> SSAValue:
        attr = float_attr(float(value)) if dtype.is_float else int_attr(int(value))
        return self.emit(ts.ConstantOp, result_types=[TensorType(shape, dtype)], value=attr)

    def _materialize(self, node: torch.fx.Node) -> SSAValue:
        """A known value into the IR: named weight, splat constant, re-lowered, or folded weight."""
        tensor = self.params[node] if node in self.params else self.known[node]
        if not isinstance(tensor, torch.Tensor):
            raise self.error(f"operand '{node.name}' is a {type(tensor).__name__}, not a tensor")
        dtype = self.ix_dtype(tensor.dtype)
        shape = list(tensor.shape)
        name = self.names.get(node)
        if name is None:
            flat = tensor.reshape(-1)
            if flat.numel() > 0 and bool((flat == flat[0]).all()):
                return self.constant(flat[0].item(), shape, dtype)
            if self.relower is not None and self._derivable(node):
                try:
                    value = self.relower(node)
                except TorchImportError:
                    value = None  # a lowering that refuses this case: fold instead
                if isinstance(value, SSAValue):
                    return value
            name = f"folded.{node.name}"
        array = tensor.detach().cpu()
        if array.dtype in FLOAT_TORCH:
            array = array.to(torch.float32)
        self.weights[name] = round_to(array.numpy(), dtype)
        return self.emit(ts.WeightOp, result_types=[TensorType(shape, dtype)], name=StringAttr(name))

    def _derivable(self, node: torch.fx.Node) -> bool:
        """True when table lowerings compute ``node`` from named weights alone (keeps their names)."""
        if node in self.names:
            return True
        if node not in self.derivable:
            self.derivable[node] = (
                node.op == "call_function" and node.target in self.lowerable
                and all(self._derivable(n) for n in node.all_input_nodes)
            )
        return self.derivable[node]

    # emission ----------------------------------------------------------------------------------
    def emit(self, cls: type[IxOp], *operands: Any, result_types: Sequence[TensorType] | None = None,
             **attrs: Any) -> Any:
        """Appends ``cls.make(...)``; returns its result (or the list of results if not one)."""
        op = cls.make(*operands, result_types=result_types, **attrs)
        self.ops.append(op)
        return op.results[0] if len(op.results) == 1 else list(op.results)

    def error(self, message: str, unsupported: bool = False) -> TorchImportError:
        """An error naming the node being lowered, its op, module path and source line."""
        node = self.node
        if node is None:
            return TorchImportError(message)
        cls = UnsupportedOpError if unsupported else TorchImportError
        return cls(f"{op_name(node.target)}: {message}; node '{node.name}' {where(node)}")
