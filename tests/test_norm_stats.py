"""norm-stats: RMSNorm statistics of prefill GEMMs come from the kernel that produces their input
(o and down with a residual, the embedding gather), computed the same (reference interpreter, then the compiled
kernels in Triton's interpreter against HF), over launches that reuse the row-block counters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import transformers as T

import inferx
from inferx.compiler.codegen import generate
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.pipeline import registry
from inferx.passes.pipeline import PassManager, parse


def _llama(layers: int = 3, intermediate: int = 48) -> T.LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=67, hidden_size=32, intermediate_size=intermediate, num_hidden_layers=layers,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return T.LlamaForCausalLM(cfg).eval()


def _ops(func, kind: type) -> list:  # type: ignore[no-untyped-def]
    return [o for o in func.walk() if isinstance(o, kind)]


def test_prefill_norms_take_statistics_from_the_producing_gemm() -> None:
    program = inferx.import_model(_llama(3))
    PassManager(parse("merge-gemms,fold-norm-weights,dce,fuse,bind-families,norm-stats",
                      registry())).run(program.module)
    funcs = {f.sym_name.data: f for f in program.module.ops}
    prefill, decode = funcs["prefill"], funcs["decode"]
    # 3 layers: every norm takes precomputed statistics, the first qkv norm's from the embedding
    # gather, the other two qkv norms', the three post-attention norms' and the final norm's from GEMMs
    assert len(_ops(prefill, nn.RMSNormSumSquaresOp)) == 7
    assert not _ops(prefill, nn.RMSNormOp)
    producers = [k for k in _ops(prefill, KernelOp) if _ops(k, nn.SumSquaresOp)]
    assert sorted(k.template.data for k in producers) == ["gather"] + ["gemm"] * 6
    for k in producers:  # one more result: f32, one value per row of what the kernel produced
        x, ss = k.results[0].type, k.results[-1].type
        assert ss.dtype.value == "f32" and tuple(ss.shape) == tuple(x.shape[:-1])
    # decode is untouched: its GEMVs see whole rows of x in one pass anyway
    assert not _ops(decode, nn.RMSNormSumSquaresOp) and not _ops(decode, nn.SumSquaresOp)
    # prefill_last: the final norm runs on the gathered last tokens (a GEMV's prologue, as in
    # decode), yet its last down GEMM sums the statistics all the same: it is prefill's kernel
    last = funcs["prefill_last"]
    assert len(_ops(last, nn.RMSNormSumSquaresOp)) == 6 and len(_ops(last, nn.RMSNormOp)) == 1
    gemms = {name: [k for k in _ops(f, KernelOp) if k.template.data == "gemm"] for name, f in funcs.items()}
    down, down_last = gemms["prefill"][-2], gemms["prefill_last"][-2]
    assert _ops(down_last, nn.SumSquaresOp)
    assert generate(down_last, "k", "sm_90").source == generate(down, "k", "sm_90").source
    assert not any(u.operation in _ops(last, KernelOp) for u in down_last.results[-1].uses)  # never read


def test_fused_module_with_norm_stats_computes_the_same() -> None:
    model = _llama(2)
    plain = inferx.import_model(model).reference_session()
    program = inferx.import_model(model)
    PassManager(parse("merge-gemms,fold-norm-weights,dce,fuse,bind-families,norm-stats",
                      registry())).run(program.module)
    fused = program.reference_session()
    rows = [[5, 9, 2, 7, 1], [3, 3, 60, 12, 8]]
    np.testing.assert_allclose(fused.prefill(rows), plain.prefill(rows), atol=1e-5,
                               err_msg="repro: pytest tests/test_norm_stats.py -k computes_the_same")


def test_compiled_prefills_in_a_row_match_hf(tmp_path: Path) -> None:
    """The last program of each row block resets its counter: a second and third prefill of
    other lengths through the same session's kernels still match."""
    model = _llama(2)
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=48, max_batch=2)
    session = inferx.load(art)
    for n, (batch, length) in enumerate(((2, 9), (1, 33), (2, 9))):
        ids = torch.randint(0, 67, (batch, length), generator=torch.Generator().manual_seed(n))
        with torch.no_grad():
            want = model(ids).logits.numpy()
        session.reset()
        np.testing.assert_allclose(session.prefill(ids), want, atol=1e-4,
                                   err_msg=f"repro: pytest tests/test_norm_stats.py -k in_a_row (prefill {n})")


