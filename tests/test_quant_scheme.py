"""Quantized-weight schemes and numerics (inferx/compiler/ir/quant.py)."""

from __future__ import annotations

import numpy as np
import pytest

from inferx.compiler.ir.quant import (
    QuantizedWeight,
    Scheme,
    SchemeError,
    dequantize,
    pack_int4,
    parse_scheme,
    unpack_int4,
)


def test_pack_puts_even_elements_in_the_low_nibble_and_unpacks_back() -> None:
    codes = np.array([[1, 2, 15, 0, 7, 9]], dtype=np.uint8)
    packed = pack_int4(codes)
    assert packed.tolist() == [[0x21, 0x0F, 0x97]]
    rng = np.random.default_rng(0)
    many = rng.integers(0, 16, (5, 128)).astype(np.uint8)
    assert np.array_equal(unpack_int4(pack_int4(many)), many)


def test_dequantize_asymmetric_symmetric_and_column_scale() -> None:
    codes = np.array([[0, 1, 8, 15]], dtype=np.uint8)
    s, m = np.array([[0.5, 2.0]], np.float32), np.array([[-1.0, 3.0]], np.float32)
    assert dequantize(codes, s, m, 2).tolist() == [[-1.0, -0.5, 19.0, 33.0]]
    assert dequantize(codes, s, None, 2).tolist() == [[-4.0, -3.5, 0.0, 14.0]]
    col = np.array([1.0, 2.0, 0.5, 1.0], np.float32)
    assert dequantize(codes, s, None, 2, col).tolist() == [[-4.0, -7.0, 0.0, 14.0]]


@pytest.mark.parametrize(
    "text, want",
    [("int4-g128", Scheme(4, 128, False)), ("int4-g32", Scheme(4, 32, False)), ("int4-g64-sym", Scheme(4, 64, True))],
)
def test_schemes_parse(text: str, want: Scheme) -> None:
    assert parse_scheme(text) == want and want.name == text


@pytest.mark.parametrize("text", ["int4", "int4-g100", "int8-g128", "int4-g128-asym", "fp8"])
def test_unknown_schemes_are_refused_naming_the_choices(text: str) -> None:
    with pytest.raises(SchemeError, match="int4-g128, int4-g64 or int4-g32"):
        parse_scheme(text)


def test_a_group_that_does_not_divide_k_names_the_tensor_and_a_group_that_fits() -> None:
    with pytest.raises(SchemeError, match=r"up_proj.weight: K = 96 .* group size 128 .* try a group of 32"):
        Scheme(group=128).check((10, 96), "up_proj.weight")
    with pytest.raises(SchemeError, match="matrices"):
        Scheme().check((128,), "norm.weight")


def test_a_quantized_weight_checks_its_parts() -> None:
    codes = np.zeros((2, 64), np.uint8)
    QuantizedWeight(Scheme(group=32), codes, np.ones((2, 2), np.float32), np.zeros((2, 2), np.float32))
    with pytest.raises(SchemeError):
        QuantizedWeight(Scheme(group=32), codes, np.ones((2, 2), np.float32))  # asymmetric without mins
    with pytest.raises(SchemeError):
        QuantizedWeight(Scheme(group=32), codes, np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32))


def _qlinear_module(mins: bool, col: bool) -> str:
    t, c, s = "!ix.tensor<[rows, 64], f32>", "!ix.tensor<[16, 64], i4>", "!ix.tensor<[16, 2], f32>"
    extra, types = ("mins %m", f"mins {s}") if mins else ("", "")
    if col:
        extra, types = f"{extra} col_scale %k", f"{types} col_scale !ix.tensor<[64], f32>"
    return (
        f"func.func @f(%x: {t}) -> !ix.tensor<[rows, 16], f32> {{\n"
        f'  %c = ix.weight {{name = "c"}} : {c}\n  %s = ix.weight {{name = "s"}} : {s}\n'
        f'  %m = ix.weight {{name = "m"}} : {s}\n  %k = ix.weight {{name = "k"}} : !ix.tensor<[64], f32>\n'
        f"  %0 = ix.qlinear %x, %c, %s {extra} {{group = 32}} : {t}, {c}, {s} {types} -> !ix.tensor<[rows, 16], f32>\n"
        "  func.return %0 : !ix.tensor<[rows, 16], f32>\n}\n"
    )


@pytest.mark.parametrize("mins, col", [(False, False), (True, False), (True, True)])
def test_the_interpreter_runs_qlinear_as_x_times_the_dequantized_weight(mins: bool, col: bool) -> None:
    """Codes are stored as q - 8 (i4 values); the interpreter adds 8 back before ``dequantize``."""
    from inferx.compiler.interpreter import Interpreter
    from inferx.compiler.ir.textio import parse_module

    rng = np.random.default_rng(1)
    codes = rng.integers(0, 16, (16, 64)).astype(np.uint8)
    s = rng.uniform(0.01, 0.1, (16, 2)).astype(np.float32)
    m = rng.uniform(-0.5, 0.0, (16, 2)).astype(np.float32)
    k = rng.uniform(0.5, 2.0, 64).astype(np.float32)
    weights = {"c": codes.astype(np.int8) - 8, "s": s, "m": m, "k": k}
    x = rng.standard_normal((3, 64)).astype(np.float32)
    (got,) = Interpreter(parse_module(_qlinear_module(mins, col))[0], weights).run("f", x)
    w = dequantize(codes, s, m if mins else None, 32, k if col else None)
    np.testing.assert_allclose(got, x @ w.T, rtol=1e-5, atol=1e-5)


def test_quantized_names_round_trip() -> None:
    from inferx.compiler.ir.quant import parse_quantized_name, quantized_names

    asym, sym = Scheme(group=64), Scheme(group=32, symmetric=True)
    names = quantized_names("model.layers.0.mlp.up_proj.weight", asym)
    assert names["codes"] == "model.layers.0.mlp.up_proj.weight.int4-g64.codes" and set(names) == {
        "codes",
        "scales",
        "mins",
    }
    assert set(quantized_names("w", sym)) == {"codes", "scales"}
    for part, name in names.items():
        assert parse_quantized_name(name) == ("model.layers.0.mlp.up_proj.weight", asym, part)
    assert parse_quantized_name("w.int4-g32-sym.mins") is None  # a symmetric scheme has no mins
    scaled = quantized_names("w", sym, col_scale=True)
    assert set(scaled) == {"codes", "scales", "col_scale"}
    assert parse_quantized_name(scaled["col_scale"]) == ("w", sym, "col_scale")
    for other in ("w", "w.codes", "w.int4-g100.codes", "w.int4-g32.bias", ".int4-g32.codes"):
        assert parse_quantized_name(other) is None
