"""fold-norm-weights: RMSNorm scales move into the weights of the GEMMs they feed; the module
computes the same (reference interpreter); the GEMM template then reads x tiles as loaded."""

from __future__ import annotations

import pytest
import transformers as T

import inferx
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.pipeline import registry
from inferx.passes.fold_norm_weights import is_ones, weight_only
from inferx.passes.pipeline import PassManager, parse
from tests.hf_models import assert_sessions_agree, pass_test_model

FAMILIES = {
    "llama-tied": (T.LlamaConfig, T.LlamaForCausalLM, {"tie_word_embeddings": True}),
    "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM, {}),
    "phi3": (T.Phi3Config, T.Phi3ForCausalLM, {"pad_token_id": 0}),
}


def _model(family: str):
    cfg_cls, model_cls, extra = FAMILIES[family]
    return pass_test_model(cfg_cls, model_cls, extra, lambda name: (0.5, 1.5) if "norm" in name else None)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fold_keeps_the_results_and_moves_every_scale(family: str) -> None:
    model = _model(family)
    plain = inferx.import_model(model)
    folded = inferx.import_model(model)
    PassManager(parse("merge-gemms,fold-norm-weights,dce", registry())).run(folded.module)
    norms = [o for o in folded.module.walk() if isinstance(o, nn.RMSNormOp)]
    assert norms, "no RMSNorm in the model"
    for norm in norms:  # every norm here feeds only linears: all fold
        assert is_ones(norm.weight), f"{family}: a norm kept its scale"
        for use in norm.result.uses:
            lin = use.operation
            assert isinstance(lin, nn.LinearOp)
            assert isinstance(lin.weight.owner, t.MulOp) and weight_only(lin.weight)
    assert_sessions_agree(plain.reference_session(), folded.reference_session(),
                          f"repro: pytest tests/test_fold_norm_weights.py -k '{family}'", rtol=1e-4, atol=1e-5)


def test_a_tied_head_keeps_the_embedding_for_the_gather() -> None:
    folded = inferx.import_model(_model("llama-tied"))
    PassManager(parse("merge-gemms,fold-norm-weights,dce", registry())).run(folded.module)
    embs = [o for o in folded.module.walk() if isinstance(o, nn.EmbeddingOp)]
    assert embs
    names = set()
    for emb in embs:
        assert isinstance(emb.table.owner, t.WeightOp), "the gather must read the unscaled table"
        names.add(emb.table.owner.attributes["name"].data)
    heads = [o for o in folded.module.walk() if isinstance(o, nn.LinearOp) and o.result.type.shape[-1] == 67]
    assert heads
    for head in heads:  # the head reads a scaled copy of the same table
        scaled = head.weight.owner
        assert isinstance(scaled, t.MulOp)
        assert {o.owner.attributes["name"].data for o in scaled.operands if isinstance(o.owner, t.WeightOp)} & names


def test_a_norm_with_another_user_is_not_folded() -> None:
    """A norm whose result also feeds something other than a linear keeps its scale."""
    from xdsl.dialects.builtin import FunctionType, ModuleOp, StringAttr
    from xdsl.dialects.func import FuncOp, ReturnOp
    from xdsl.ir import Block, Region

    from inferx.compiler.ir.ops_base import float_attr
    from inferx.compiler.ir.symbolic import sym
    from inferx.compiler.ir.types import TensorType

    xt = TensorType((sym("batch"), 8), "f32")
    block = Block(arg_types=[xt])
    g = t.WeightOp.make(result_types=[TensorType((8,), "f32")], name=StringAttr("g"))
    w = t.WeightOp.make(result_types=[TensorType((4, 8), "f32")], name=StringAttr("w"))
    norm = nn.RMSNormOp.make(block.args[0], g.results[0], eps=float_attr(1e-5))
    lin = nn.LinearOp.make(norm.results[0], w.results[0], None)
    other = t.ExpOp.make(norm.results[0])
    block.add_ops([g, w, norm, lin, other, ReturnOp(lin.results[0], other.results[0])])
    out_t = [lin.results[0].type, other.results[0].type]
    module = ModuleOp([FuncOp("f", FunctionType.from_lists([xt], out_t), Region(block))])
    PassManager(parse("fold-norm-weights", registry())).run(module)
    assert norm.weight is g.results[0] and lin.weight is w.results[0]


def test_the_gemm_template_reads_folded_tiles_as_loaded() -> None:
    """With the scale folded, an sm_90 prefill GEMM that takes its row statistics itself (no
    norm-stats pass here) does so in a loop of their own and feeds the dot the tile it loaded; a
    decode GEMV keeps one loop."""
    from inferx.compiler.codegen import generate
    from inferx.compiler.ir.ops_kernel import KernelOp
    from inferx.passes.pipeline import PassManager, parse

    module = inferx.import_model(_model("qwen2")).module
    spec = "canonicalize,cse,dce,merge-gemms,interleave-pairs,fold-norm-weights,dce,fuse,bind-families"
    PassManager(parse(spec, registry())).run(module)
    seen = set()
    for kop in (o for o in module.walk() if isinstance(o, KernelOp) and o.template.data == "gemm"):
        if not isinstance(kop.body.block.first_op, nn.RMSNormOp):
            continue
        src = generate(kop, "k", "sm_90", None, grid_dependency=False).source
        prefill = "S_seq" in src.split("for k0")[0]
        seen.add(prefill)
        assert "g = tl.load" not in src, "a folded scale is still loaded"
        assert ("for k1 in range" in src) == prefill, src
    assert seen == {True, False}
