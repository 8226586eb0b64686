"""merge-gemms on quantized linears: q|k|v and gate|up of a quantized tiny Llama become one
``ix.qlinear`` each (codes, scales and minimums concatenated along N), the artifact stores the
concatenations (codes packed after concatenating), the compiled cpu session matches the reference
session of the same quantized program, and the kernel count per decode layer drops from 11 to 8.
Qlinears that do not agree (column scales, here) stay apart. The pass's IR tests are in
tests/filecheck/passes/merge-gemms.mlir (positive and negative) and fuse.mlir (the gated pair)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import transformers as T
from test_qgemm import MAX_SEQ_LEN, PROMPT, STEPS, _assert_close, _q4_gguf, _quantized, _rtn, model  # noqa: F401

import inferx
from inferx.compiler import pipeline
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.quant import QuantizedWeight, Scheme, pack_int4
from inferx.compiler.options import CompileOptions
from inferx.compiler.quant.store import keep_gguf_quantized, quantize_program
from inferx.program import Program

SCHEME = "int4-g32"


def _run_phases(program: Program, upto: str = "fuse") -> Program:
    opts = CompileOptions(target="cpu", dtype="f32", max_seq_len=MAX_SEQ_LEN, max_batch=2)
    for name, spec in pipeline.phases(opts):
        pipeline.run(spec, program)
        if name == upto:
            break
    return program


def _decode_kernels(program: Program) -> list[KernelOp]:
    decode = next(f for f in program.module.ops if f.sym_name.data == "decode")  # type: ignore[attr-defined]
    return [o for o in decode.body.block.ops if isinstance(o, KernelOp)]


@pytest.fixture(scope="module")
def compiled(model: T.LlamaForCausalLM, tmp_path_factory: pytest.TempPathFactory) -> tuple[Program, Path]:  # noqa: F811
    program = _quantized(model, SCHEME)
    path = inferx.compile(program, target="cpu", output=tmp_path_factory.mktemp("merge") / "a",
                          max_seq_len=MAX_SEQ_LEN, max_batch=1)
    return program, path


def test_merged_qlinears_match_the_reference_session(compiled: tuple[Program, Path]) -> None:
    program, path = compiled
    repro = "repro: pytest tests/test_qgemm_merge.py -k matches_the_reference"
    cpu = inferx.load(path, device="cpu")
    ref = program.reference_session(max_batch=1, max_context=MAX_SEQ_LEN)
    ids = np.array([PROMPT])
    got, want = cpu.prefill(ids), ref.prefill(ids)
    _assert_close(got, want, "prefill logits", repro)
    for step in range(STEPS):
        tok = np.array([[int(np.asarray(want)[0, -1].argmax())]])
        got, want = cpu.decode(tok), ref.decode(tok)
        _assert_close(got, want, f"decode step {step}", repro)


def test_merged_weights_are_stored_concatenated_then_packed(compiled: tuple[Program, Path]) -> None:
    """The q|k|v and gate|up codes in the artifact are pack_int4 of the concatenated codes (so
    rows of packed bytes, concatenated), their scales and minimums the concatenated ones."""
    program, path = compiled
    weights = json.loads((path / "manifest.json").read_text())["weights"]
    stored = {n: (path / w["file"]).read_bytes() for n, w in weights.items() if n.startswith("derived.")}
    for layer in range(2):
        for names in (("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"), ("mlp.gate_proj", "mlp.up_proj")):
            full = [f"model.layers.{layer}.{n}.weight.{SCHEME}" for n in names]
            codes = np.concatenate([np.asarray(program.weights[f"{n}.codes"]) for n in full])
            packed = pack_int4((codes.astype(np.int16) + 8).astype(np.uint8)).tobytes()
            assert packed in stored.values(), f"layer {layer} {names}: no stored weight is the packed concatenation"
            for part in ("scales", "mins"):
                cat = np.concatenate([np.asarray(program.weights[f"{n}.{part}"]) for n in full])
                assert cat.astype("<f4").tobytes() in stored.values(), f"layer {layer} {names}: {part}"


def test_a_decode_layer_is_five_kernels(model: T.LlamaForCausalLM) -> None:  # noqa: F811
    """Per decode layer: q|k|v (one qgemm, the input norm its prologue, RoPE on the q and k
    columns and both KV writes in its epilogue), attention, o, gate|up (one qgemm, the
    post-attention norm its prologue, silu(gate) * up its epilogue) and down: 5 kernels, against
    11 unmerged and unfused."""
    layers = model.config.num_hidden_layers
    kernels = _decode_kernels(_run_phases(_quantized(model, SCHEME)))
    count: dict[str, int] = {}
    for k in kernels:
        count[k.template.data] = count.get(k.template.data, 0) + 1
    assert count == {"gather": 1, "gemm": 1, "qgemm": 4 * layers, "attention": layers}, count
    bodies = [[type(o) for o in k.body.block.ops] for k in kernels if k.template.data == "qgemm"]
    qkv = [b for b in bodies if b[0] is nn.RMSNormOp and b.count(t.SplitOp) and b.count(nn.RopeOp) == 2
           and b.count(nn.KVWriteOp) == 2]
    gate_up = [b for b in bodies if b[0] is nn.RMSNormOp and b.count(t.SplitOp) and b.count(t.SiluOp) == 1
               and b.count(t.MulOp) == 1]
    assert len(qkv) == layers and len(gate_up) == layers, bodies


def test_distinct_column_scales_are_not_merged(model: T.LlamaForCausalLM) -> None:  # noqa: F811
    """Each qlinear of an activation-aware program reads its own column scale (a weight of its
    own): merged, one column scale would have to serve all, so they stay seven per layer."""

    def scaled(w: np.ndarray, scheme: Scheme, name: str, scale_dtype: str) -> QuantizedWeight:
        qw = _rtn(w, scheme, name, scale_dtype)
        qw.col_scale = np.ones(w.shape[1], dtype=np.float32)
        return qw

    program = quantize_program(inferx.import_model(model, dtype="f32"), SCHEME, quantize=scaled, col_scale=True)
    _run_phases(program, upto="merge-gemms")
    assert not any(isinstance(o, t.ConcatOp) for o in program.module.walk())
    decode = next(f for f in program.module.ops if f.sym_name.data == "decode")  # type: ignore[attr-defined]
    qlinears = [o for o in decode.walk() if isinstance(o, nn.QLinearOp)]
    assert len(qlinears) == 7 * model.config.num_hidden_layers


def test_gguf_native_qlinears_merge(tmp_path: Path) -> None:
    """quant="gguf": a file whose seven linears are all Q4_0 merges q|k|v and gate|up as a
    program quantized by the compiler does (its numerics: test_qgemm's quant_gguf test)."""
    src = _q4_gguf(tmp_path / "q4.gguf")
    program = keep_gguf_quantized(inferx.import_model(src, dtype="f32"), src)
    count: dict[str, int] = {}
    for k in _decode_kernels(_run_phases(program)):
        count[k.template.data] = count.get(k.template.data, 0) + 1
    assert count.get("qgemm") == 4 and "pointwise" not in count and "reduction" not in count, count
