"""The weight store of a quantized program: the float weights, and the quantized parts of the
weights the quantize pass named, computed on first access.

``quantize_program`` runs the ``quantize`` pass on a program and wraps its store in a
``QuantizedStore``, which serves every name ``quant.quantized_names`` makes: the codes as the
interpreter stores i4 (int8, ``q - 8``), the scales and minimums in the storage of the weight's
dtype. A weight is quantized when one of its parts is first read, by round-to-nearest unless
another method or already-quantized weights are given; the parts of the most recent weights are
kept, so reading codes, scales and minimums in turn quantizes once while the store as a whole
never holds more than a few quantized weights (an 8B model's would not fit).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from inferx.compiler.interpreter.numerics import STORAGE, round_to
from inferx.compiler.ir.quant import QuantizedWeight, Scheme, parse_quantized_name
from inferx.compiler.ir.types import DType
from inferx.passes.dce import DCE
from inferx.passes.pipeline import PassManager
from inferx.passes.quantize import Quantize, apply_schemes, kn_weights
from inferx.program import Program

if TYPE_CHECKING:
    from inferx.compiler.quant.calibrate import InputStats

Quantizer = Callable[[np.ndarray, Scheme, str, str], QuantizedWeight]  # (w, scheme, name, scale dtype)
KEEP = 2  # quantized weights kept at once


def rtn(w: np.ndarray, scheme: Scheme, name: str, scale_dtype: str) -> QuantizedWeight:
    from inferx.compiler.quant.rtn import quantize_rtn

    return quantize_rtn(w, scheme, name=name, scale_dtype=None if scale_dtype == "f32" else scale_dtype)


class QuantizedStore(Mapping[str, np.ndarray]):
    """``base``'s weights and the quantized parts of them (see the module docstring). ``supplied``
    maps a weight's name to its QuantizedWeight when it arrives quantized."""

    keep = KEEP  # quantized weights kept at once (an instance may keep more: every run rereads them)

    def __init__(
        self,
        base: Mapping[str, np.ndarray],
        dtype: DType,
        quantize: Quantizer = rtn,
        supplied: Mapping[str, QuantizedWeight] | None = None,
        transposed: Collection[str] = (),
    ):
        self.base, self.dtype, self.quantize = base, dtype, quantize
        self.supplied: Mapping[str, QuantizedWeight] = supplied or {}
        self.transposed = frozenset(transposed)  # stored [K, N]: their parts are the transpose's
        self._recent: OrderedDict[tuple[str, Scheme], QuantizedWeight] = OrderedDict()

    def quantized(self, weight: str, scheme: Scheme) -> QuantizedWeight:
        """``weight`` under ``scheme``: supplied, or computed from the float weight."""
        qw = self.supplied.get(weight)
        if qw is not None:
            if qw.scheme != scheme:
                raise KeyError(f"weight '{weight}' arrives as {qw.scheme.name}, not {scheme.name}")
            return qw
        key = (weight, scheme)
        if key not in self._recent:
            w = np.asarray(self.base[weight], dtype=np.float32)
            if weight in self.transposed:
                w = np.ascontiguousarray(w.T)
            self._recent[key] = self.quantize(w, scheme, weight, self.dtype.value)
            while len(self._recent) > self.keep:
                self._recent.popitem(last=False)
        self._recent.move_to_end(key)
        return self._recent[key]

    def __getitem__(self, key: str) -> np.ndarray:
        if key in self.base:
            return self.base[key]
        parsed = parse_quantized_name(key)
        if parsed is None or not (parsed[0] in self.base or parsed[0] in self.supplied):
            raise KeyError(key)
        weight, scheme, part = parsed
        qw = self.quantized(weight, scheme)
        if part == "codes":
            return (qw.codes.astype(np.int16) - 8).astype(STORAGE[DType.i4])
        if part == "col_scale":  # a method that found no channel scaling worth having left none
            ones = np.ones(qw.shape[1], dtype=np.float32)
            return round_to(qw.col_scale if qw.col_scale is not None else ones, self.dtype)
        values = qw.scales if part == "scales" else qw.mins
        assert values is not None
        return round_to(values, self.dtype)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        if key in self.base:
            return True
        parsed = parse_quantized_name(key)
        return parsed is not None and (parsed[0] in self.base or parsed[0] in self.supplied)

    def __iter__(self) -> Iterator[str]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)


