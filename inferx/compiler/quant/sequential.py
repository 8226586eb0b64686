"""Sequential calibration: a float program's linears quantized in the order its prefill reaches
them, each calibrated on the inputs it sees when every linear before it already computes with
its quantized weight (as the GPTQ paper and AutoGPTQ do layer by layer; here finer, as AutoGPTQ's
``true_sequential``: o_proj sees the outputs of the quantized q, k and v, down_proj those of the
quantized gate and up). ``calibrate.capture`` instead gives every linear the float model's inputs.

All windows run side by side as paused interpreter runs of the prefill (``Interpreter.steps``).
Each run stops before the first linear whose weight is chosen and still float; once every run
stands there, the statistics of that linear's input over all windows (``calibrate.InputStats``:
linears that read one input, q, k and v or gate and up, share one record) give its quantized
weight, and the runs go on computing that linear with the dequantized weight, as ``ix.qlinear``
does (fp32). Each run holds only its live values (the residual stream, the KV cache written so
far), so memory is the windows' activations at one point of one layer, not the model's; the
record of one input is dropped once every linear that reads it is quantized, and a dequantized
weight once every run has computed with it. The quantized weights returned are all kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence

import numpy as np
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue

from inferx.compiler.interpreter import Interpreter
from inferx.compiler.interpreter.context import KernelContext
from inferx.compiler.interpreter.interpreter import Step
from inferx.compiler.interpreter.kernels import KERNELS, linear
from inferx.compiler.interpreter.numerics import STORAGE
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.quant import QuantizedWeight
from inferx.compiler.ir.types import DType
from inferx.compiler.quant.calibrate import InputStats, weight_name
from inferx.program import Program

# (weight name, float weight [N, K], the statistics of its input) -> the quantized weight
LinearQuantizer = Callable[[str, np.ndarray, InputStats], QuantizedWeight]
RECENT = 8  # float weights read recently, kept so the windows do not read (dequantize) each again


class _Recent(Mapping[str, np.ndarray]):
    """``inner``'s weights, the RECENT last read kept: the windows read the same few in turn."""

    def __init__(self, inner: Mapping[str, np.ndarray]):
        self.inner = inner
        self.kept: OrderedDict[str, np.ndarray] = OrderedDict()

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self.kept:
            self.kept[key] = np.asarray(self.inner[key])
            while len(self.kept) > RECENT:
                self.kept.popitem(last=False)
        self.kept.move_to_end(key)
        return self.kept[key]

    def __contains__(self, key: object) -> bool:
        return key in self.inner

    def __iter__(self) -> Iterator[str]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


def quantize_sequential(
    program: Program,
    windows: Sequence[Sequence[int]],
    names: Sequence[str],
    quantize: LinearQuantizer,
    *,
    seed: int = 0,
) -> dict[str, QuantizedWeight]:
    """{name: its quantized weight} for each weight of ``names`` read by an ``ix.linear`` of the
    float program's prefill, quantized by ``quantize`` in the order of the module docstring over
    ``windows`` of token ids (each one prefill from an empty cache). ``program`` is not changed.
    ValueError when ``windows`` is empty or a name is not the weight of a prefill linear."""
    if not windows:
        raise ValueError("sequential calibration: no windows")
    info = program.info
    assert info is not None, "quantize_sequential takes a decoder program"
    todo = set(names)
    readers: dict[SSAValue, set[str]] = {}  # the chosen weights each linear input feeds
    uses: dict[str, int] = {}  # the prefill linears that read each chosen weight
    interpreter = Interpreter(program.module, _Recent(program.weights))
    for op in interpreter.funcs["prefill"].walk():
        if isinstance(op, nn.LinearOp) and (name := weight_name(op)) in todo:
            readers.setdefault(op.input, set()).add(name)
            uses[name] = uses.get(name, 0) + 1
    missing = todo - set().union(*readers.values())
    if missing:
        raise ValueError(f"sequential calibration: no prefill linear reads {', '.join(sorted(missing))}")

    done: dict[str, QuantizedWeight] = {}
    dequantized: dict[str, np.ndarray] = {}  # the weights the quantized linears compute with
    left: dict[str, int] = {}  # the linear runs still to come that read each of them

    def quantized_linear(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
        assert isinstance(op, nn.LinearOp)
        name = weight_name(op) or ""
        w = dequantized.get(name)
        if w is None:
            return linear(op, ins, ctx)
        left[name] -= 1
        if left[name] == 0:
            del dequantized[name], left[name]
        kn = op.attributes.get("w_layout") == StringAttr("kn")  # stored [K, N]; quantized as [N, K]
        return linear(op, [ins[0], w.T if kn else w, *ins[2:]], ctx)

    interpreter.kernels = {**KERNELS, nn.LinearOp: quantized_linear}
    runs = [_prefill(interpreter, ids, info.num_kv_heads, info.head_dim, info.num_layers, info.cache_dtype)
            for ids in windows]
    rng = np.random.default_rng(seed)
    records: dict[SSAValue, InputStats] = {}
    while todo:
        stops = [_next_float_linear(run, todo) for run in runs]
        op, name = stops[0][0], weight_name(stops[0][0])
        assert name is not None and all(s[0] is op for s in stops), "the windows' prefills took different paths"
        stats = records.get(op.input)
        if stats is None:
            stats = records[op.input] = InputStats(int(stops[0][1][0].shape[-1]))
            for _, ins in stops:
                stats.add(ins[0], rng)
        w = np.asarray(program.weights[name], dtype=np.float32)
        done[name] = quantize(name, w, stats)
        dequantized[name], left[name] = done[name].dequantize(), uses[name] * len(runs)
        todo.discard(name)
        if not readers[op.input] & todo:
            del records[op.input]
    for run in runs:
        run.close()
    return done


def _prefill(
    interpreter: Interpreter, ids: Sequence[int], kv_heads: int, head_dim: int, layers: int, dtype: str
) -> Generator[Step, None, list[np.ndarray]]:
    """A paused prefill of one window from an empty cache, with the arguments a reference
    session passes (``DecoderSession.prefill``) and a cache the window's length long."""
    n = len(ids)
    cache = np.zeros((1, kv_heads, n, head_dim), dtype=STORAGE[DType(dtype)])
    return interpreter.steps(
        "prefill",
        np.asarray(ids, dtype=np.int32)[None],
        np.arange(n, dtype=np.int32)[None],
        np.asarray([n], dtype=np.int32),
        *[cache] * (2 * layers),
    )


def _next_float_linear(
    run: Generator[Step, None, list[np.ndarray]], todo: set[str]
) -> tuple[nn.LinearOp, list[np.ndarray]]:
    """Runs ``run`` up to the next linear whose weight is in ``todo``: that op and its operands."""
    for op, ins in run:
        if isinstance(op, nn.LinearOp) and weight_name(op) in todo:
            return op, ins
    raise AssertionError("the prefill ended with weights still to quantize")