def test_int4_prefill_norms_take_statistics_from_the_producing_qgemm(tmp_path: Path) -> None:
    """With int4 linears the same: o and down (qgemm, residual epilogue) sum their rows' squares,
    q|k|v and gate|up (qgemm, norm prologue) read them; the compiled prefill, run twice at other
    lengths through the same kernels, matches the reference interpreter on the same quantized
    program."""
    from inferx.compiler.quant.store import quantize_program

    program = quantize_program(inferx.import_model(_llama(2, 64), dtype="f32"), "int4-g32")
    fused = quantize_program(inferx.import_model(_llama(2, 64), dtype="f32"), "int4-g32")
    PassManager(parse("merge-gemms,dce,fuse,bind-families,norm-stats", registry())).run(fused.module)
    prefill = next(f for f in fused.module.ops if f.sym_name.data == "prefill")
    producers = [k for k in _ops(prefill, KernelOp) if _ops(k, nn.SumSquaresOp)]
    assert sorted(k.template.data for k in producers) == ["gather"] + ["qgemm"] * 4
    assert len(_ops(prefill, nn.RMSNormSumSquaresOp)) == 5 and not _ops(prefill, nn.RMSNormOp)
    ref = program.reference_session()
    art = inferx.compile(program, target="cpu", output=tmp_path / "a", max_seq_len=48, max_batch=2)
    session = inferx.load(art)
    for n, (batch, length) in enumerate(((2, 9), (1, 33), (2, 9))):
        ids = torch.randint(0, 67, (batch, length), generator=torch.Generator().manual_seed(n))
        ref.reset()
        session.reset()
        want = ref.prefill(ids.numpy())
        np.testing.assert_allclose(session.prefill(ids), want, atol=1e-4 * max(1.0, float(np.abs(want).max())),
                                   err_msg=f"repro: pytest tests/test_norm_stats.py -k int4 (prefill {n})")


def test_int4_f16_prompt_tiles_with_statistics_match_the_reference(tmp_path: Path) -> None:
    """In f16 a prompt's qgemm tiles take the tile path (W dequantized, the norm's weight on W)
    with the norm statistics of the kernel before: the compiled prefill of a 40-token prompt
    against the reference interpreter on the same f16-quantized program (2% of the largest logit:
    W rounded to f16 for the dot, activations stored in f16)."""
    from inferx.compiler.quant.store import quantize_program

    program = quantize_program(inferx.import_model(_llama(2, 64), dtype="f16"), "int4-g32")
    ref = program.reference_session()
    art = inferx.compile(program, target="cpu", output=tmp_path / "a", max_seq_len=48, max_batch=1)
    source = "".join(p.read_text() for p in (tmp_path / "a" / "kernels").glob("qgemm_*.py"))
    assert "0x43000000" in source and "ws_rs" in source  # the tile path; o and down sum row squares
    ids = torch.randint(0, 67, (1, 40), generator=torch.Generator().manual_seed(3))
    want = np.asarray(ref.prefill(ids.numpy()), dtype=np.float32)
    got = inferx.load(art).prefill(ids)
    got = got.float().numpy() if torch.is_tensor(got) else np.asarray(got, dtype=np.float32)
    np.testing.assert_allclose(got, want, atol=2e-2 * float(np.abs(want).max()),
                               err_msg="repro: pytest tests/test_norm_stats.py -k f16_prompt_tiles")
