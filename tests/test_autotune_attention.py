"""Tuning the attention template: schedule validation, the space's constraints, task keys and
extraction, tuned split-KV decode and prefill schedules against HF in Triton's interpreter, and
``inferx tune`` / ``inferx inspect`` over a synthetic recorded landscape."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as T
from click.testing import CliRunner

import inferx
from inferx.autotune.cost_model import LearnedModel, RooflineModel, bound_ms, roofline_ms
from inferx.autotune.extract import extract_tasks, fused_module
from inferx.autotune.runner import ReplayRunner
from inferx.autotune.search import Budget, EvolutionarySearch, RoundRobin, Tuner
from inferx.autotune.space import space_for, spaces_for
from inferx.autotune.synthetic import landscape
from inferx.cli import main
from inferx.compiler.codegen import CodegenError, generate
from inferx.compiler.database import Database, Record, ScheduleError, task_from_json
from inferx.compiler.families.attention import codegen as attention
from inferx.compiler.families.attention.schedule import attention_schedule
from inferx.compiler.families.attention.space import AttentionSpace
from inferx.compiler.families.attention.task import AttentionTask
from inferx.compiler.families.gemm.task import Task
from inferx.runtime.artifact import load_artifact


def att(shape: str = "decode", rows: int = 1, ctx: int = 2048, d: int = 128, hq: int = 32, hkv: int = 8,
        dtype: str = "bf16") -> AttentionTask:
    return AttentionTask("attention", dtype, dtype, dtype, hq, hkv, d, d, True, False, False, "plain", shape, rows,
                         ctx)


DECODE = att()
PREFILL = att("prefill", 4096)
D = {"splits": 16, "bn": 32, "num_warps": 4, "num_stages": 2}
P = {"bm": 64, "bn": 32, "num_warps": 4, "num_stages": 2}


def llama(**extra: int) -> T.LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=70, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, **extra)
    return T.LlamaForCausalLM(cfg).eval()


# --- schedules and spaces ------------------------------------------------------------------------


def test_schedule_validation_names_the_rule() -> None:
    assert attention_schedule(D) == attention.AttentionSchedule(bn=32, splits=16)
    assert attention_schedule(P).to_dict() == P
    for bad, why in (
        ({**D, "splits": 12}, "SPLITS must be a power of two"),
        ({**D, "bn": 8}, "BN must be a power of two from 16"),
        ({**P, "bm": 512}, "BM must be a power of two from 16 to 256"),
        ({**D, "num_warps": 3}, "num_warps"),
        ({**P, "num_stages": 0}, "num_stages"),
        ({**D, "bm": 64}, "attention schedule fields"),
        ({"bn": 32, "num_warps": 4, "num_stages": 2}, "attention schedule fields"),
    ):
        with pytest.raises(ScheduleError, match=why):
            attention_schedule(bad)


@pytest.mark.parametrize("task, s, reason", [
    (DECODE, {**D, "splits": 128, "bn": 32}, "exceeds the context 2048"),
    (att(d=256), {**D, "splits": 4, "bn": 256, "num_stages": 4}, "shared memory of the K/V tiles x 4 stages"),
    (att(d=256), {**D, "splits": 4, "bn": 128, "num_warps": 1, "num_stages": 1}, "fp32 registers per thread"),
    (PREFILL, {**P, "num_warps": 2}, "wgmma, which needs whole warpgroups"),
    (att("prefill", 16), {**P, "bm": 128}, "BM=128 exceeds the task's rows (16)"),
    (PREFILL, D, "a prefill attention schedule has the knobs"),
    (Task("gemm", "bf16", "bf16", "bf16", 64, 64, 64, "nk", "none", "plain", "decode", 1), D,
     "does not schedule gemm tasks"),
])
def test_constraints_prune_with_their_reason(task: AttentionTask, s: dict[str, int], reason: str) -> None:
    assert reason in (AttentionSpace().why_invalid(task, s) or "")


def test_space_emits_valid_schedules_and_the_heuristic_is_one() -> None:
    space = space_for("attention", "h200")
    assert isinstance(space, AttentionSpace) and spaces_for("h200").of(DECODE) == space
    for task, heuristic in ((DECODE, D), (PREFILL, P)):
        assert space.why_invalid(task, heuristic) is None
        valid = space.all_valid(task)
        assert heuristic in valid and all(attention_schedule(space.emit(s)) for s in valid)
        rng = random.Random(0)
        for s in space.sample(task, rng, 20):
            assert space.why_invalid(task, s) is None
            m = space.mutate(task, s, rng)
            assert m is None or space.why_invalid(task, m) is None


def test_roofline_prefers_splitting_a_long_context_at_batch_one() -> None:
    assert 0 < bound_ms(DECODE) <= roofline_ms(DECODE, D)
    one, sixteen = (roofline_ms(DECODE, {**D, "splits": n}) for n in (1, 16))
    assert sixteen < one / 4, (one, sixteen)
    big_batch = att(rows=64)
    assert roofline_ms(big_batch, {**D, "splits": 4}) < roofline_ms(big_batch, {**D, "splits": 64})
    assert 0 < bound_ms(PREFILL) <= roofline_ms(PREFILL, P)


def test_learned_model_fits_attention_records_on_their_own_features(tmp_path: Path) -> None:
    records = landscape([DECODE, att(rows=16)])
    model = LearnedModel(min_records=16)
    model.update(records)
    assert set(model.gbdts) == {"attention"} and model.gbdts.get("gemm") is None
    pred = model.predict(DECODE, [D, {**D, "splits": 2}])
    assert pred.shape == (2,) and np.all(pred > 0)
    model.save(tmp_path / "m.json")
    assert np.allclose(LearnedModel.load(tmp_path / "m.json").predict(DECODE, [D]), model.predict(DECODE, [D]))
    assert RooflineModel().predict(PREFILL, [P])[0] == roofline_ms(PREFILL, P)


# --- tasks and extraction ----------------------------------------------------------------------


def test_extraction_lists_attention_tasks_per_batch_bucket() -> None:
    ex = extract_tasks(fused_module(llama(), "fp32"), 64, batches=(1, 4))
    tasks = [t.task for t in ex.tasks if isinstance(t.task, AttentionTask)]
    assert sorted((t.shape, t.rows) for t in tasks) == [("decode", 1), ("decode", 4), ("prefill", 64)]
    assert not any("attention" in why for why in ex.untuned)
    for t in tasks:
        assert (t.q_heads, t.kv_heads, t.head_dim, t.dtype, t.causal, t.ctx) == (4, 2, 8, "f32", True, 64)
        assert task_from_json(json.loads(t.key)) == t and " " not in t.key
    decode = next(t for t in ex.tasks if t.task.shape == "decode" and t.task.template == "attention")
    assert decode.launches == 2 and "heads=4/2 d=8 causal >plain decode batch<=1 ctx<=64" in str(decode.task)
    gemm_key = next(t.task for t in ex.tasks if isinstance(t.task, Task)).to_json()
    assert gemm_key["v"] == 1 and "ctx" not in gemm_key  # GEMM keys did not move


def test_a_paged_cache_gives_attention_tasks_keyed_by_block_size() -> None:
    """Extraction as `inferx tune --kv-block-size 16` makes it: attention tasks whose key names the
    block size (a contiguous task's key has no such field, so existing records keep their keys),
    and the runner's operands for a paged kernel hold a block table of the pool's blocks, each
    sequence's scattered, none twice."""
    from inferx.autotune.runner import operand_sets

    module = fused_module(llama(), "fp32", kv_block_size=16, max_seq_len=64, max_batch=4)
    ex = extract_tasks(module, 64, batches=(1, 4))
    tasks = [t.task for t in ex.tasks if isinstance(t.task, AttentionTask)]
    assert len(tasks) == 3 and {t.block_size for t in tasks} == {16}
    assert all(task_from_json(json.loads(t.key)) == t and "paged/16" in str(t) for t in tasks)
    assert "block_size" not in replace(tasks[0], block_size=0).to_json()
    kop = next(k for f in module.ops for k in f.body.block.ops  # type: ignore[attr-defined]
               if getattr(k, "template", None) is not None and k.template.data == "attention"
               and attention.is_decode(k))
    ks = generate(kop, "k", "cpu")
    (args,) = operand_sets(kop, ks, {"batch": 4, "seq": 1, "ctx": 64}, 1 << 20, "cpu", count=1)
    table = next(a for p, a in zip(ks.params, args, strict=True) if p.kind == "in" and p.index == 5)
    assert list(table.shape) == [4, 4] and sorted(table.flatten().tolist()) == list(range(16))


def test_default_schedule_generates_todays_source_and_a_wrong_shape_is_refused() -> None:
    module = fused_module(llama(), "fp32")
    kops = [k for f in module.ops for k in f.body.block.ops  # type: ignore[attr-defined]
            if getattr(k, "template", None) is not None and k.template.data == "attention"]
    dec = next(k for k in kops if attention.is_decode(k))
    pre = next(k for k in kops if not attention.is_decode(k))
    for kop in (dec, pre):
        default = generate(kop, "k", "sm_90")
        explicit = generate(kop, "k", "sm_90", attention.heuristic_schedule(kop, "sm_90"))
        assert default == explicit and default.num_warps == 4
    assert generate(dec, "k", "sm_90").num_stages == 2  # decode: 64-key blocks in 2 stages
    assert generate(dec, "k", "sm_90").constexprs["BN"] == 64
    assert (generate(pre, "k", "sm_90").constexprs["BN"], generate(pre, "k", "sm_90").num_stages) == (64, 3)
    assert generate(dec, "k", "sm_90").constexprs["SPLITS"] == attention.DECODE_SPLITS
    # fewer context slices as the batch bucket's sequences x 2 KV heads fill 256 programs
    assert [attention.heuristic_schedule(dec, "sm_90", rows).splits for rows in (1, 4, 16, 64, 128, 256)] \
        == [16, 16, 8, 2, 1, 1]
    cpu = attention.AttentionSchedule(bn=32, splits=attention.CPU_SPLITS)
    assert attention.heuristic_schedule(dec, "cpu", 64) == cpu
    # an FP8 cache takes at least FP8_CACHE_SPLITS slices of FP8_CACHE_BN keys (3 stages at 16), and
    # keys and values decoded to f16 only under a bf16 query (this model is fp32)
    import inferx
    from inferx.compiler.quant.kv import quantize_program_kv, uniform_kv

    program = inferx.import_model(llama(), dtype="f32")
    fp8 = fused_module(quantize_program_kv(program, uniform_kv(program, 1.0)))
    dec8 = next(k for f in fp8.ops for k in f.body.block.ops  # type: ignore[attr-defined]
                if getattr(k, "template", None) is not None and k.template.data == "attention"
                and attention.is_decode(k))
    scheds = [attention.heuristic_schedule(dec8, "sm_90", rows) for rows in (1, 4, 16, 64, 128, 256)]
    assert [s.splits for s in scheds] == [16, 16, 8, 8, 8, 8]
    assert [s.num_stages for s in scheds] == [3, 3, 2, 2, 2, 2] and {(s.bn, s.kv_f16) for s in scheds} == {(128, 0)}
    program = inferx.import_model(llama(), dtype="bf16")
    bf8 = fused_module(quantize_program_kv(program, uniform_kv(program, 1.0)))
    dec_bf = next(k for f in bf8.ops for k in f.body.block.ops  # type: ignore[attr-defined]
                  if getattr(k, "template", None) is not None and k.template.data == "attention"
                  and attention.is_decode(k))
    assert attention.heuristic_schedule(dec_bf, "sm_90", 16).kv_f16 == 1
    with pytest.raises(CodegenError, match="a prefill attention schedule"):
        generate(dec, "k", "sm_90", attention.AttentionSchedule(bm=64))
    with pytest.raises(CodegenError, match="cannot schedule a attention kernel"):
        from inferx.compiler.families.gemm.codegen import GemmSchedule

        generate(dec, "k", "sm_90", GemmSchedule(16, 16, 16))


# --- tuned schedules against HF in Triton's interpreter -------------------------------------------


@pytest.mark.slow
def test_tuned_split_kv_decode_and_prefill_match_hf(tmp_path: Path) -> None:
    """Decode attention at 4 slices (batch 1) and 8 slices (the batch-2 bucket) of 16-key blocks,
    prefill at BM=16, BN=64, all from tuning records, compiled with the GPU's schedules and run
    in the interpreter against HF."""
    model = llama()
    db = Database.load(tmp_path / "logs", "sm_90")
    chosen = {("decode", 1): {"splits": 4, "bn": 16, "num_warps": 2, "num_stages": 1},
              ("decode", 2): {"splits": 8, "bn": 16, "num_warps": 4, "num_stages": 3},
              ("prefill", 64): {"bm": 16, "bn": 64, "num_warps": 4, "num_stages": 2}}
    for t in extract_tasks(fused_module(model, "fp32"), 64, batches=(1, 2)).tasks:
        if t.task.template == "attention":
            db.append(Record.make(t.task, chosen[(t.task.shape, t.task.rows)], [1.0], {}, "2026-12-01", "test"))
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=64, max_batch=2,
                         schedules="sm_90", tuning_logs=tmp_path / "logs")
    m = load_artifact(art).manifest
    att_kernels = {n: k for n, k in m["kernels"].items() if k["template"] == "attention"}
    assert sorted(k["constexprs"].get("SPLITS", 0) for k in att_kernels.values()) == [0, 4, 8]
    assert all(k["schedule_origin"] == "tuned" for k in att_kernels.values())
    assert set(att_kernels) <= set(m["schedules"]["tuned"])
    launch = next(s for s in m["entries"]["decode"]["launches"] if s["kernel"] in att_kernels)
    assert [b for b, _ in launch["by_rows"]] == [1, 2]
    session = inferx.load(art)
    repro = f"repro: pytest {__file__} -k tuned_split_kv"
    for batch in (2, 1):
        session.reset()
        ids = torch.randint(0, 70, (batch, 37))
        with torch.no_grad():
            ref = model(ids).logits.numpy()
        np.testing.assert_allclose(session.prefill(ids), ref, atol=1e-4, err_msg=repro)
        nxt = torch.randint(0, 70, (batch, 1))
        with torch.no_grad():
            want = model(torch.cat([ids, nxt], 1)).logits.numpy()[:, -1:]
        np.testing.assert_allclose(session.decode(nxt), want, atol=1e-4, err_msg=f"{repro} (batch {batch})")


