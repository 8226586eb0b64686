"""E4M3 ("fn": 4 exponent bits biased by 7, 3 fraction bits, largest 448) in generated kernels.

On the GPU Triton converts to and from ``tl.float8e4nv`` (round to nearest even). Triton's
interpreter has no FP8 it can be trusted with, so there the same values are made in fp32 and
integer arithmetic; each helper emits both forms under ``ON_GPU`` (the module header's switch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Emitter(Protocol):
    """What these helpers write into (``tile.Emitter``, which imports this module): lines at an
    indent."""

    indent: int

    def emit(self, line: str) -> None: ...

# fp32 x (|x| <= 448) rounded to the nearest E4M3 value, ties to even, in fp32 arithmetic: a
# normal keeps 3 fraction bits (integer rounding of its bits), a subnormal (below 2^-6) is a
# multiple of 2^-9 (adding 2^23 rounds an fp32 to an integer, ties to even). ``fr`` is left
# holding the magnitude.
ROUND = """\
fb = tl.abs({v}).to(tl.int32, bitcast=True)
fn = (((fb + 0x7FFFF + ((fb >> 20) & 1)) >> 20) << 20).to(tl.float32, bitcast=True)
fs = ((tl.abs({v}) * 512.0 + 8388608.0) - 8388608.0) * 0.001953125
fr = tl.minimum(tl.where(tl.abs({v}) < 0.015625, fs, fn), 448.0)
{out} = tl.where({v} < 0, -fr, fr)"""

# E4M3 bytes (sign, 4 exponent bits biased by 7, 3 fraction bits) as fp32 values.
DECODE = """\
ci = {b}.to(tl.int32)
ce = (ci >> 3) & 15
cv = tl.where(ce == 0, (ci & 7).to(tl.float32) * 0.001953125,
              (((ce + 120) << 23) | ((ci & 7) << 20)).to(tl.float32, bitcast=True))
{out} = tl.where((ci & 128) != 0, -cv, cv)"""

# After ROUND: the byte of the E4M3 value whose magnitude ``fr`` holds and whose sign is {v}'s
# (a normal's exponent and fraction are its fp32 bits', rebiased; a subnormal's fraction is
# fr * 512).
ENCODE = """\
fe = fr.to(tl.int32, bitcast=True)
fc = tl.where(fr < 0.015625, (fr * 512.0).to(tl.int32), (((fe >> 23) - 120) << 3) | ((fe >> 20) & 7))
{out} = (fc | tl.where({v} < 0, 128, 0)).to(tl.uint8)"""


def emit_lines(em: Emitter, template: str, **names: str) -> None:
    for line in template.format(**names).splitlines():
        em.emit(line)


def emit_to_bytes(em: Emitter, v: str, out: str) -> None:
    """``out``: the E4M3 bytes (uint8) of fp32 ``v`` (|v| <= 448), rounded to nearest even."""
    em.emit("if ON_GPU:")
    em.emit(f"    {out} = {v}.to(tl.float8e4nv).to(tl.uint8, bitcast=True)")
    em.emit("else:")
    em.indent += 1
    emit_lines(em, ROUND, v=v, out="fq")
    emit_lines(em, ENCODE, v=v, out=out)
    em.indent -= 1


def emit_from_bytes(em: Emitter, b: str, out: str, dtype: str) -> None:
    """``out``: the values of the E4M3 bytes ``b`` as ``dtype`` (a Triton type, exact for f16,
    bf16 and fp32: every E4M3 value is one of theirs)."""
    em.emit("if ON_GPU:")
    em.emit(f"    {out} = {b}.to(tl.float8e4nv, bitcast=True).to({dtype})")
    em.emit("else:")
    em.indent += 1
    emit_lines(em, DECODE, b=b, out=out)
    em.emit(f"{out} = {out}.to({dtype})")
    em.indent -= 1


def emit_normed_rows(em: Emitter, x_ptr: str, k: int, norm: Any, g: Any, x_tl: str | None) -> Callable[[], None]:
    """For a program's rows ``r`` (mask ``rm``) of x [rows, K] at ``x_ptr`` read in steps ``k0 +
    kk``: with an RMSNorm ``norm``, emits its rows' ``rstd`` (the sums of squares loaded where
    norm-stats made it ``ix.rmsnorm_ss``, else a pass over K); returns the emitter of ``a``, the
    step at ``k0`` as an FP8 linear quantizes it (the norm's output, times its weight ``g``,
    rounded to x's Triton type ``x_tl``, None for fp32), in fp32."""
    from inferx.compiler.ir import ops_nn as nn
    from inferx.compiler.ir.ops_base import get_float

    e = em.emit
    load_x = f"tl.load({x_ptr} + r[:, None] * {k} + (k0 + kk)[None, :], mask=rm[:, None], other=0).to(tl.float32)"
    if isinstance(norm, nn.RMSNormSumSquaresOp):  # the rows' sums of squares: from the producer
        e(f"ss = tl.load(in{norm.sumsq.index} + r, mask=rm, other=0)")  # type: ignore[attr-defined]
        e(f"rstd = tl.sqrt(ss / {k} + {get_float(norm.attributes, 'eps')!r})")
    elif norm is not None:  # the rows' sums of squares, for the norm's scale
        e("ss = tl.zeros((BM,), dtype=tl.float32)")
        e(f"for k0 in range(0, {k}, BK):")
        e(f"    a = {load_x}")
        e("    ss += tl.sum(a * a, 1)")
        e(f"rstd = tl.sqrt(ss / {k} + {get_float(norm.attributes, 'eps')!r})")

    def value() -> None:
        e(f"a = {load_x}")
        if norm is not None:
            e("a = a / rstd[:, None]")
            if g is not None:
                e(f"a = a * tl.load(in{g.index} + k0 + kk).to(tl.float32)[None, :]")
            if x_tl is not None:
                e(f"a = a.to({x_tl}).to(tl.float32)")

    return value


def emit_row_scales(em: Emitter, value: Callable[[], None], k: int, x_scale: str | None) -> None:
    """``sx`` [BM]: the static scale loaded from ``x_scale`` (a pointer expression), or each row's
    largest magnitude of ``value``'s steps over 448 (1 for a row of zeros), a pass over K."""
    from inferx.compiler.ir.fp8 import FP8_MAX

    e = em.emit
    if x_scale is not None:
        e(f"sx = tl.zeros((BM,), dtype=tl.float32) + tl.load({x_scale})")
        return
    e("amax = tl.zeros((BM,), dtype=tl.float32)")
    e(f"for k0 in range(0, {k}, BK):")
    em.indent += 1
    value()
    e("amax = tl.maximum(amax, tl.max(tl.abs(a), 1))")
    em.indent -= 1
    e(f"sx = tl.where(amax > 0, amax / {FP8_MAX!r}, 1.0)")
