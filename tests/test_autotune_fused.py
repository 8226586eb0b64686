"""The fused decode kernels in the tuner (the mlp template of ``fuse_mlp``, the attention_o
template of ``fuse_attention_o``): their tasks (extracted, keyed, read back), their schedule
spaces (every valid schedule one the template accepts and generates; the rules that prune), the
cost models, and `inferx tune --fuse-mlp --fuse-attention-o` through the replay runner, whose
best records the compiler then takes (run in Triton's interpreter against HF)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as T
from click.testing import CliRunner

import inferx
from inferx.autotune.cost_model import LearnedModel, RooflineModel, bound_ms, roofline_ms
from inferx.autotune.extract import extract_tasks, fused_module, heuristic_baseline
from inferx.autotune.runner import bench_env, operand_sets
from inferx.autotune.synthetic import landscape
from inferx.cli import main
from inferx.compiler.codegen import generate
from inferx.compiler.database import Database, Record, ScheduleError, task_from_json
from inferx.compiler.families.attention_o.schedule import attention_o_schedule
from inferx.compiler.families.attention_o.space import AttentionOSpace
from inferx.compiler.families.attention_o.task import AttentionOTask
from inferx.compiler.families.mlp.schedule import mlp_schedule
from inferx.compiler.families.mlp.space import MLP_MAX_PROGRAMS, MlpSpace
from inferx.compiler.families.mlp.task import MlpTask
from inferx.runtime.artifact import load_artifact

TINY = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128, model_type="llama", architectures=["LlamaForCausalLM"])


# a fused MLP schedule with every field, for the tests to vary
MLP_S = {"bm": 1, "bi": 64, "bk": 64, "bn": 64, "num_warps": 4, "num_stages": 2, "prefetch": 0, "dot": 0, "defer": 0}

def _model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "tiny"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(dict(TINY, torch_dtype="bfloat16")))
    return d


def test_mlp_tasks_are_extracted_keyed_and_read_back(tmp_path: Path) -> None:
    ex = extract_tasks(fused_module(_model_dir(tmp_path), "bf16", fuse_mlp=True), 128, batches=(1, 4))
    mlps = [t for t in ex.tasks if isinstance(t.task, MlpTask)]
    assert [t.task.rows for t in sorted(mlps, key=lambda t: t.task.rows)] == [1, 4]
    assert all(t.launches == 2 for t in mlps), "both layers' MLPs share one task per bucket"
    task = mlps[0].task
    assert (task.k, task.i, task.n, task.gate_rows, task.prologue) == (64, 96, 64, "pairs", "rmsnorm")
    assert (task.middle, task.epilogue) == ("mul+silu", "residual")
    assert str(task).startswith("mlp bf16 K=64 I=96 N=64 pairs rmsnorm>linear>mul+silu>linear>residual decode")
    assert task_from_json(json.loads(task.key)) == task
    assert not any(t.task.template == "gemm" and t.task.shape == "decode" and t.task.k == 96 for t in ex.tasks), \
        "the fused down GEMM has no task of its own"
    assert bound_ms(task) > 0
    base = heuristic_baseline(mlps[0])
    assert base is not None and MlpSpace().why_invalid(task, base) is None


def test_the_space_prunes_and_every_valid_schedule_generates(tmp_path: Path) -> None:
    ex = extract_tasks(fused_module(_model_dir(tmp_path), "bf16", fuse_mlp=True), 128, batches=(4,))
    tt = next(t for t in ex.tasks if isinstance(t.task, MlpTask))
    space, task = MlpSpace(), tt.task
    assert isinstance(task, MlpTask)
    valid = space.all_valid(task)
    assert valid and all(s["bm"] == 4 for s in valid)
    for s in random.Random(0).sample(valid, 5):
        ks = generate(tt.kernel, "m", "sm_90", mlp_schedule(space.emit(s)), grid_dependency=False)
        assert ks.constexprs["BI"] == s["bi"]
    ok = dict(valid[0])
    cases = [({"bm": 1}, "BM is the bucket's rows"), ({"bi": 512}, "wider than the problem"),
             ({"bi": 128, "bk": 64, "num_warps": 4, "dot": 0, "defer": 0}, "weight values per thread"),
             ({"bn": 12}, "power of two"), ({"dot": 1, "prefetch": 1}, "exclude each other"),
             ({"defer": 1, "dot": 0}, "generated at BM 1")]
    for change, reason in cases:
        why = space.why_invalid(task, {**ok, **change})
        assert why is not None and reason in why, (change, why)
    wide = MlpTask("mlp", "bf16", "bf16", "bf16", 4096, 1 << 20, 4096, "pairs", "rmsnorm", "mul+silu", "residual", 1)
    why = space.why_invalid(wide, {"bm": 1, "bi": 64, "bk": 64, "bn": 64, "num_warps": 16, "num_stages": 2,
                                "prefetch": 1, "dot": 0, "defer": 0})
    assert why is not None and f"more than {MLP_MAX_PROGRAMS}" in why
    # the dot form stages tiles in shared memory: 3 buffers of (16 + 2 * 256) x 512 bf16 do not fit
    why = space.why_invalid(wide, {"bm": 1, "bi": 256, "bk": 512, "bn": 64, "num_warps": 8, "num_stages": 4,
                                   "prefetch": 0, "dot": 1, "defer": 0})
    assert why is not None and "bytes of shared memory" in why
    with pytest.raises(ScheduleError, match="BM must be a power of two up to 8"):
        mlp_schedule({**MLP_S, "bm": 16})
    with pytest.raises(ScheduleError, match="prefetch must be 0 or 1"):
        mlp_schedule({**MLP_S, "prefetch": 2})


def test_attention_o_tasks_and_space(tmp_path: Path) -> None:
    ex = extract_tasks(fused_module(_model_dir(tmp_path), "bf16", fuse_attention_o=True), 128, batches=(1, 4))
    fused = [t for t in ex.tasks if isinstance(t.task, AttentionOTask)]
    assert sorted(t.task.rows for t in fused) == [1, 4] and all(t.launches == 2 for t in fused)
    tt = fused[0]
    task = tt.task
    assert isinstance(task, AttentionOTask)
    assert (task.q_heads, task.kv_heads, task.head_dim, task.n, task.ctx, task.causal) == (4, 2, 16, 64, 128, True)
    assert str(task).startswith("attention_o bf16 heads=4/2 d=16 causal >linear N=64>residual decode")
    assert task_from_json(json.loads(task.key)) == task
    assert not any(t.task.template == "attention" and t.task.shape == "decode" for t in ex.tasks)
    space = AttentionOSpace()
    base = heuristic_baseline(tt)
    assert base is not None and space.why_invalid(task, base) is None
    valid = space.all_valid(task)
    for s in random.Random(0).sample(valid, 4):
        ks = generate(tt.kernel, "a", "sm_90", attention_o_schedule(space.emit(s)), grid_dependency=False)
        assert ks.constexprs["TILES"] == s["tiles"]
    ok = dict(valid[0])
    for change, reason in (({"tiles": 16}, "more than the"), ({"bno": 512}, "wider than the problem"),
                           ({"bn": 12}, "power of two")):
        why = space.why_invalid(task, {**ok, **change})
        assert why is not None and reason in why, (change, why)
    assert bound_ms(task) > 0 and all(math.isfinite(x) for x in RooflineModel().predict(task, valid))
    # measured as attention is: at the task's context, every sequence holding all of it
    env = bench_env(task)
    assert env == {"batch": 1, "seq": 1, "ctx": 128}
    ks = generate(tt.kernel, "a", "cpu", attention_o_schedule(base), grid_dependency=False)
    (args,) = operand_sets(tt.kernel, ks, env, 1 << 20, device="cpu", count=1)
    att_op = tt.kernel.body.block.first_op
    assert args[att_op.kv_lens.index].tolist() == [128] and args[att_op.positions.index].tolist() == [[127]]


def test_cost_models_rank_mlp_schedules() -> None:
    task = MlpTask("mlp", "bf16", "bf16", "bf16", 2048, 8192, 2048, "pairs", "rmsnorm", "mul+silu", "residual", 1)
    space = MlpSpace()
    valid = space.all_valid(task)
    times = RooflineModel().predict(task, valid)
    assert np.all(np.isfinite(times)) and times.min() * 1e3 > bound_ms(task) * 1e3
    # fewer loads in flight per SM (4 warps, small tiles) is slower in the model than 16 warps of large ones
    small = {"bm": 1, "bi": 64, "bk": 32, "bn": 32, "num_warps": 4, "num_stages": 1}
    large = {"bm": 1, "bi": 64, "bk": 256, "bn": 256, "num_warps": 16, "num_stages": 2}
    assert roofline_ms(task, small) > roofline_ms(task, large)
    records = landscape([task])
    model = LearnedModel(seed=0)
    model.update(records)
    assert "mlp" in model.gbdts
    finite = [r for r in records if math.isfinite(r.median_ms)]
    pred = model.predict(task, [r.schedule for r in finite])
    rank = np.corrcoef(np.argsort(np.argsort(pred)), np.argsort(np.argsort([r.median_ms for r in finite])))[0, 1]
    assert rank > 0.8, f"Spearman {rank:.2f} on the training landscape"


@pytest.mark.slow
def test_tune_fused_then_compile_takes_the_records(tmp_path: Path) -> None:
    model_dir = _model_dir(tmp_path)
    # fp32, so that the compiled artifact runs in Triton's interpreter on the tuned records
    ex = extract_tasks(fused_module(model_dir, "fp32", fuse_mlp=True, fuse_attention_o=True), 64, batches=(1,))
    tt = next(t for t in ex.tasks if isinstance(t.task, MlpTask))
    att = next(t for t in ex.tasks if isinstance(t.task, AttentionOTask))
    task = tt.task
    replay = tmp_path / "replay.jsonl"
    # the heuristic schedules unrecorded (failed when asked), so the database's best is another record
    baselines = (heuristic_baseline(tt), heuristic_baseline(att))
    recs = [r for r in landscape([task, att.task]) if r.schedule not in baselines]
    replay.write_text("".join(json.dumps(r.to_json()) + "\n" for r in recs))
    out = tmp_path / "logs"
    args = ["tune", str(model_dir), "--runner", "replay", "--replay", str(replay), "--trials", "24", "--out", str(out),
            "--max-seq-len", "64", "--dtype", "fp32", "--fuse-mlp", "--fuse-attention-o", "--only", "decode"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    db = Database.load(out, "h200")
    assert (out / "h200" / "mlp.jsonl").is_file() and db.records
    best, best_att = db.best(task), db.best(att.task)
    assert best is not None and best[0].to_dict() != heuristic_baseline(tt), "the test needs a record to take"
    assert best_att is not None and best_att[0].to_dict() != heuristic_baseline(att)
    assert (out / "h200" / "attention_o.jsonl").is_file()
    refused = CliRunner().invoke(main, [*args[:-2], "--max-batch", "16"])
    assert refused.exit_code != 0 and "at most 8 rows" in refused.output

    torch.manual_seed(0)
    cfg = T.LlamaConfig(**{k: v for k, v in TINY.items() if k not in ("model_type", "architectures")})
    model = T.LlamaForCausalLM(cfg).eval()
    art = inferx.compile(model, target="cpu", schedules="h200", output=tmp_path / "a", dtype="fp32", max_seq_len=64,
                         max_batch=1, fuse_mlp=True, fuse_attention_o=True, tuning_logs=out)
    m = load_artifact(art).manifest
    (name,) = [n for n, k in m["kernels"].items() if k["template"] == "mlp"]
    assert m["kernels"][name]["schedule_origin"] == "tuned"
    assert m["kernels"][name]["constexprs"] == {"BM": 1, "BI": best[0].bi, "BK": best[0].bk, "BN": best[0].bn}
    (name,) = [n for n, k in m["kernels"].items() if k["template"] == "attention_o"]
    k = m["kernels"][name]
    assert k["schedule_origin"] == "tuned" and k["num_warps"] == best_att[0].num_warps
    assert (k["constexprs"]["BN"], k["constexprs"]["BNO"], k["constexprs"]["TILES"]) == (
        best_att[0].bn, best_att[0].bno, best_att[0].tiles)
    session = inferx.load(art)
    ids = torch.randint(0, 96, (1, 9), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = model(ids).logits.numpy()
    session.prefill(ids[:, :6])
    for step in range(6, 9):
        np.testing.assert_allclose(session.decode(ids[:, step : step + 1]), want[:, step : step + 1], atol=1e-4,
                                   err_msg=f"repro: pytest {__file__} -k tune_fused (step {step})")


def test_records_of_the_mlp_template_round_trip(tmp_path: Path) -> None:
    task = MlpTask("mlp", "bf16", "bf16", "bf16", 64, 96, 64, "pairs", "rmsnorm", "mul+silu", "residual", 1)
    sched = {**MLP_S, "bi": 32, "prefetch": 1}
    db = Database.load(tmp_path, "h200")
    db.append(Record.make(task, sched, [0.01], {"triton": "3.6.0"}, "test"))
    again = Database.load(tmp_path, "h200")
    best = again.best(task)
    assert best is not None and best[0].to_dict() == sched


def test_mlp_sweep_script_runs_through_on_a_faked_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/mlp_sweep.py with the GPU faked (times, the check against torch, the launch
    floor, the device name): it finds the fused kernel and the two it replaced, times the pair, the
    heuristic and the grid's schedules the space accepts that pass the check, and writes them with
    the comparison; a schedule wrong in one launch of six is reported and left out."""
    import runpy
    import sys

    from inferx.autotune import runner as runner_mod
    from inferx.benchmark import floor as floor_mod
    from inferx.benchmark import fused_check

    calls: list[dict[str, int]] = []

    def fake_time(self, kop, ks, env):  # type: ignore[no-untyped-def]
        calls.append(dict(ks.constexprs))
        return [0.02 if ks.template == "gemm" else 0.03 - 0.0001 * len(calls)]

    monkeypatch.setattr(runner_mod.LocalRunner, "time_kernel", fake_time)
    # BI 32 wrong in its third launch
    monkeypatch.setattr(fused_check, "mlp_errors",
                        lambda kop, ks, env: [1e-3, 1e-3, 0.3 if ks.constexprs["BI"] == 32 else 1e-3, 1e-3, 1e-3, 1e-3])
    monkeypatch.setattr(floor_mod, "measure_launch_floor", lambda: floor_mod.LaunchFloor(2.4e-6, 4.6e12))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "fake")
    out = tmp_path / "sweep.json"
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "mlp_sweep.py"
    monkeypatch.setattr(sys, "argv", ["mlp_sweep.py", "--shape", "tiny", "--db", "", "--bi", "16,32",
                                      "--steps", "64", "--warps", "4", "--stages", "2", "--out", str(out)])
    runpy.run_path(str(script), run_name="__main__")
    got = json.loads(out.read_text())
    kinds = [r["kernel"] for r in got["results"]]
    assert kinds[:3] == ["gate_up", "down", "mlp"] and len(kinds) == len(calls) >= 4  # a grid schedule or more
    assert all(r["schedule"]["bi"] != 32 for r in got["results"] if r["kernel"] == "mlp")
    assert "wrong results in 1 of 6 launches" in capsys.readouterr().out
    assert got["pair_ms"] == pytest.approx(0.04) and got["fused_best_ms"] == min(
        r["ms"] for r in got["results"] if r["kernel"] == "mlp")
    assert all(r["floor_ms"] > 0 for r in got["results"])


def test_failures_of_every_template_are_read_back(tmp_path: Path) -> None:
    """A resumed tune skips the failed candidates of every template, not only the GEMM's."""
    from inferx.autotune.failures import FailureLog

    mlp_t = MlpTask("mlp", "bf16", "bf16", "bf16", 64, 96, 64, "pairs", "rmsnorm", "mul+silu", "residual", 1)
    att_t = AttentionOTask("attention_o", "bf16", "bf16", "bf16", "bf16", 4, 2, 16, 16, 64, True, False, False,
                           "residual", 1, 128)
    log = FailureLog(tmp_path, "h200")
    mlp_s = {**MLP_S, "bi": 16, "prefetch": 1}
    for task, sched in ((mlp_t, mlp_s),
                        (att_t, {"bn": 16, "bno": 16, "tiles": 1, "num_warps": 4, "num_stages": 2})):
        log.append(task, sched, "out of resources", "local", {}, "2026-12-01")
    again = FailureLog(tmp_path, "h200").load()
    assert again.failed(mlp_t, "local") and again.failed(att_t, "local") and not again.failed(mlp_t, "replay")
    assert not FailureLog(tmp_path, "h200").load("gemm").failed(mlp_t, "local")