# --- tuning over a recorded landscape ----------------------------------------------------------


@pytest.mark.slow
def test_guided_search_finds_a_near_best_attention_schedule() -> None:
    tasks = [att(rows=1, ctx=4096), att("prefill", 1024, ctx=1024)]
    records = landscape(tasks)
    best = {t.key: min(r.median_ms for r in records if r.task.key == t.key) for t in tasks}
    from inferx.autotune.extract import TuningTask

    tts = [TuningTask(t, None, "decode", 1, 1, bound_ms(t)) for t in tasks]
    space = spaces_for("h200")
    tuner = Tuner(tts, ReplayRunner(records), EvolutionarySearch(space, LearnedModel(), seed=0), RoundRobin(), space)
    result = tuner.run(Budget(trials=160))
    for st in result.states:
        assert st.best_ms <= 1.05 * best[st.tt.task.key], st.tt.task


@pytest.mark.slow
def test_tune_cli_tunes_attention_and_inspect_shows_it(tmp_path: Path) -> None:
    model = llama()
    hf = tmp_path / "hf"
    model.save_pretrained(hf)
    ex = extract_tasks(fused_module(hf, "fp32"), 64)
    replay = tmp_path / "replay.jsonl"
    attn = [t.task for t in ex.tasks if t.task.template == "attention"]
    replay.write_text("".join(json.dumps(r.to_json()) + "\n" for r in landscape(attn)))
    out = tmp_path / "logs"
    # Only the attention tasks are recorded, so they are the only ones tuned: a GEMM task of this
    # small model could only fail as "not recorded", after seconds of enumerating its space.
    res = CliRunner().invoke(main, ["tune", str(hf), "--target", "sm_90", "--runner", "replay", "--replay",
                                    str(replay), "--trials", "160", "--out", str(out), "--max-seq-len", "64",
                                    "--dtype", "fp32", "--only", "attention"])
    assert res.exit_code == 0, res.output
    assert f"--only: {len(attn)} of {len(ex.tasks)} tasks" in res.output
    db = Database.load(out, "sm_90")
    assert {r.task.key for r in db.records} == {t.key for t in attn}
    art = inferx.compile(model, target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=64, max_batch=1,
                         schedules="sm_90", tuning_logs=out)
    res = CliRunner().invoke(main, ["inspect", str(art)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "tuned: 2 kernels on a schedule from the tuning database" in res.stdout
    assert any(line.strip().startswith("attention") and "decode batch<=1 ctx<=64" in line
               for line in res.stdout.splitlines()), res.stdout
    rows = [x for x in res.stdout.splitlines() if " attention " in x and x.rstrip().endswith("tuned")]
    assert len(rows) == 2, res.stdout
    first = min((r for r in db.records if r.task.key == attn[0].key), key=lambda r: r.median_ms)
    db.append(replace(first, median_ms=first.median_ms * 1.2, times_ms=(first.median_ms * 1.2,), regime="sustained"))
    art = inferx.compile(model, target="cpu", output=tmp_path / "b", dtype="fp32", max_seq_len=64, max_batch=1,
                         schedules="sm_90", tuning_logs=out)
    res = CliRunner().invoke(main, ["inspect", str(art)], catch_exceptions=False)
    hot = [x for x in res.stdout.splitlines() if x.rstrip().endswith("at sustained clocks")]
    assert len(hot) == 1 and "decode" in hot[0], res.stdout
