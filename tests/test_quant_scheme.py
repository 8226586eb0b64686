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
