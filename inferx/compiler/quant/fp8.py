"""The weight store of an FP8 (W8A8) program: the float weights, and the E4M3 codes and channel
scales of the weights the quantize-fp8 pass named, computed on first access.

``quantize_program_fp8`` runs the pass on a program and wraps its store in an ``Fp8Store``, which
serves every name ``fp8_names`` makes: codes as the interpreter stores f8e4m3 (float32 holding
E4M3 values), scales as float32 (``ir.fp8.quantize_weight``). As with int4, the parts of the most
recent weights are kept, so reading codes then scales quantizes once and the store never holds
more than a few quantized weights.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterator, Mapping, Sequence

import numpy as np

from inferx.compiler.ir.fp8 import quantize_weight
from inferx.passes.dce import DCE
from inferx.passes.pipeline import PassManager
from inferx.passes.quantize import kn_weights
from inferx.passes.quantize_fp8 import X_SCALE, QuantizeFp8, parse_fp8_name
from inferx.program import Program

KEEP = 2  # quantized weights kept at once


def gptq_fp8(program: Program, names: Collection[str], windows: Sequence[Sequence[int]], *, damp: float = 0.1,
             act_order: bool = True) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{weight: (codes, scales)} of the float ``program``'s weights ``names`` by GPTQ over the E4M3
    grid (``gptq.quantize_gptq_fp8``), each on its input's Hessian over ``windows`` of token ids
    (``calibrate.capture``, the float model's inputs)."""
    from inferx.compiler.quant.calibrate import capture
    from inferx.compiler.quant.gptq import quantize_gptq_fp8

    stats = capture(program, windows)
    transposed = kn_weights(program.module)
    out = {}
    for name in names:
        w = np.asarray(program.weights[name], dtype=np.float32)
        w = np.ascontiguousarray(w.T) if name in transposed else w
        out[name] = quantize_gptq_fp8(w, stats[name].hessian, name, damp=damp, act_order=act_order)
    return out


class Fp8Store(Mapping[str, np.ndarray]):
    """``base``'s weights and the FP8 parts of them (see the module docstring)."""

    keep = KEEP  # quantized weights kept at once (an instance may keep more: every run rereads them)

    def __init__(self, base: Mapping[str, np.ndarray], transposed: Collection[str] = (),
                 x_scales: Mapping[str, float] | None = None,
                 supplied: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None):
        self.base = base
        self.supplied = dict(supplied or {})  # weight: (codes, scales) made by a calibrated method (GPTQ)
        self.transposed = frozenset(transposed)  # weights stored [K, N], quantized as their transpose
        self.x_scales = dict(x_scales or {})  # weight: the static scale of its input (calibrated)
        self._recent: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()

    def quantized(self, weight: str) -> tuple[np.ndarray, np.ndarray]:
        """(codes, scales) of ``weight``."""
        if weight in self.supplied:
            return self.supplied[weight]
        if weight not in self._recent:
            w = np.asarray(self.base[weight], dtype=np.float32)
            self._recent[weight] = quantize_weight(w.T if weight in self.transposed else w, weight)
            while len(self._recent) > self.keep:
                self._recent.popitem(last=False)
        self._recent.move_to_end(weight)
        return self._recent[weight]

    def __getitem__(self, key: str) -> np.ndarray:
        if key in self.base:
            return self.base[key]
        parsed = parse_fp8_name(key)
        if parsed is None or parsed[0] not in self.base:
            raise KeyError(key)
        if parsed[1] == X_SCALE:
            if parsed[0] not in self.x_scales:
                raise KeyError(key)
            return np.array([self.x_scales[parsed[0]]], dtype=np.float32)
        codes, scales = self.quantized(parsed[0])
        return codes if parsed[1] == "codes" else scales

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        parsed = parse_fp8_name(key)
        if parsed is not None and parsed[1] == X_SCALE:
            return parsed[0] in self.x_scales
        return key in self.base or (parsed is not None and parsed[0] in self.base)

    def __iter__(self) -> Iterator[str]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)


def quantize_program_fp8(program: Program, *, include: str = "*", exclude: str = "", head: bool = False,
                         x_scales: Mapping[str, float] | None = None,
                         supplied: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None) -> Program:
    """``program`` with the linears the options name (the quantize-fp8 pass) made ``ix.fp8_linear``
    and its store an ``Fp8Store`` (in place; returned for chaining). The reference interpreter
    runs it and the fp8gemm kernels compile it. Weights stored [K, N] are quantized as their
    transpose. With ``x_scales`` ({weight: the static scale of its input}, ``observers``), each
    linear quantizes its input by that scale instead of per token. ``supplied``: {weight:
    (codes, scales)} made by a calibrated method, served instead of round-to-nearest's."""
    transposed = kn_weights(program.module)
    static = x_scales is not None
    PassManager([QuantizeFp8(include=include, exclude=exclude, head=head, static=static), DCE()]).run(program.module)
    program.weights = Fp8Store(program.weights, transposed, x_scales, supplied)
    return program
