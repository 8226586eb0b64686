"""HF checkpoints quantized by GPTQ or AWQ (``quantization_config`` in config.json) read as int4
codes and group scales, without dequantizing: the ``QuantizedWeight`` each linear already is.

A quantized linear ``W[N, K]`` (HF's [out, in]) is stored as tensors beside the name ``<prefix>``
of its module (no ``<prefix>.weight``); groups of ``g`` consecutive K elements share a scale and
a zero point ``z``, and ``w[n, k] = scale * (q[k, n] - z)``::

    GPTQ  qweight int32 [K/8, N]    8 codes per int32 along K, element 8i + j in bits 4j..4j+3
          qzeros  int32 [K/g, N/8]  zero points packed along N the same way; the original
                                    format ("gptq", AutoGPTQ's v1) stores z - 1, "gptq_v2" z
          scales  f16   [K/g, N]
          g_idx   int32 [K]         the group of each K element: must be k // g (see below)
    AWQ   qweight int32 [K, N/8]    8 codes per int32 along N, nibble i holding column
          qzeros  int32 [K/g, N/8]  8c + AWQ_ORDER[i] of its pack (the gemm kernels' interleave)
          scales  f16   [K/g, N]

mapped onto ``inferx.compiler.ir.quant``'s contract as codes ``q`` transposed to [N, K], scales
[N, K/g] and minimums ``-z * scale`` (GPTQ with ``sym``: z is 8, the symmetric scheme, no
minimums). An fp16 scale has 11 significant bits and ``q``, ``z`` at most 5, so ``q * s``,
``z * s`` and their difference are exact in fp32: ``QuantizedWeight.dequantize()`` gives
bit for bit what ``scale * (q - z)`` in fp32 gives.

Refused, with ``HFQuantError`` naming the config field or the tensor: a quant_method other than
gptq or awq, bits other than 4, a group size InferX's kernels lack (32, 64 and 128; -1, one
group per column, included), AWQ layouts other than gemm (gemv, exllama, marlin...), GPTQ
checkpoint formats other than gptq and gptq_v2, and a GPTQ ``g_idx`` other than ``k // g``
(``desc_act`` orders K by activation: groups that are not contiguous, which the int4 kernels
cannot read). Tensors missing or of the wrong dtype or shape name themselves.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferx.compiler.frontend.weights import SafetensorsStore, WeightError
from inferx.compiler.ir.quant import GROUPS, QuantizedWeight, Scheme

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # nibble i of a pack holds column AWQ_ORDER[i]
_AWQ_COLUMNS = np.argsort(AWQ_ORDER)  # column j of a pack is nibble _AWQ_COLUMNS[j]
_SHIFTS = np.arange(0, 32, 4, dtype=np.uint32)
FLOATS = ("F16", "BF16", "F32")


class HFQuantError(WeightError):
    """A quantized HF checkpoint InferX cannot keep int4: the message names the config field or
    the tensor and why."""


@dataclass(frozen=True)
class HFQuant:
    """What a checkpoint's ``quantization_config`` says: the method (gptq or awq), the scheme its
    linears map to, and whether GPTQ zero points are stored minus one (AutoGPTQ's v1 format)."""

    method: str
    scheme: Scheme
    zeros_minus_one: bool = False


PARTS = ("qweight", "qzeros", "scales", "g_idx")  # a quantized linear's tensors (g_idx: GPTQ's, optional)


def quant_config(raw: Mapping[str, Any], where: str) -> HFQuant:
    """The ``HFQuant`` of config.json's ``quantization_config`` (``where`` names the file), or
    HFQuantError naming the field InferX does not support and why."""
    qc = raw.get("quantization_config")
    at = f"{where}: quantization_config"
    if not isinstance(qc, dict):
        raise HFQuantError(f"{at} must be an object, got {qc!r}")
    method = qc.get("quant_method")
    if method not in ("gptq", "awq"):
        raise HFQuantError(f"{at}.quant_method {method!r} is not supported: InferX keeps GPTQ and AWQ (gemm) "
                           "4-bit checkpoints int4")
    bits = qc.get("bits", qc.get("w_bit"))
    if bits != 4:
        raise HFQuantError(f"{at}.bits is {bits!r}: InferX's quantized kernels are 4-bit")
    group = qc.get("group_size", qc.get("q_group_size"))
    if group not in GROUPS:
        why = " (one group per column)" if group == -1 else ""
        raise HFQuantError(f"{at}.group_size is {group!r}{why}: InferX's int4 groups are "
                           f"{', '.join(map(str, GROUPS))} consecutive K elements")
    if method == "gptq":
        fmt = qc.get("checkpoint_format", "gptq")
        if fmt not in ("gptq", "gptq_v2") or qc.get("is_marlin_format", False):
            fmt = "marlin" if qc.get("is_marlin_format", False) else fmt
            raise HFQuantError(f"{at}.checkpoint_format {fmt!r} is not supported: InferX reads gptq and gptq_v2")
        sym = qc.get("sym", True)
        if not isinstance(sym, bool):
            raise HFQuantError(f"{at}.sym must be true or false, got {sym!r}")
        return HFQuant("gptq", Scheme(4, group, symmetric=sym), zeros_minus_one=fmt == "gptq")
    version = str(qc.get("version", "GEMM"))  # AutoAWQ writes "GEMM", "GEMV", ...
    if version.upper() != "GEMM":
        raise HFQuantError(f"{at}.version {version!r} is not supported: InferX reads AWQ's gemm layout")
    backend = str(qc.get("backend", "autoawq")).lower()
    if backend != "autoawq":
        raise HFQuantError(f"{at}.backend {backend!r} is not supported: InferX reads AutoAWQ's packing")
    if qc.get("zero_point", True) is not True:
        raise HFQuantError(f"{at}.zero_point is {qc.get('zero_point')!r}: InferX reads AWQ with zero points")
    return HFQuant("awq", Scheme(4, group))


def _nibbles(packed: np.ndarray) -> np.ndarray:
    """int32 [..., M] -> uint8 [..., M, 8], nibble i of each int32 (bits 4i..4i+3) at index i."""
    u = np.ascontiguousarray(packed).view(np.uint32)
    return ((u[..., None] >> _SHIFTS) & 0xF).astype(np.uint8)


def int4_from_gptq(qweight: np.ndarray, qzeros: np.ndarray, scales: np.ndarray, g_idx: np.ndarray | None,
                   spec: HFQuant, name: str) -> QuantizedWeight:
    """The QuantizedWeight of a GPTQ linear ``name`` (its tensors' prefix) from its stored tensors
    (see the module docstring); HFQuantError names the tensor whose shape or values do not fit."""
    g = spec.scheme.group
    k8, n = qweight.shape
    k = k8 * 8
    _expect(qzeros, (k // g, n // 8), f"{name}.qzeros")
    _expect(scales, (k // g, n), f"{name}.scales")
    if g_idx is not None:
        _expect(g_idx, (k,), f"{name}.g_idx")
        check_g_idx(g_idx, g, f"{name}.g_idx")
    codes = np.ascontiguousarray(_nibbles(qweight).transpose(0, 2, 1).reshape(k, n).T)  # [K/8, 8, N] -> [N, K]
    zeros = _nibbles(qzeros).reshape(k // g, n).T.astype(np.int32) + int(spec.zeros_minus_one)
    s = np.ascontiguousarray(scales.T, dtype=np.float32)
    if spec.scheme.symmetric:
        if np.any(zeros != 8):
            at = np.argwhere(zeros != 8)[0]
            raise HFQuantError(f"{name}.qzeros: sym is true but the zero point of column {at[0]}, group {at[1]} "
                               f"is {int(zeros[tuple(at)])}, not 8")
        return QuantizedWeight(spec.scheme, codes, s)
    return QuantizedWeight(spec.scheme, codes, s, -(zeros.astype(np.float32) * s))


def check_g_idx(g_idx: np.ndarray, group: int, what: str) -> None:
    """HFQuantError naming ``what`` unless ``g_idx[k]`` is ``k // group`` for every k."""
    plain = np.arange(g_idx.shape[0]) // group
    if not np.array_equal(g_idx, plain):
        at = int(np.flatnonzero(g_idx != plain)[0])
        raise HFQuantError(
            f"{what}: groups are not contiguous (desc_act orders K by activation: g_idx[{at}] = {int(g_idx[at])}, "
            f"not {at // group}); InferX's int4 kernels need groups of {group} consecutive K elements"
        )


def int4_from_awq(qweight: np.ndarray, qzeros: np.ndarray, scales: np.ndarray, spec: HFQuant,
                  name: str) -> QuantizedWeight:
    """The QuantizedWeight of an AWQ (gemm) linear ``name`` from its stored tensors (see the
    module docstring); HFQuantError names the tensor whose shape does not fit."""
    g = spec.scheme.group
    k, n8 = qweight.shape
    n = n8 * 8
    _expect(qzeros, (k // g, n8), f"{name}.qzeros")
    _expect(scales, (k // g, n), f"{name}.scales")
    codes = np.ascontiguousarray(_nibbles(qweight)[..., _AWQ_COLUMNS].reshape(k, n).T)
    zeros = _nibbles(qzeros)[..., _AWQ_COLUMNS].reshape(k // g, n).T
    s = np.ascontiguousarray(scales.T, dtype=np.float32)
    return QuantizedWeight(spec.scheme, codes, s, -(zeros.astype(np.float32) * s))


def _expect(a: np.ndarray | tuple[int, ...], shape: tuple[int, ...], what: str) -> None:
    have = tuple(a if isinstance(a, tuple) else a.shape)
    if have != shape:
        raise HFQuantError(f"{what}: shape {list(have)}, but the qweight and group size imply {list(shape)}")


class CheckpointInt4(Mapping[str, np.ndarray]):
    """The tensors of a GPTQ or AWQ checkpoint as the float importer reads them: each quantized
    linear ``<prefix>`` appears as ``<prefix>.weight`` [N, K] in float32, dequantized when read
    (the reference interpreter's view), in place of its stored parts; every other tensor as
    stored. ``int4(key)`` is that weight as the checkpoint stores it, a QuantizedWeight.
    Opening checks, from the headers (and the g_idx vectors), that each linear has all its
    parts, of the dtypes and shapes its qweight and the config imply, and contiguous groups;
    errors name the file and the tensor."""

    def __init__(self, base: SafetensorsStore, spec: HFQuant):
        self.base, self.spec = base, spec
        entries = base.entries
        self.linears: dict[str, tuple[int, int]] = {}  # "<prefix>.weight" -> (N, K)
        for key, e in entries.items():
            prefix, _, part = key.rpartition(".")
            if part == "qzeros" and f"{prefix}.qweight" not in entries:
                raise HFQuantError(f"{e.file}: tensor '{prefix}.qweight' is missing (its qzeros is there)")
            if part != "qweight":
                continue
            for p in PARTS:
                pe = entries.get(f"{prefix}.{p}")
                if pe is None and p != "g_idx":
                    raise HFQuantError(f"{e.file}: tensor '{prefix}.{p}' is missing ({spec.method.upper()} stores "
                                       "qweight, qzeros and scales for each quantized linear)")
                want = FLOATS if p == "scales" else ("I32", "I64") if p == "g_idx" else ("I32",)
                if pe is not None and (pe.dtype not in want or len(pe.shape) != (1 if p == "g_idx" else 2)):
                    raise HFQuantError(f"{pe.file}: tensor '{prefix}.{p}' is {pe.dtype} {list(pe.shape)}: "
                                       f"{spec.method.upper()} stores it as a {' or '.join(want)} "
                                       f"{'vector' if p == 'g_idx' else 'matrix'}")
            rows, cols = e.shape
            n, k = (cols, rows * 8) if spec.method == "gptq" else (cols * 8, rows)
            g = spec.scheme.group
            if k % g:
                raise HFQuantError(f"{e.file}: tensor '{key}' has K = {k}, not a multiple of the group size {g}")
            _expect(entries[f"{prefix}.qzeros"].shape, (k // g, n // 8), f"{e.file}: tensor '{prefix}.qzeros'")
            _expect(entries[f"{prefix}.scales"].shape, (k // g, n), f"{e.file}: tensor '{prefix}.scales'")
            if f"{prefix}.g_idx" in entries:  # read now (K integers): a reordered K is refused before any work
                _expect(entries[f"{prefix}.g_idx"].shape, (k,), f"{e.file}: tensor '{prefix}.g_idx'")
                check_g_idx(np.asarray(base[f"{prefix}.g_idx"]), g, f"{e.file}: tensor '{prefix}.g_idx'")
            self.linears[f"{prefix}.weight"] = (n, k)
        self.hidden = {f"{w[: -len('weight')]}{p}" for w in self.linears for p in PARTS}
        self.names = [key for key in entries if key not in self.hidden] + list(self.linears)

    def int4(self, key: str) -> QuantizedWeight:
        """The quantized linear ``key`` ("<prefix>.weight") as stored (KeyError for another key)."""
        if key not in self.linears:
            raise KeyError(key)
        prefix = key[: -len(".weight")]
        qw, qz, sc = (self.base[f"{prefix}.{p}"] for p in ("qweight", "qzeros", "scales"))
        if self.spec.method == "awq":
            return int4_from_awq(qw, qz, sc, self.spec, prefix)
        g_idx = self.base[f"{prefix}.g_idx"] if f"{prefix}.g_idx" in self.base else None
        return int4_from_gptq(qw, qz, sc, g_idx, self.spec, prefix)

    def __getitem__(self, key: str) -> np.ndarray:
        if key in self.linears:
            return self.int4(key).dequantize()
        if key in self.hidden:
            raise KeyError(key)
        return self.base[key]

    def __contains__(self, key: object) -> bool:
        return key in self.linears or (key in self.base and key not in self.hidden)

    def shape(self, key: str) -> tuple[int, ...]:
        return self.linears[key] if key in self.linears else self.base.shape(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


class Int4Linears(Mapping[str, QuantizedWeight]):
    """The int4 linears of a checkpoint as QuantizedWeights by IR weight name (``names``: IR
    name -> checkpoint key), each read from its files when asked for; the last one read is kept
    (its codes, scales and minimums are asked for in turn)."""

    def __init__(self, checkpoint: CheckpointInt4, names: Mapping[str, str]):
        self.checkpoint, self.names = checkpoint, dict(names)
        self._last: tuple[str, QuantizedWeight] | None = None

    def __getitem__(self, key: str) -> QuantizedWeight:
        if self._last is None or self._last[0] != key:
            self._last = (key, self.checkpoint.int4(self.names[key]))
        return self._last[1]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)
