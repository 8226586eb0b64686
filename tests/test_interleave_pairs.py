"""interleave-pairs: a gate|up linear stores its weight rows (and bias) in pairs and its halves
become step-2 slices; the module computes the same (reference interpreter), and the GEMM
template loads each tile's 2*BN rows as one run (one TMA box)."""

from __future__ import annotations

import pytest
import transformers as T

import inferx
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir.ops_base import get_int
from inferx.compiler.pipeline import registry
from inferx.passes.fold_norm_weights import weight_only
from inferx.passes.pipeline import PassManager, parse
from tests.hf_models import assert_sessions_agree, pass_test_model

FAMILIES = {
    "llama-mlp-bias": (T.LlamaConfig, T.LlamaForCausalLM, {"mlp_bias": True}),
    "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM, {}),
    "phi3": (T.Phi3Config, T.Phi3ForCausalLM, {"pad_token_id": 0}),  # one fused gate_up weight
}


def _model(family: str):
    cfg_cls, model_cls, extra = FAMILIES[family]
    return pass_test_model(cfg_cls, model_cls, extra, lambda name: (-0.5, 0.5) if name.endswith("bias") else None)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_pairs_keep_the_results_and_replace_every_gated_split(family: str) -> None:
    model = _model(family)
    plain = inferx.import_model(model)
    paired = inferx.import_model(model)
    PassManager(parse("merge-gemms,dce", registry())).run(plain.module)
    PassManager(parse("merge-gemms,interleave-pairs,dce", registry())).run(paired.module)
    linears = [o for o in paired.module.walk() if isinstance(o, nn.LinearOp) and o.result.type.shape[-1] == 80]
    assert len(linears) == 6, "one gate|up linear per layer of prefill, prefill_last and decode"
    for lin in linears:
        users = [u.operation for u in lin.result.uses]
        assert sorted(get_int(s.attributes, "step") for s in users if isinstance(s, t.SliceOp)) == [2, 2], users
        assert len(users) == 2
        assert isinstance(lin.weight.owner, t.ReshapeOp) and weight_only(lin.weight)
        assert (lin.bias is not None) == (family == "llama-mlp-bias")
        if lin.bias is not None:
            assert isinstance(lin.bias.owner, t.ReshapeOp)
    splits = [o for o in paired.module.walk() if isinstance(o, t.SplitOp)]
    assert all(len(s.results) != 2 for s in splits), "a two-way split is left"
    assert_sessions_agree(plain.reference_session(), paired.reference_session(),
                          f"repro: pytest tests/test_interleave_pairs.py -k '{family}'", rtol=1e-5, atol=1e-6)


def _split_module(use_half):  # type: ignore[no-untyped-def]
    """``x @ W^T`` cut into two halves of 4; the first half goes through ``use_half``."""
    from xdsl.dialects.builtin import FunctionType, ModuleOp, StringAttr
    from xdsl.dialects.func import FuncOp, ReturnOp
    from xdsl.ir import Block, Region

    from inferx.compiler.ir.ops_base import int_attr
    from inferx.compiler.ir.symbolic import sym
    from inferx.compiler.ir.types import TensorType

    xt = TensorType((sym("batch"), 8), "f32")
    block = Block(arg_types=[xt])
    w = t.WeightOp.make(result_types=[TensorType((8, 8), "f32")], name=StringAttr("w"))
    lin = nn.LinearOp.make(block.args[0], w.results[0], None)
    half = TensorType((sym("batch"), 4), "f32")
    split = t.SplitOp.make(lin.results[0], result_types=[half, half], dim=int_attr(-1))
    first = use_half(split.results[0])
    out = t.MulOp.make(first.results[0], split.results[1])
    block.add_ops([w, lin, split, first, out, ReturnOp(out.results[0])])
    module = ModuleOp([FuncOp("f", FunctionType.from_lists([xt], [half]), Region(block))])
    return module, lin, split


def test_halves_read_by_a_layout_op_stay_apart() -> None:
    """Pairs pay only where the halves meet elementwise: a half read by a transpose (as RoPE or
    a head split would) keeps the split and the weight as they were."""
    from inferx.compiler.ir.ops_base import ints_attr

    module, lin, split = _split_module(lambda h: t.TransposeOp.make(h, perm=ints_attr([0, 1])))
    weight = lin.weight
    PassManager(parse("interleave-pairs", registry())).run(module)
    assert split.parent is not None and lin.weight is weight
    module, lin, split = _split_module(lambda h: t.SiluOp.make(h))
    PassManager(parse("interleave-pairs", registry())).run(module)
    assert split.parent is None and isinstance(lin.weight.owner, t.ReshapeOp)


def test_the_gemm_template_loads_pairs_as_one_run_of_rows() -> None:
    """After interleave-pairs the gate|up GEMM of a prefill takes 2*BN contiguous rows per tile
    (one load; one TMA box under TMA, also with split-K) and a decode GEMV reads rows 2c and
    2c + 1; the task is tagged "pairs"."""
    from inferx.autotune.extract import extract_tasks, fused_module
    from inferx.compiler.codegen import generate
    from inferx.compiler.database import parse_schedule

    tasks = [tt for tt in extract_tasks(fused_module(_model("qwen2"), "bf16"), 64).tasks
             if tt.task.template == "gemm" and tt.task.gated]
    assert {tt.task.shape for tt in tasks} == {"prefill", "decode"}
    for tt in tasks:
        assert "pairs" in tt.task.epilogue.split("+") and tt.task.tile_n == 40, tt.task
        if tt.task.shape == "decode":
            src = generate(tt.kernel, "k", "sm_90", parse_schedule("gemm", 
                {"bm": 1, "bn": 8, "bk": 32, "num_warps": 4, "num_stages": 2}), grid_dependency=False).source
            assert "gc = 2 * c" in src and "pc = gc + 1" in src, src
            continue
        for extra, load in (({}, "cw = pid_n * 2 * BN + t2"), ({"tma": 1}, "w = w_desc.load([pid_n * 2 * BN, k0]).T"),
                            ({"tma": 1, "split_k": 2}, "w = w_desc.load([pid_n * 2 * BN, k0]).T")):
            s = {"bm": 64, "bn": 32, "bk": 16, "num_warps": 4, "num_stages": 2, **extra}
            src = generate(tt.kernel, "k", "sm_90", parse_schedule("gemm", s), grid_dependency=False).source
            assert load in src and "acc, accp = tl.split(tl.reshape(acc2, (BM, BN, 2)))" in src, (s, src)
            assert "wp =" not in src and ("block_shape=[2 * BN, BK]" in src) == bool(extra.get("tma")), (s, src)
