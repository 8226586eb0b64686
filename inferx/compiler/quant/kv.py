"""The FP8 KV cache: per-head scales calibrated on text, and the program rewritten to use them.

``observe_kv`` runs the float program's prefill over calibration windows and keeps, for each
cache argument (``k{i}``, ``v{i}``), the largest magnitude each KV head wrote (keys after RoPE).
``quantize_program_kv`` runs the quantize-kv pass and serves each cache's scales
(``ir.fp8.kv_scales``: that magnitude at 448) from the program's store; the program's
``ModelInfo`` says its cache is f8e4m3, so sessions allocate it so. Values past the calibrated
range saturate at +-448 times the scale.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
from xdsl.ir import BlockArgument, Operation, SSAValue

from inferx.compiler.interpreter.attention import kv_write
from inferx.compiler.interpreter.context import KernelContext
from inferx.compiler.interpreter.kernels import KERNELS
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.fp8 import FP8_MAX, kv_scales
from inferx.passes.dce import DCE
from inferx.passes.pipeline import PassManager
from inferx.passes.quantize_kv import QuantizeKV, kv_scale_name
from inferx.program import Program

FP8 = "f8e4m3"


def cache_name(v: SSAValue) -> str | None:
    """The argument a cache value descends from (through earlier writes), by its name."""
    while isinstance(v.owner, nn.KVWriteOp):
        v = v.owner.cache
    return v.name_hint if isinstance(v, BlockArgument) else None


def observe_kv(program: Program, windows: Sequence[Sequence[int]]) -> dict[str, np.ndarray]:
    """{cache argument: the largest magnitude written per KV head [h]} over ``windows`` of token
    ids, each one prefill of the float ``program`` from an empty cache (padding is not written,
    so it is not counted)."""
    from inferx.compiler.quant.calibrate import prefill_windows

    out: dict[str, np.ndarray] = {}

    def recording(op: Operation, ins: Sequence[np.ndarray], ctx: KernelContext) -> list[np.ndarray]:
        assert isinstance(op, nn.KVWriteOp)
        name = cache_name(op.cache)
        if name is not None:
            new, pos = np.asarray(ins[1], dtype=np.float32), np.asarray(ins[2])
            written = np.abs(np.where((pos >= 0)[:, None, :, None], new, 0))  # [b, h, s, d]
            amax = written.max(axis=(0, 2, 3)) if written.size else np.zeros(new.shape[1], np.float32)
            out[name] = np.maximum(out[name], amax) if name in out else amax
        return kv_write(op, ins, ctx)

    prefill_windows(program, windows, KERNELS[nn.LinearOp], kernels={nn.KVWriteOp: recording})
    return out


def uniform_kv(program: Program, scale: float) -> dict[str, np.ndarray]:
    """{cache argument: the largest magnitude per KV head} that gives every head of every cache
    ``scale`` (``ir.fp8.kv_scales``: 448 x scale), read from the program's cache writes alone."""
    out: dict[str, np.ndarray] = {}
    for op in program.module.walk():
        if isinstance(op, nn.KVWriteOp) and (name := cache_name(op.cache)) is not None:
            heads = op.new.type.shape[1]  # type: ignore[attr-defined]
            out[name] = np.full(heads, FP8_MAX * scale, dtype=np.float32)
    return out


class KVScales(Mapping[str, np.ndarray]):
    """``base``'s weights and each FP8 cache's per-head scales (``kv_scale_name``)."""

    def __init__(self, base: Mapping[str, np.ndarray], scales: Mapping[str, np.ndarray]):
        self.base, self.scales = base, {kv_scale_name(c): np.asarray(s, dtype=np.float32) for c, s in scales.items()}

    def __getitem__(self, key: str) -> np.ndarray:
        return self.scales[key] if key in self.scales else self.base[key]

    def __contains__(self, key: object) -> bool:
        return key in self.scales or key in self.base

    def __iter__(self) -> Iterator[str]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)


def quantize_program_kv(program: Program, amax: Mapping[str, np.ndarray]) -> Program:
    """``program`` with its KV caches FP8 (the quantize-kv pass), its store serving the scales
    ``ir.fp8.kv_scales`` makes of ``amax`` ({cache argument: largest magnitude per head},
    ``observe_kv``), and its ModelInfo's kv_dtype f8e4m3 (in place; returned for chaining).
    KeyError naming a cache that ``amax`` lacks."""
    PassManager([QuantizeKV(), DCE()]).run(program.module)
    wanted = {c for op in program.module.walk() if isinstance(op, nn.KVWriteOp) and (c := cache_name(op.cache))}
    missing = sorted(wanted - set(amax))
    if missing:
        raise KeyError(f"no calibrated range for the KV caches {', '.join(missing)}")
    program.weights = KVScales(program.weights, {c: kv_scales(amax[c]) for c in wanted})
    if program.info is not None:
        program.info = dataclasses.replace(program.info, kv_dtype=FP8)
    return program


__all__ = ["FP8", "KVScales", "cache_name", "observe_kv", "quantize_program_kv", "uniform_kv"]
