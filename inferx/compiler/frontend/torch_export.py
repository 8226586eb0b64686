"""The generic frontend: any ``torch.nn.Module`` through ``torch.export`` into one ``@forward`` func.

Contract: ``import_torch_module`` returns a ``Program`` whose module holds one verified
``func.func @forward`` taking the module's tensor inputs (in order) and returning its tensor
outputs (flattened, in order), and whose weights hold one array per ``ix.weight`` in the
storage of its element type. Every torch float becomes the ``dtype`` option's element type.

Phases, in order:
  1. export        ``torch.export.export`` with the caller's ``dynamic_shapes``.
  2. decompose     ``run_decompositions`` to core ATen, except the ops ``LOWERINGS`` lowers
                   directly (``linear``, ``layer_norm``, ``scaled_dot_product_attention``, ...).
  3. name symbols  each ``torch.export.Dim`` name becomes the ix symbol of its sympy symbol.
  4. lower         node by node, in graph order (see ``_lower_node``).
  5. assemble      the func from the emitted ops; the module is verified.

Constant folding (phase 4): a node that reads no user input and no parameter and has a static
result is evaluated at import time with torch; it enters the IR only where a lowered node uses it,
as an ``ix.constant`` splat when all its elements are equal, else as a weight ``folded.<node>``.
So mask and position-id plumbing built from buffers and ``arange`` costs nothing, and parameters
stay single named weights.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region, SSAValue

from inferx.compiler.frontend.aten_context import (
    LowerCtx,
    TorchImportError,
    UnsupportedOpError,
    op_name,
    where,
)
from inferx.compiler.frontend.aten_table import LOWERINGS, bind_args
from inferx.compiler.ir.shapes import ShapeError
from inferx.compiler.ir.textio import IRError, verify_module
from inferx.compiler.ir.types import DType, TensorType
from inferx.program import Program


def import_torch_module(
    module: torch.nn.Module,
    example_inputs: tuple[Any, ...],
    *,
    dynamic_shapes: Any = None,
    dtype: str = "f32",
) -> Program:
    """Exports ``module`` on ``example_inputs`` and lowers it to an ix ``Program`` (see the module doc).

    ``dynamic_shapes`` is torch.export's (a tuple per positional input, or a dict by argument
    name, of ``{axis: Dim}`` or per-axis lists); ``Dim("batch")`` becomes the ix symbol ``batch``.
    Raises ``UnsupportedOpError`` for an ATen op with no lowering and ``TorchImportError`` for any
    other graph the frontend cannot express; both name the node's module path and source line.
    """
    float_dtype = DType(dtype)
    if not float_dtype.is_float:
        raise ValueError(f"dtype must be a float element type, got {dtype!r}")
    ep = torch.export.export(module, tuple(example_inputs), dynamic_shapes=dynamic_shapes)  # 1
    ep = decompose(ep)  # 2
    symbols = symbol_names(ep, module, example_inputs, dynamic_shapes)  # 3
    cx = LowerCtx(float_dtype, symbols, LOWERINGS, lambda node: _lower_with_table(cx, node))
    block = Block()
    outputs: list[SSAValue] = []
    for node in ep.graph.nodes:  # 4
        cx.node = node
        if node.op == "placeholder":
            _placeholder(cx, ep, node, block)
        elif node.op == "call_function":
            _lower_node(cx, node)
        elif node.op == "output":
            outputs = [cx.value(v) for v in node.args[0] if v is not None]
        else:
            raise cx.error(f"FX node kind '{node.op}' is not supported", unsupported=True)
    cx.node = None
    block.add_ops([*cx.ops, ReturnOp(*outputs)])  # 5
    ftype = FunctionType.from_lists(list(block.arg_types), [v.type for v in outputs])
    ix_module = ModuleOp([FuncOp("forward", ftype, Region(block))])
    try:
        verify_module(ix_module)
    except IRError as e:
        raise TorchImportError(f"the lowered module does not verify: {e}") from None
    return Program(ix_module, cx.weights)


def decompose(ep: ExportedProgram) -> ExportedProgram:
    """Core ATen, except the ops with a direct lowering (they stay whole: one ix op each)."""
    table = torch.export.default_decompositions()
    for target in LOWERINGS:
        if isinstance(target, torch._ops.OpOverload):
            table.pop(target, None)
    return ep.run_decompositions(table)


def symbol_names(
    ep: ExportedProgram, module: torch.nn.Module, example_inputs: Sequence[Any], dynamic_shapes: Any
) -> dict[str, str]:
    """Maps each sympy symbol of a user input's shape to the name of the ``Dim`` given for it.

    A derived dim (``2 * batch``) names the one symbol of its expression after its root. Symbols
    with no ``Dim`` (automatic dynamism) keep torch's name (``s77``).
    """
    if dynamic_shapes is None:
        return {}
    specs: Sequence[Any]
    if isinstance(dynamic_shapes, Mapping):
        params = list(inspect.signature(module.forward).parameters)[: len(example_inputs)]
        specs = [dynamic_shapes.get(name) for name in params]
    else:
        specs = list(dynamic_shapes)
    user = [n for n, s in zip(_placeholders(ep), ep.graph_signature.input_specs, strict=True)
            if s.kind == InputKind.USER_INPUT]
    names: dict[str, str] = {}
    for node, spec in zip(user, specs, strict=False):
        fake = node.meta.get("val")
        if spec is None or not isinstance(fake, torch.Tensor):
            continue
        items = spec.items() if isinstance(spec, Mapping) else enumerate(spec)
        for axis, d in items:
            root = getattr(d, "root", d)
            name = getattr(root, "__name__", None)
            size = fake.shape[axis]
            if name is None or not isinstance(size, torch.SymInt):
                continue
            free = sorted(size.node.expr.free_symbols, key=str)
            if len(free) == 1:
                old = names.setdefault(str(free[0]), name)
                if old != name:
                    raise TorchImportError(f"the size {free[0]} is named both '{old}' and '{name}'")
    return names


def _placeholders(ep: ExportedProgram) -> list[torch.fx.Node]:
    return [n for n in ep.graph.nodes if n.op == "placeholder"]


def _placeholder(cx: LowerCtx, ep: ExportedProgram, node: torch.fx.Node, block: Block) -> None:
    """User inputs become func arguments; parameters, buffers and constants wait for a use."""
    spec = next(s for s in ep.graph_signature.input_specs if s.arg.name == node.name)
    if spec.kind == InputKind.USER_INPUT:
        fake = node.meta.get("val")
        if not isinstance(fake, torch.Tensor):
            raise cx.error(f"input '{node.name}' is a {type(fake).__name__}; only tensor inputs are "
                           "supported", unsupported=True)
        arg = block.insert_arg(cx.type_of(fake), len(block.args))
        if node.name.isidentifier():
            arg.name_hint = node.name
        cx.values[node] = arg
        return
    target = spec.target
    if target is None:
        raise cx.error(f"input kind {spec.kind.name} is not supported", unsupported=True)
    tensor = ep.state_dict[target] if target in ep.state_dict else ep.constants[target]
    if not isinstance(tensor, torch.Tensor):
        raise cx.error(f"input '{target}' ({spec.kind.name}) is not a tensor", unsupported=True)
    cx.names[node] = target
    if spec.kind == InputKind.PARAMETER:
        cx.params[node] = tensor.detach()
    else:
        cx.known[node] = tensor.detach()


def _lower_node(cx: LowerCtx, node: torch.fx.Node) -> None:
    """Size arithmetic is skipped (dims come from torch's shapes), constants fold, the rest lowers."""
    val = node.meta.get("val")
    if isinstance(val, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return
    if not _fold(cx, node):
        cx.values[node] = _lower_with_table(cx, node)


def _lower_with_table(cx: LowerCtx, node: torch.fx.Node) -> Any:
    """Runs the node's lowering from ``LOWERINGS`` and checks its result against torch's type."""
    outer, cx.node = cx.node, node
    try:
        lowering = LOWERINGS.get(node.target)
        if lowering is None:
            raise cx.error("this op has no ix lowering (add one to aten_table.LOWERINGS, or "
                           "rewrite the model around it)", unsupported=True)
        try:
            result = lowering(cx, bind_args(node.target, node.args, node.kwargs))
        except TorchImportError:
            raise
        except (ShapeError, ValueError, KeyError, IndexError, TypeError) as e:
            raise cx.error(f"lowering failed: {type(e).__name__}: {e}") from None
        _check_types(cx, node, result)
        return result
    finally:
        cx.node = outer


def _fold(cx: LowerCtx, node: torch.fx.Node) -> bool:
    """Evaluates ``node`` with torch when all its inputs are known and its result is static."""
    inputs = node.all_input_nodes
    if any(n not in cx.known for n in inputs):
        return False
    target = node.target
    if isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags:
        return False
    vals = node.meta.get("val")
    fakes = list(vals) if isinstance(vals, (list, tuple)) else [vals]
    if not fakes or not all(isinstance(f, torch.Tensor) for f in fakes):
        return False
    if any(isinstance(d, torch.SymInt) for f in fakes if f is not None for d in f.shape):
        return False
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: cx.known[n])
    try:
        with torch.no_grad():
            cx.known[node] = target(*args, **kwargs)  # type: ignore[operator]
    except Exception:  # noqa: BLE001 - a fold that fails is lowered instead
        return False
    return True


def _check_types(cx: LowerCtx, node: torch.fx.Node, result: Any) -> None:
    """The lowered value must have torch's shape and (mapped) dtype."""
    vals = node.meta.get("val")
    pairs = zip(result, vals or (), strict=False) if isinstance(result, tuple) else [(result, vals)]
    for value, fake in pairs:
        if not isinstance(value, SSAValue) or not isinstance(fake, torch.Tensor):
            continue
        want = cx.type_of(fake)
        got = value.type
        assert isinstance(got, TensorType)
        if got != want:
            raise TorchImportError(f"{op_name(node.target)}: the lowering produced {got} but torch's "
                                   f"result is {want}; node '{node.name}' {where(node)}")


__all__ = ["TorchImportError", "UnsupportedOpError", "decompose", "import_torch_module", "symbol_names"]
