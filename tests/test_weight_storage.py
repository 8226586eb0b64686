"""How the compiler stores weights: bf16 rounding and the float32 weight folds agree with the
interpreter's float64 path bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.ir import Block

from inferx.compiler.interpreter.context import KernelContext
from inferx.compiler.interpreter.kernels import KERNELS
from inferx.compiler.ir import ops_tensor as ts
from inferx.compiler.ir.types import DType, TensorType
from inferx.compiler.weight_store import _narrow_binary, weight_bytes


def _bf16_reference(a: np.ndarray) -> np.ndarray:
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def test_bf16_storage_rounds_to_nearest_even_and_reads_read_only_arrays() -> None:
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((33, 70)) * 7).astype(np.float32)
    a[0, :6] = [np.inf, -np.inf, 0.0, -0.0, 1.00390625, 1.01171875]  # the last two are ties
    a.setflags(write=False)
    got = weight_bytes(a, "bf16")
    assert got.dtype == np.dtype("<u2") and got.shape == a.shape
    np.testing.assert_array_equal(got, _bf16_reference(a))
    assert got[0, 4] == 0x3F80 and got[0, 5] == 0x3F82


@pytest.mark.parametrize("dtype", [DType.bf16, DType.f32])
@pytest.mark.parametrize("op_type", [ts.MulOp, ts.AddOp])
def test_weight_folds_in_float32_store_what_the_interpreter_computes(dtype: DType, op_type: type) -> None:
    rng = np.random.default_rng(1)
    w = rng.standard_normal((64, 48)).astype(np.float32)
    s = rng.standard_normal((48,)).astype(np.float32) * 3
    if dtype is DType.bf16:  # bf16 checkpoints: both operands hold bf16 values
        w = (_bf16_reference(w).astype(np.uint32) << 16).view(np.float32)
        s = (_bf16_reference(s).astype(np.uint32) << 16).view(np.float32)
    ty = TensorType((64, 48), dtype)
    block = Block(arg_types=[ty, TensorType((48,), dtype)])
    op = op_type(operands=list(block.args), result_types=[ty])
    narrow = _narrow_binary(op, [w, s], dtype)
    assert narrow is not None and narrow.dtype == np.float32
    wide = np.asarray(KERNELS[op_type](op, [w, s], KernelContext(env={}, weights={}))[0]).astype(np.float32)
    np.testing.assert_array_equal(narrow, wide)
    if dtype is DType.bf16:
        np.testing.assert_array_equal(weight_bytes(narrow, "bf16"), weight_bytes(wide, "bf16"))


def test_other_folds_stay_on_the_interpreter() -> None:
    ty = TensorType((4,), DType.f32)
    block = Block(arg_types=[ty, ty])
    op = ts.SubOp(operands=list(block.args), result_types=[ty])
    assert _narrow_binary(op, [np.ones(4, np.float32)] * 2, DType.f32) is None
    mul = ts.MulOp(operands=list(block.args), result_types=[ty])
    assert _narrow_binary(mul, [np.ones(4, np.float64)] * 2, DType.f32) is None


def test_an_artifact_stores_only_the_weights_its_kernels_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """What a merged or folded weight is computed from (the q, k and v weights of a concatenation,
    gate|up before its rows go into pairs, a weight before a norm scale multiplies it) is not
    stored: every stored weight is one a launch reads, and the stored bytes come to the model's
    parameters (norm scales folded away)."""
    import json

    import torch
    import transformers as T

    import inferx
    from inferx.runtime.artifact import load_artifact

    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    model = T.LlamaForCausalLM(cfg).eval()
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=16, max_batch=1)
    manifest = load_artifact(art).manifest

    def read(node):  # type: ignore[no-untyped-def]
        if isinstance(node, dict):
            if node.get("kind") == "weight":
                yield node["name"]
            for v in node.values():
                yield from read(v)
        elif isinstance(node, list):
            for v in node:
                yield from read(v)

    stored = manifest["weights"]
    assert set(stored) == set(read(manifest["entries"])), json.dumps(sorted(stored))
    stored_values = sum(int(np.prod(w["shape"])) for w in stored.values())
    params = sum(p.numel() for n, p in model.named_parameters() if "norm" not in n)
    assert params <= stored_values <= params + 4 * 32, (stored_values, params)