def quantize_program(
    program: Program,
    scheme: str,
    *,
    include: str = "*",
    exclude: str = "",
    head: bool = False,
    quantize: Quantizer = rtn,
    supplied: Mapping[str, QuantizedWeight] | None = None,
    col_scale: bool = False,
    overrides: str = "",
) -> Program:
    """``program`` with the linears ``scheme`` names (see the quantize pass) made ``ix.qlinear``
    and its store a ``QuantizedStore`` (in place; returned for chaining). ``col_scale``: each
    qlinear reads its weight's column scale (``supplied`` by an activation-aware method).
    ``overrides``: the pass's per-layer rules (``PATTERN=SCHEME`` or ``PATTERN=float``)."""
    assert program.info is not None, "quantize_program takes a decoder program"
    chosen = Quantize(scheme=scheme, include=include, exclude=exclude, head=head, overrides=overrides)
    transposed = kn_weights(program.module)
    if col_scale:
        schemes = chosen.schemes(program.module)
        apply_schemes(program.module, schemes, scaled=set(schemes), kn=True)
        PassManager([DCE()]).run(program.module)
    else:
        PassManager([chosen, DCE()]).run(program.module)
    program.weights = QuantizedStore(program.weights, DType(program.info.dtype), quantize, supplied, transposed)
    return program


