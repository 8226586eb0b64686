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
from collections.abc import Iterator, Mapping

import numpy as np

from inferx.compiler.ir.fp8 import quantize_weight
from inferx.passes.dce import DCE
from inferx.passes.pipeline import PassManager
from inferx.passes.quantize_fp8 import QuantizeFp8, parse_fp8_name
from inferx.program import Program

KEEP = 2  # quantized weights kept at once


class Fp8Store(Mapping[str, np.ndarray]):
    """``base``'s weights and the FP8 parts of them (see the module docstring)."""

    def __init__(self, base: Mapping[str, np.ndarray]):
        self.base = base
        self._recent: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()

    def quantized(self, weight: str) -> tuple[np.ndarray, np.ndarray]:
        """(codes, scales) of ``weight``."""
        if weight not in self._recent:
            self._recent[weight] = quantize_weight(np.asarray(self.base[weight], dtype=np.float32), weight)
            while len(self._recent) > KEEP:
                self._recent.popitem(last=False)
        self._recent.move_to_end(weight)
        return self._recent[weight]

    def __getitem__(self, key: str) -> np.ndarray:
        if key in self.base:
            return self.base[key]
        parsed = parse_fp8_name(key)
        if parsed is None or parsed[0] not in self.base:
            raise KeyError(key)
        codes, scales = self.quantized(parsed[0])
        return codes if parsed[1] == "codes" else scales

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        parsed = parse_fp8_name(key)
        return key in self.base or (parsed is not None and parsed[0] in self.base)

    def __iter__(self) -> Iterator[str]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)


def quantize_program_fp8(program: Program, *, include: str = "*", exclude: str = "", head: bool = False) -> Program:
    """``program`` with the linears the options name (the quantize-fp8 pass) made ``ix.fp8_linear``
    and its store an ``Fp8Store`` (in place; returned for chaining). The reference interpreter
    runs it; no GPU kernel takes ``ix.fp8_linear`` yet, so it does not compile."""
    PassManager([QuantizeFp8(include=include, exclude=exclude, head=head), DCE()]).run(program.module)
    program.weights = Fp8Store(program.weights)
    return program
