"""How the reference interpreter stores each `ix` element type in NumPy, and how it rounds to it.

Storage: f32 -> float32, f16 -> float16, bf16 and f8e4m3 -> float32 arrays whose values are
exactly representable in the narrow type, i8 and i4 -> int8 (i4 values lie in [-8, 7]), i32 ->
int32, i64 -> int64, bool -> bool. Kernels compute floats in float64 (GEMMs in float32) and
``round_to`` rounds the result once, to nearest even, into the result's element type.

Conversions into integer types: from a float, truncate toward zero and saturate to the type's
range (NaN -> 0); from an integer, i4 saturates to [-8, 7] and the wider types wrap (two's
complement, as integer arithmetic does). Into bool: ``x != 0``. Into f8e4m3 (the "fn" variant:
no infinity, max 448), a value past 448 saturates to +-448 (infinities too) and NaN stays NaN, as
PyTorch's cast to ``float8_e4m3fn`` does.
"""

from __future__ import annotations

import numpy as np

from inferx.compiler.ir.types import DType

STORAGE: dict[DType, np.dtype] = {
    DType.f32: np.dtype(np.float32),
    DType.f16: np.dtype(np.float16),
    DType.bf16: np.dtype(np.float32),
    DType.f8e4m3: np.dtype(np.float32),
    DType.i8: np.dtype(np.int8),
    DType.i4: np.dtype(np.int8),
    DType.i32: np.dtype(np.int32),
    DType.i64: np.dtype(np.int64),
    DType.bool: np.dtype(np.bool_),
}

INT_RANGE: dict[DType, tuple[int, int]] = {
    DType.i4: (-8, 7),
    DType.i8: (-(2**7), 2**7 - 1),
    DType.i32: (-(2**31), 2**31 - 1),
    DType.i64: (-(2**63), 2**63 - 1),
}


def _round_mantissa(x: np.ndarray, mant_bits: int, min_exp: int) -> np.ndarray:
    """Rounds float64 ``x`` to ``mant_bits`` fraction bits, normals down to 2**min_exp, exactly."""
    with np.errstate(all="ignore"):
        _, e = np.frexp(x)  # |x| = m * 2**e with m in [0.5, 1)
        exp = np.maximum(e.astype(np.int64) - 1, min_exp)
        quantum = np.ldexp(1.0, exp - mant_bits)
        out = np.round(x / quantum) * quantum  # power-of-two scaling is exact; round() is half-even
    return np.where(np.isfinite(x), out, x)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """bfloat16 rounding (8 exponent bits, 7 fraction bits); overflow gives +-inf."""
    x64 = np.asarray(x, dtype=np.float64)
    out = _round_mantissa(x64, 7, -126)
    bf16_max = (2 - 2.0**-7) * 2.0**127
    out = np.where(np.abs(out) > bf16_max, np.copysign(np.inf, out), out)
    return out.astype(np.float32)


def round_f8e4m3(x: np.ndarray) -> np.ndarray:
    """float8 e4m3fn rounding (4 exponent bits, 3 fraction bits, no inf): saturates at +-448."""
    x64 = np.asarray(x, dtype=np.float64)
    out = np.clip(_round_mantissa(x64, 3, -6), -448.0, 448.0)
    return out.astype(np.float32)


def round_to(x: np.ndarray, dtype: DType) -> np.ndarray:
    """Converts a kernel's result into the storage of ``dtype``, rounding as the module doc says."""
    x = np.asarray(x)
    storage = STORAGE[dtype]
    if dtype is DType.bool:
        return x if x.dtype == np.bool_ else x != 0
    if dtype.is_float:
        if dtype is DType.bf16:
            return round_bf16(x)
        if dtype is DType.f8e4m3:
            return round_f8e4m3(x)
        if x.dtype == storage:
            return x
        with np.errstate(over="ignore"):
            return x.astype(storage)
    lo, hi = INT_RANGE[dtype]
    if x.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            t = np.nan_to_num(np.trunc(x.astype(np.float64)), nan=0.0)
        inside = np.clip(t, -(2.0**63), 2.0**63 - 1024).astype(np.int64)  # largest float64 < 2**63
        return np.where(t >= 2.0**63, hi, np.clip(inside, lo, hi)).astype(storage)
    if dtype is DType.i4:
        return np.clip(x.astype(np.int64), lo, hi).astype(storage)
    if x.dtype == storage:
        return x
    return x.astype(np.int64).astype(storage)  # bool/int -> int: wraps


def compute(x: np.ndarray) -> np.ndarray:
    """A float array in the precision elementwise math and reductions run in (float64)."""
    return np.asarray(x, dtype=np.float64)
