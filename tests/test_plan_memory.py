"""plan-memory on a fused tiny Llama: live buffers never share memory in any bucket, reuse saves
memory, KV caches are aliased in place, and the plan is deterministic and round-trips as text."""

from __future__ import annotations

import itertools
import re

import pytest
import torch
import transformers as T
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp

import inferx
from inferx.compiler.ir.textio import IRError, parse_module
from inferx.compiler.pipeline import registry
from inferx.passes.pipeline import PassManager, parse
from inferx.passes.plan_memory import ATTR, MemoryPlan, PlanError, module_report, plan_memory, read_plan

BUCKETS = {"batch": (1, 4, 16), "seq": (1, 7, 512), "ctx": (64,)}
PIPELINE = "merge-gemms,dce,fuse,bind-families,plan-memory{batch=1,4,16 seq=1,7,512 max-ctx=64}"
LAYERS = 2


def _llama(layers: int) -> T.LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=67, hidden_size=32, intermediate_size=40, num_hidden_layers=layers,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return T.LlamaForCausalLM(cfg).eval()


def _planned(pipeline: str = PIPELINE) -> ModuleOp:
    program = inferx.import_model(_llama(LAYERS))
    PassManager(parse(pipeline, registry())).run(program.module)
    return program.module


def _funcs(module: ModuleOp) -> dict[str, FuncOp]:
    return {f.sym_name.data: f for f in module.ops if isinstance(f, FuncOp)}


@pytest.fixture(scope="module")
def module() -> ModuleOp:
    return _planned()


def test_every_func_has_a_plan_over_all_buckets(module: ModuleOp) -> None:
    funcs = _funcs(module)
    assert set(funcs) == {"prefill", "prefill_last", "decode"}
    for name, func in funcs.items():
        plan = read_plan(func)
        assert plan is not None, f"@{name} has no {ATTR}"
        expected = {"prefill": 3 * 3, "prefill_last": 3 * 3, "decode": 3}[name]  # decode has no seq symbol
        assert len(plan.buckets) == expected, f"@{name}: {[b.dims for b in plan.buckets]}"
        assert plan.buffers, f"@{name}: no arena buffers planned"


def test_live_overlapping_buffers_never_overlap_in_memory(module: ModuleOp) -> None:
    for name, func in _funcs(module).items():
        plan = read_plan(func)
        assert plan is not None
        for bucket in plan.buckets:
            sizes = plan.sizes(bucket)
            for o in bucket.offsets:
                assert o % plan.alignment == 0
            assert bucket.peak == max(o + s for o, s in zip(bucket.offsets, sizes, strict=True))
            for i, j in itertools.combinations(range(len(plan.buffers)), 2):
                a, b = plan.buffers[i], plan.buffers[j]
                if not a.overlaps(b):
                    continue
                oa, ob = bucket.offsets[i], bucket.offsets[j]
                disjoint = oa + sizes[i] <= ob or ob + sizes[j] <= oa
                assert disjoint, (f"@{name} {bucket.dims}: {a.id} [{oa}, {oa + sizes[i]}) and "
                                  f"{b.id} [{ob}, {ob + sizes[j]}) are both live at kernel "
                                  f"{max(a.first, b.first)}; repro: pytest tests/test_plan_memory.py")


def test_reuse_saves_memory_in_a_two_layer_model(module: ModuleOp) -> None:
    for name, func in _funcs(module).items():
        plan = read_plan(func)
        assert plan is not None
        for bucket in plan.buckets:
            assert bucket.peak < bucket.no_reuse, f"@{name} {bucket.dims}: no reuse"
            assert bucket.no_reuse == sum(plan.sizes(bucket))


