"""The weights an artifact stores: each value a kernel reads that depends on weights alone, evaluated
once (a concatenation, a norm scale folded into a GEMM weight) and named by how it is computed;
and their bytes as stored."""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable

import numpy as np
from xdsl.ir import Operation, SSAValue

from inferx.compiler.interpreter.context import KernelContext
from inferx.compiler.interpreter.kernels import KERNELS
from inferx.compiler.ir import ops_tensor as ts
from inferx.compiler.ir.fp8 import decode_e4m3, encode_e4m3
from inferx.compiler.ir.ops_tensor import WeightOp
from inferx.compiler.ir.quant import pack_int4, unpack_int4
from inferx.compiler.ir.types import DType, TensorType
from inferx.compiler.options import CompileError
from inferx.program import Program

FORMAT_NOTE = "weights are stored little-endian in the kernel dtype; bf16 as its 16 raw bits"
# i4 codes (q - 8, ``ix.qlinear``) are stored packed: codes + 8 two to a byte along the last dim,
# element 2j in the low nibble (``quant.pack_int4``), so an [N, K] weight is N x K / 2 bytes.


def safe_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)


def weight_bytes(arr: np.ndarray, dtype: str) -> np.ndarray:
    """A weight as stored: little-endian, bf16 as the top 16 bits of its fp32 value rounded to
    nearest even. Converted in chunks of 16M values, so an 8B model's weights pass through memory
    once instead of as several full-size temporaries."""
    if dtype != "bf16":
        return np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False)
    import torch  # its float -> bf16 cast rounds to nearest even, vectorized and threaded

    flat = np.ascontiguousarray(arr).reshape(-1)
    out = np.empty(flat.size, dtype="<u2")
    step = 1 << 24
    for i in range(0, flat.size, step):
        with warnings.catch_warnings():  # a read-only memory map; the tensor is only read
            warnings.filterwarnings("ignore", message=".*not writable")
            chunk = torch.from_numpy(flat[i : i + step].astype(np.float32, copy=False))
        out[i : i + step] = chunk.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    return out.reshape(arr.shape)


class WeightFolder:
    """Evaluates the weight-only values kernels read, and names them: a leaf keeps its weight's
    name; a derived value is named by the hash of how it is computed, so prefill and decode share
    it and compiling twice gives the same names. Only values a kernel reads are kept (and
    written): what they are computed from (the q, k and v weights of a concatenation, the
    concatenation a norm scale multiplies) is evaluated when needed and let go."""

    def __init__(self, program: Program):
        self.program = program
        self.stored: dict[str, np.ndarray] = {}
        self.dtypes: dict[str, str] = {}
        self._names: dict[SSAValue, str] = {}

    def name_of(self, v: SSAValue) -> str:
        """The stored name of ``v``, a value a kernel reads (evaluated and kept on first use)."""
        name = self._name(v)
        if name not in self.stored:
            self.stored[name] = self._value(v)
            self.dtypes[name] = v.type.dtype.value  # type: ignore[attr-defined]
        return name

    def manifest_shape(self, name: str) -> tuple[int, ...]:
        """The shape the manifest states for a stored weight: its array's, except for i4 codes,
        stated unpacked ([N, K], stored as [N, K / 2] bytes)."""
        shape = tuple(self.stored[name].shape)
        return (*shape[:-1], 2 * shape[-1]) if self.dtypes[name] == "i4" else shape

    def _name(self, v: SSAValue) -> str:
        if v not in self._names:
            owner = v.owner
            assert isinstance(owner, Operation)
            if isinstance(owner, WeightOp):
                self._names[v] = owner.attributes["name"].data  # type: ignore[attr-defined]
            else:
                self._names[v] = "derived." + hashlib.sha256(_recipe(owner, self).encode()).hexdigest()[:16]
        return self._names[v]

    def _value(self, v: SSAValue) -> np.ndarray:
        """``v`` as stored (i4 codes packed)."""
        name = self._name(v)
        if name in self.stored:
            return self.stored[name]
        ty = v.type
        assert isinstance(ty, TensorType)
        return self._storage(self._computed(v), ty.dtype)

    def _computed(self, v: SSAValue) -> np.ndarray:
        """``v`` as the interpreter holds it (i4 codes unpacked, ``q - 8`` as int8; f8e4m3 as
        float32 E4M3 values), the form the interpreter's kernels compute a derived value from (a
        concatenation of codes)."""
        name = self._name(v)
        owner = v.owner
        ty = v.type
        assert isinstance(owner, Operation) and isinstance(ty, TensorType)
        if name in self.stored:
            a = self.stored[name]
            if ty.dtype == DType.f8e4m3:
                return decode_e4m3(a)
            return (unpack_int4(a).astype(np.int16) - 8).astype(np.int8) if ty.dtype == DType.i4 else a
        if isinstance(owner, WeightOp):
            a = np.asarray(self.program.weights[name])
            return a if ty.dtype in _CODES else self._storage(a, ty.dtype)
        ins = [self._computed(x) for x in owner.operands]
        narrow = _narrow_binary(owner, ins, ty.dtype)
        if narrow is not None:
            return narrow
        outs = KERNELS[type(owner)](owner, ins, KernelContext(env={}, weights={}))
        results: list[SSAValue] = list(owner.results)
        out = np.asarray(outs[results.index(v)])
        return out if ty.dtype in _CODES else self._storage(out, ty.dtype)

    @staticmethod
    def _storage(a: np.ndarray, dtype: DType) -> np.ndarray:
        if dtype == DType.i4:  # codes q - 8 in -8..7, packed as q two to a byte
            return np.ascontiguousarray(pack_int4((a.astype(np.int16) + 8).astype(np.uint8)))
        if dtype == DType.f8e4m3:  # E4M3 values as their bytes
            return np.ascontiguousarray(encode_e4m3(a))
        want = {DType.f32: np.float32, DType.bf16: np.float32, DType.f16: np.float16, DType.i32: np.int32,
                DType.i64: np.int64, DType.i8: np.int8}.get(dtype)
        if want is None:
            raise CompileError(f"weights of dtype {dtype.value} are not stored yet")
        return np.ascontiguousarray(a, dtype=want)


# Dtypes whose stored form (packed codes, E4M3 bytes) differs from the interpreter's values
_CODES = (DType.i4, DType.f8e4m3)

_NARROW_BINARY: dict[type, Callable[..., np.ndarray]] = {ts.MulOp: np.multiply, ts.AddOp: np.add}


def _narrow_binary(op: Operation, ins: list[np.ndarray], dtype: DType) -> np.ndarray | None:
    """A weight-only product or sum (a norm scale folded into a GEMM weight) in float32, an
    8B model's folds taking seconds instead of minutes in the interpreter's float64. The same
    values once stored: a product or sum of two bf16 or fp16 values is exact in float32, and of
    two float32 values float32 rounds once, as float64 then float32 does. None for other ops."""
    fn = _NARROW_BINARY.get(type(op))
    if fn is None or dtype not in (DType.f32, DType.bf16):
        return None
    a, b = ins
    if a.dtype != np.float32 or b.dtype != np.float32:
        return None
    return np.ascontiguousarray(fn(a, b, dtype=np.float32))


def _recipe(op: Operation, folder: WeightFolder) -> str:
    attrs = ",".join(f"{k}={v}" for k, v in sorted(op.attributes.items()))
    args = ",".join(folder._name(v) for v in op.operands)
    types = ",".join(str(r.type) for r in op.results)
    return f"{op.name}[{attrs}]({args})->{types}"
