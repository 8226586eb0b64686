"""int4 codes unpacked into floats in registers: the PTX byte permutes the int4 GEMMs and the
dequantization of a prompt's weights share (``qgemm``, ``dequant``), and the same bits from integer
operations in Triton's interpreter, which runs no PTX."""

from __future__ import annotations

from inferx.compiler.families.common.tile import Emitter


def unpack_asm(magic: int, byte: int) -> str:
    """PTX for the GPU build: four bytes of codes (one register) into the fp32 values of their eight
    nibbles, each put into byte ``byte`` of the float ``magic`` by one byte permute ($0-$3 the low
    nibbles of bytes 0-3, $4-$7 the high ones), so eight codes cost eleven integer instructions;
    Triton's own unpack and conversion took about four times as many. Triton's interpreter runs
    no PTX: there the same bits come from integer operations (``unpacked_bits``)."""
    assert byte in (0, 1, 2) and magic & 0x00FFFFFF == 0, "the nibble goes into a zero byte below the top one"
    prmt = []
    for out, src in enumerate(("lo", "lo", "lo", "lo", "hi", "hi", "hi", "hi")):
        # the selector's nibbles, high to low: magic's top byte, then zero bytes of magic (5, 4)
        # with the source byte (0-3 of ``src``) at ``byte``
        low = ["5", "4"]
        low.insert(2 - byte, str(out % 4))
        prmt.append(f"prmt.b32 ${out}, {src}, mg, 0x7{''.join(low)};")
    return ('"{ .reg .b32 lo, hi, mg; ' f"mov.b32 mg, 0x{magic:08X}; and.b32 lo, $8, 0x0F0F0F0F; shr.u32 hi, $8, 4; "
            f"and.b32 hi, hi, 0x0F0F0F0F; {' '.join(prmt)} }}\"")


# The one-row GEMV's codes as 2^23 + q (a nibble in the low byte of 2^23's bits); the prefill
# tile's as 128 + q (in byte 2 of 128.0's), so that ``m - 128 s`` loses none of m's bits.
UNPACK_ASM = unpack_asm(0x4B000000, 0)
UNPACK_ASM_128 = unpack_asm(0x43000000, 2)


def unpacked_bits(em: Emitter, b: str, magic: int, byte: int) -> None:
    """``f0``, ``f1``: the bits of the fp32 values of bytes ``b``'s low and high nibbles placed as
    ``unpack_asm(magic, byte)`` places them (the PTX on the GPU, integer operations elsewhere)."""
    e = em.emit
    e("if ON_GPU:")
    em.indent += 1
    e(f"f0, f1 = tl.inline_asm_elementwise({unpack_asm(magic, byte)}, \"=r,=r,=r,=r,=r,=r,=r,=r,r\", [{b}], "
      "dtype=(tl.int32, tl.int32), is_pure=True, pack=4)")
    em.indent -= 1
    e("else:")
    em.indent += 1
    e(f"bi = {b}.to(tl.int32)")
    shift = f" << {8 * byte}" if byte else ""
    e(f"f0 = ((bi & 15){shift}) | 0x{magic:08X}")
    e(f"f1 = ((bi >> 4){shift}) | 0x{magic:08X}")
    em.indent -= 1


def dequantized_128(em: Emitter, w: str, mins: bool) -> None:
    """``w``: the codes of ``f0``, ``f1`` (``unpacked_bits`` at 128.0's byte 2, interleaved: the low
    nibble first) dequantized in fp32 by one fused multiply-add with the group's scale ``s``
    against ``mn - 128 s`` (``-136 s`` without minimums: ``(q - 8) s``), exact up to its one
    rounding. The int4 GEMM's prompt tile and the dequantize kernel make W so, alike bit for bit."""
    em.emit("cst = mn - 128.0 * s" if mins else "cst = -136.0 * s")
    em.emit(f"{w} = tl.fma(tl.interleave(f0, f1).to(tl.float32, bitcast=True), s[:, None], cst[:, None])")