class _GGUFInt4(Mapping[str, QuantizedWeight]):
    """The 4-bit tensors of a GGUF file as QuantizedWeights, each read from the file when asked for."""

    def __init__(self, path: Path):
        from inferx.compiler.frontend.gguf import read_gguf
        from inferx.compiler.quant.gguf_int4 import int4_tensors

        self.header = read_gguf(path)
        self.names = sorted(int4_tensors(self.header))

    def __getitem__(self, key: str) -> QuantizedWeight:
        from inferx.compiler.quant.gguf_int4 import read_int4

        if key not in self.names:
            raise KeyError(key)
        return read_int4(self.header, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


def keep_gguf_quantized(program: Program, path: str | Path) -> Program:
    """A program imported from the GGUF file ``path`` with each linear whose weight the file
    holds in a 4-bit type (Q4_0, Q4_1, Q4_K) made ``ix.qlinear`` over the file's own codes and
    scales, under the scheme the type is (``gguf_int4``): nothing is dequantized and quantized
    again. Other weights (Q8_0, F16, F32) stay as imported. In place; returned for chaining."""
    assert program.info is not None, "keep_gguf_quantized takes a decoder program"
    supplied = _GGUFInt4(Path(path))
    apply_schemes(program.module, {name: supplied[name].scheme for name in supplied})
    PassManager([DCE()]).run(program.module)
    program.weights = QuantizedStore(program.weights, DType(program.info.dtype), supplied=supplied)
    return program


def keep_checkpoint_quantized(program: Program, path: str | Path) -> Program:
    """A program imported from the HF checkpoint directory ``path``, quantized by GPTQ or AWQ,
    with each linear the checkpoint stores in int4 made ``ix.qlinear`` over the checkpoint's own
    codes, scales and zero points (``hf_int4``): nothing is dequantized and quantized again.
    Other weights (embeddings, norms, usually the LM head) stay as imported. In place; returned
    for chaining. HFQuantError for a checkpoint that is not quantized, or an int4 linear that
    has no ``ix.qlinear`` form (its weight not in [N, K] layout): it would otherwise run
    dequantized to float."""
    from inferx.compiler.frontend.hf import checkpoint_store, find_key, read_json_object
    from inferx.compiler.ir.ops_tensor import WeightOp
    from inferx.compiler.quant.hf_int4 import CheckpointInt4, HFQuantError, Int4Linears

    assert program.info is not None, "keep_checkpoint_quantized takes a decoder program"
    path = Path(path)
    config = path / "config.json"
    raw = read_json_object(config)
    if "quantization_config" not in raw:
        raise HFQuantError(f"{config}: no quantization_config: the checkpoint is not quantized (quant checkpoint "
                           "keeps a GPTQ or AWQ checkpoint's int4 weights; an int4 scheme such as int4-g128 "
                           "quantizes a float one)")
    checkpoint = checkpoint_store(path, raw)
    assert isinstance(checkpoint, CheckpointInt4)
    names = {name: key for name in program.weights
             if (key := find_key(name, checkpoint)) is not None and key in checkpoint.linears}
    supplied = Int4Linears(checkpoint, names)
    apply_schemes(program.module, {name: checkpoint.spec.scheme for name in names})
    PassManager([DCE()]).run(program.module)
    for op in program.module.walk():
        if isinstance(op, WeightOp) and op.attributes["name"].data in names:  # type: ignore[attr-defined]
            name = op.attributes["name"].data  # type: ignore[attr-defined]
            raise HFQuantError(f"{path}: weight '{names[name]}' is int4 in the checkpoint but is not read by a "
                               "linear of [N, K] layout, the one form ix.qlinear takes: it would run dequantized")
    program.weights = QuantizedStore(program.weights, DType(program.info.dtype), supplied=supplied)
    return program


METHODS = ("rtn", "awq", "gptq")


def quantize_calibrated(
    program: Program,
    scheme: str,
    method: str,
    windows: Sequence[Sequence[int]],
    *,
    include: str = "*",
    exclude: str = "",
    head: bool = False,
    act_order: bool = False,
    damp: float = 0.01,
    sequential: bool = False,
    stats: Mapping[str, InputStats] | None = None,
    overrides: str = "",
) -> Program:
    """``program`` quantized under ``scheme`` by ``method`` (rtn, awq or gptq), the latter two
    calibrated on ``windows`` of token ids: with ``sequential``, each linear on the inputs it sees
    once the linears before it are quantized (``sequential.quantize_sequential``); else on the
    float model's inputs (``calibrate.capture``), or on ``stats`` when given (a capture of this
    program's float weights, so one capture serves several schemes and methods; ``windows`` is
    then unused; ValueError with ``sequential``). ``act_order`` and ``damp`` are GPTQ's
    (``quantize_gptq``). In place; returned for chaining. Every weight is quantized here, before
    the store is made, and the store holds them all: fine for small models, an 8B model wants
    the codes streamed to the artifact layer by layer."""
    if method not in METHODS:
        raise ValueError(f"unknown quantization method {method!r}: expected one of {', '.join(METHODS)}")
    if method == "rtn":
        return quantize_program(program, scheme, include=include, exclude=exclude, head=head, overrides=overrides)
    if sequential and stats is not None:
        raise ValueError("sequential calibration captures its own statistics: stats are those of the float model")
    chosen = Quantize(scheme=scheme, include=include, exclude=exclude, head=head,
                      overrides=overrides).schemes(program.module)
    dtype = DType(program.info.dtype).value if program.info is not None else "f32"
    scale_dtype = None if dtype == "f32" else dtype
    transposed = kn_weights(program.module)

    def one(name: str, w: np.ndarray, st: InputStats) -> QuantizedWeight:
        w = np.ascontiguousarray(w.T) if name in transposed else w  # stored [K, N]: quantized as [N, K]
        if method == "awq":
            from inferx.compiler.quant.awq import quantize_awq

            return quantize_awq(w, st.sample, chosen[name], name, stats=st.mean_abs, scale_dtype=scale_dtype)
        from inferx.compiler.quant.gptq import quantize_gptq

        return quantize_gptq(w, st.hessian, chosen[name], name, act_order=act_order, damp=damp,
                             scale_dtype=scale_dtype)

    if sequential:
        from inferx.compiler.quant.sequential import quantize_sequential

        supplied = quantize_sequential(program, windows, list(chosen), one)
    else:
        from inferx.compiler.quant.calibrate import capture

        if stats is None:
            stats = capture(program, windows)
        supplied = {name: one(name, np.asarray(program.weights[name], dtype=np.float32), stats[name])
                    for name in chosen}
    return quantize_program(
        program, scheme, include=include, exclude=exclude, head=head, supplied=supplied, col_scale=method == "awq",
        overrides=overrides,
    )