def test_kv_caches_are_aliased_in_place_not_planned(module: ModuleOp) -> None:
    for name, func in _funcs(module).items():
        plan = read_plan(func)
        assert plan is not None
        cache_args = {a.arg_name for a in plan.kv_aliases}
        assert cache_args == {f"{kv}{n}" for kv in "kv" for n in range(LAYERS)}, f"@{name}"
        for a in plan.kv_aliases:
            assert func.body.block.args[a.arg].name_hint == a.arg_name
        planned = {b.id for b in plan.buffers} | {o.id for o in plan.outputs}
        assert not planned & {a.id for a in plan.kv_aliases}
        assert [o.result for o in plan.outputs] == [0], "only the logits are an output"
        for bucket in plan.buckets:
            env = bucket.env
            per_cache = env["batch"] * 2 * env["ctx"] * 8 * 4  # [batch, kv_heads, ctx, head_dim] f32
            assert bucket.kv == 2 * LAYERS * per_cache


def test_plan_is_deterministic_and_round_trips(module: ModuleOp) -> None:
    text = str(module)
    assert str(_planned()) == text, "two runs on the same model gave different IR"
    again, _ = parse_module(text)
    assert str(again) == text, "the planned module does not re-print to the same text"
    for name, func in _funcs(module).items():
        plan = read_plan(func)
        assert plan is not None
        assert MemoryPlan.from_attr(plan.to_attr()) == plan
        assert plan_memory(func, BUCKETS) == plan, f"@{name}: re-planning changed the plan"
        reparsed = read_plan(_funcs(again)[name])
        assert reparsed == plan


def test_missing_bucket_names_the_symbol(module: ModuleOp) -> None:
    func = _funcs(module)["prefill"]
    with pytest.raises(PlanError, match="@prefill: no bucket bounds for symbol 'seq'"):
        plan_memory(func, {"batch": [1], "ctx": [64]})
    with pytest.raises(IRError, match="bad extra-dims entry"):
        _planned("fuse,bind-families,plan-memory{extra-dims=\"n=1:x\"}")


def test_report_has_one_row_per_bucket(module: ModuleOp) -> None:
    report = module_report(module)
    lines = report.splitlines()
    assert lines[0].split()[:4] == ["func", "bucket", "buffers", "peak"]
    assert len(lines) == 2 + 9 + 9 + 3  # prefill, prefill_last, decode
    assert re.search(r"^prefill +batch=16, ctx=64, seq=512", report, re.M), report
    assert re.search(r"^prefill_last +batch=16, ctx=64, seq=512", report, re.M), report


def test_extra_dims_bind_other_symbols() -> None:
    text = """
func.func @f(%x: !ix.tensor<[n, 3], i4>) -> !ix.tensor<[n, 3], i4> {
  %a = ix.kernel "pointwise"(%x) {name = "k0"} : (!ix.tensor<[n, 3], i4>) -> !ix.tensor<[n, 3], i4> {
  ^bb0(%x1: !ix.tensor<[n, 3], i4>):
    %y = ix.neg %x1 : (!ix.tensor<[n, 3], i4>) -> !ix.tensor<[n, 3], i4>
    ix.yield %y : !ix.tensor<[n, 3], i4>
  }
  %b = ix.kernel "pointwise"(%a) {name = "k1"} : (!ix.tensor<[n, 3], i4>) -> !ix.tensor<[n, 3], i4> {
  ^bb0(%a1: !ix.tensor<[n, 3], i4>):
    %y = ix.neg %a1 : (!ix.tensor<[n, 3], i4>) -> !ix.tensor<[n, 3], i4>
    ix.yield %y : !ix.tensor<[n, 3], i4>
  }
  func.return %b : !ix.tensor<[n, 3], i4>
}
"""
    module, _ = parse_module(text)
    with pytest.raises(IRError, match="@f: no bucket bounds for symbol 'n'"):
        PassManager(parse("plan-memory", registry())).run(module)
    PassManager(parse('plan-memory{extra-dims="n=171:1" alignment=16}', registry())).run(module)
    plan = read_plan(_funcs(module)["f"])
    assert plan is not None
    # i4 packs two to a byte: 3 * n nibbles is ceil(3 * n / 2) bytes, then rounded up to 16.
    assert [(b.dims, plan.sizes(b)) for b in plan.buckets] == [((("n", 1),), (16,)), ((("n", 171),), (272,))]
