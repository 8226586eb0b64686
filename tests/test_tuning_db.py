"""The tuning database and its use by the compiler: task keys, append-only records, the best
valid record per task, and phase 7 picking tuned schedules (or counting heuristic fallbacks)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers as T
from click.testing import CliRunner
from xdsl.dialects.builtin import ModuleOp

import inferx
from inferx.cli import main
from inferx.compiler.database import Database, Record
from inferx.compiler.families.common.keys import rows_bucket
from inferx.compiler.families.gemm import codegen as gemm
from inferx.compiler.families.gemm import heuristic as gemm_heuristic
from inferx.compiler.families.gemm.task import Task, gemm_task
from inferx.compiler.families.interface import TaskError
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.options import CompileOptions
from inferx.compiler.pipeline import registry
from inferx.compiler.schedules import select_schedule, tuning_database
from inferx.models.decoder import build_decoder_module
from inferx.models.registry import decoder_config
from inferx.passes.pipeline import PassManager, parse
from inferx.runtime.artifact import load_artifact

TINY = dict(
    vocab_size=96,
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    model_type="llama",
    architectures=["LlamaForCausalLM"],
)
LLAMA_3_8B = dict(
    TINY,
    vocab_size=128256,
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=1,
    num_attention_heads=32,
    num_key_value_heads=8,
    max_position_embeddings=8192,
    rope_theta=500000.0,
)
TOOLCHAIN = {"triton": "3.6.0", "torch": "2.11.0", "device": "NVIDIA H200"}


def fused(raw: dict[str, Any], dtype: str = "bf16") -> ModuleOp:
    """A config-only decoder (no weights) through the driver's phases 2-4."""
    module = build_decoder_module(replace(decoder_config(raw), dtype=dtype))
    PassManager(parse("canonicalize,cse,dce,merge-gemms,dce,fuse,bind-families", registry())).run(module)
    return module


def kernels(module: ModuleOp, entry: str, template: str | None = "gemm") -> list[KernelOp]:
    func = next(f for f in module.ops if f.sym_name.data == entry)  # type: ignore[attr-defined]
    return [
        k for k in func.body.block.ops if isinstance(k, KernelOp) and (template is None or k.template.data == template)
    ]


@pytest.fixture(scope="module")
def tiny() -> ModuleOp:
    return fused(TINY)


def record(task: Task, ms: float, **sched: int) -> Record:
    s = {"bm": 1, "bn": 8, "bk": 128, "num_warps": 4, "num_stages": 2, **sched}
    return Record.make(task, s, [ms, ms * 1.1, ms * 0.9], TOOLCHAIN, "2026-11-30", "test", "synthetic")


# --- task keys -------------------------------------------------------------------------------


def test_keys_equal_across_layers_and_differ_across_projections(tiny: ModuleOp) -> None:
    dec = kernels(tiny, "decode")
    assert len(dec) == 2 * 4 + 1  # qkv, o, gate_up, down per layer; lm_head
    keys = [gemm_task(k, 1).key for k in dec]
    assert keys[:4] == keys[4:8], "the same projection in two layers must share a task"
    assert len(set(keys)) == 5, keys
    qkv, o, gate_up, down, head = (gemm_task(k, 1) for k in (*dec[:4], dec[-1]))
    assert (qkv.prologue, qkv.epilogue) == ("rmsnorm", "kv_write+rope")
    assert (o.prologue, o.epilogue) == ("none", "residual")
    assert (gate_up.epilogue, gate_up.n, gate_up.tile_n) == ("gated+mul+silu", 512, 256)
    assert (down.k, down.n, down.epilogue) == (256, 128, "residual")
    assert (head.epilogue, head.n) == ("plain", 96)
    assert {t.shape for t in (qkv, o, head)} == {"decode"}


def test_keys_are_canonical_json_and_bucket_rows(tiny: ModuleOp) -> None:
    o_dec, o_pre = kernels(tiny, "decode")[1], kernels(tiny, "prefill")[1]
    t = gemm_task(o_dec, 1)
    assert json.loads(t.key) == t.to_json() and " " not in t.key
    assert t.key == json.dumps(json.loads(t.key), sort_keys=True, separators=(",", ":"))
    assert Task.from_json(json.loads(t.key)) == t
    assert "K=128 N=128" in str(t) and "decode rows<=1" in str(t)
    pre = gemm_task(o_pre, 512)
    assert pre.shape == "prefill" and pre.key != gemm_task(o_pre, 1).key != t.key
    assert gemm_task(o_dec, 3).rows == 4 and gemm_task(o_dec, 3).key != t.key
    # powers of two: prompts of up to 2048 tokens are keyed at 2048 rows, not 4096
    assert [rows_bucket(r) for r in (1, 2, 3, 5, 17, 65, 129, 300, 513, 1025, 2048, 2049)] == \
        [1, 2, 4, 8, 32, 128, 256, 512, 1024, 2048, 2048, 4096]
    assert gemm_task(kernels(fused(TINY, "f32"), "decode")[1], 1).key != t.key  # dtypes are in the key


def test_non_gemm_kernels_have_no_task(tiny: ModuleOp) -> None:
    attn = kernels(tiny, "decode", "attention")[0]
    with pytest.raises(TaskError, match="no tuning task for template 'attention'"):
        gemm_task(attn, 1)
    with pytest.raises(TaskError, match="version"):
        Task.from_json({**gemm_task(kernels(tiny, "decode")[0], 1).to_json(), "v": 0})


# --- database --------------------------------------------------------------------------------


def test_append_and_best(tiny: ModuleOp, tmp_path: Path) -> None:
    o, down = (gemm_task(k, 1) for k in kernels(tiny, "decode")[1:4:2])
    db = Database.load(tmp_path, "h200")
    assert db.records == [] and db.best(o) is None
    path = db.append(record(o, 0.02, bn=16))
    assert path == tmp_path / "h200" / "gemm.jsonl"
    db.append(record(o, 0.01, bn=32))
    db.append(record(o, 0.03, bn=4))
    db.append(record(down, 0.005, bn=4))
    for d in (db, Database.load(tmp_path, "h200")):  # in memory and read back
        best = d.best(o)
        assert best is not None
        sched, rec = best
        assert sched == gemm.GemmSchedule(1, 32, 128, 4, 2) and rec.median_ms == pytest.approx(0.01)
        assert rec.times_ms == pytest.approx((0.01, 0.011, 0.009)) and rec.toolchain == TOOLCHAIN
    assert Database.load(tmp_path, "h100").best(o) is None
    with pytest.raises(ValueError, match="no tuning database"):
        Database.load(tmp_path, "cpu")


def test_a_tie_goes_to_the_schedule_with_fewer_knobs_on(tiny: ModuleOp, tmp_path: Path) -> None:
    """Medians within 1% of the fastest are a tie, won by the schedule with fewer optional knobs
    on (here split-K); beyond it the fastest wins whatever its knobs."""
    o = gemm_task(kernels(tiny, "decode")[1], 1)
    db = Database.load(tmp_path, "h200")
    db.append(record(o, 0.01000, bm=16, bn=32, split_k=2))
    db.append(record(o, 0.01008, bm=16, bn=32))
    assert db.best(o)[0].split_k == 1  # type: ignore[index]
    db.append(record(o, 0.0098, bm=16, bn=32, split_k=4))
    assert db.best(o)[0].split_k == 4  # type: ignore[index]


def test_best_ignores_records_that_no_longer_validate(tiny: ModuleOp, tmp_path: Path) -> None:
    o = gemm_task(kernels(tiny, "decode")[1], 1)
    db = Database.load(tmp_path, "h200")
    db.append(record(o, 0.02))
    with pytest.raises(ValueError, match="powers of two"):
        db.append(record(o, 0.001, bn=12))  # append refuses what the template rejects
    path = tmp_path / "h200" / "gemm.jsonl"
    bad = [record(o, 0.001, bn=12), record(o, 0.001, bm=32, bn=8), record(o, 0.001)]
    raw = [r.to_json() for r in bad]
    raw[2]["schedule"]["split_k"] = 2  # a field the template does not know (any more)
    with path.open("a") as f:  # written by another (older or newer) tool
        for r in raw:
            f.write(json.dumps(r) + "\n")
    best = Database.load(tmp_path, "h200").best(o)
    assert best is not None and best[1].median_ms == pytest.approx(0.02)


def test_sustained_records_alone_rank_a_task_that_has_them(tiny: ModuleOp, tmp_path: Path) -> None:
    """Records timed after a sustained run (power-capped clocks) are slower than burst records of
    the same schedules; where a task has any, they alone rank it, however fast its burst records.
    A burst record's line is as before (no regime field); an unknown regime is a problem line."""
    o, down = (gemm_task(k, 1) for k in kernels(tiny, "decode")[1:4:2])
    db = Database.load(tmp_path, "h200")
    db.append(record(o, 0.010, bn=32))
    db.append(record(o, 0.011, bn=16))
    db.append(record(down, 0.010, bn=32))
    assert "regime" not in db.records[0].to_json()
    db.append(replace(record(o, 0.013, bn=32), regime="sustained"))
    db.append(replace(record(o, 0.012, bn=16), regime="sustained"))
    for d in (db, Database.load(tmp_path, "h200")):
        best = d.best(o)
        assert best is not None and best[0].bn == 16 and best[1].regime == "sustained"
        assert d.best(down)[0].bn == 32  # type: ignore[index]  # no sustained record: bursts rank it
    with pytest.raises(ValueError, match="regime"):
        Record.make(o, {"bm": 1, "bn": 16, "bk": 128, "num_warps": 4, "num_stages": 2}, [0.01], {}, "-",
                    regime="hot")
    path = tmp_path / "h200" / "gemm.jsonl"
    with path.open("a") as f:
        f.write(json.dumps({**record(o, 0.001, bn=64).to_json(), "regime": "warm"}) + "\n")
    d = Database.load(tmp_path, "h200")
    assert len(d.problems) == 1 and "regime" in d.problems[0] and d.best(o)[1].median_ms == pytest.approx(0.012)  # type: ignore[index]


def test_append_only_and_torn_lines(tiny: ModuleOp, tmp_path: Path) -> None:
    o = gemm_task(kernels(tiny, "decode")[1], 1)
    db = Database.load(tmp_path, "h200")
    db.append(record(o, 0.02))
    path = tmp_path / "h200" / "gemm.jsonl"
    with path.open("a") as f:
        f.write('{"task": {"v": 1, "templ')  # a write cut short
    before = path.read_bytes()
    db2 = Database.load(tmp_path, "h200")
    assert len(db2.records) == 1 and len(db2.problems) == 1 and f"{path}:2:" in db2.problems[0]
    db2.append(record(o, 0.01, bn=16))
    after = path.read_bytes()
    assert after.startswith(before), "append rewrote history"
    db3 = Database.load(tmp_path, "h200")
    assert len(db3.records) == 2 and len(db3.problems) == 1
    assert db3.best(o)[1].median_ms == pytest.approx(0.01)  # type: ignore[index]
    with pytest.raises(ValueError, match="positive"):
        db3.append(replace(record(o, 0.01), median_ms=float("inf")))


# --- the compiler ----------------------------------------------------------------------------


def test_cpu_targets_use_no_database(tiny: ModuleOp, tmp_path: Path) -> None:
    o = gemm_task(kernels(tiny, "decode")[1], 1)
    Database(tmp_path, "cpu").append(record(o, 0.01))  # even a folder named cpu is not read
    assert tuning_database(CompileOptions(target="cpu", tuning_logs=tmp_path)) is None
    assert tuning_database(CompileOptions(target="h200", tuning_logs=None)) is None
    choice = select_schedule(kernels(tiny, "decode")[1], None, 64)
    assert choice.origin == "heuristic" and choice.task == o and "no tuning database" in choice.reason
    attn = select_schedule(kernels(tiny, "decode", "attention")[0], None, 64)
    assert attn.task is not None and attn.task.template == "attention" and "no tuning database" in attn.reason


@pytest.fixture(scope="module")
def tuned_artifact(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Task, list[str]]:
    """A tiny Llama compiled for h200 with a database holding records of its decode o GEMM."""
    tmp = tmp_path_factory.mktemp("tuned")
    o = gemm_task(kernels(fused(TINY), "decode")[1], 1)
    db = Database.load(tmp / "logs", "h200")
    db.append(record(o, 0.02, bn=32, bk=32))
    db.append(record(o, 0.01, bn=16, bk=64, num_warps=2, num_stages=3))  # the best
    torch.manual_seed(0)
    cfg = T.LlamaConfig(**{k: v for k, v in TINY.items() if k not in ("model_type", "architectures")})
    model = T.LlamaForCausalLM(cfg).eval()
    lines: list[str] = []
    out = inferx.compile(
        model,
        target="h200",
        output=tmp / "llama.ixa",
        dtype="bf16",
        max_seq_len=64,
        max_batch=4,
        jobs=os.cpu_count() or 2,
        tuning_logs=tmp / "logs",
        progress=lines.append,
    )
    return out, o, lines


def test_compile_picks_the_tuned_schedule(tuned_artifact: tuple[Path, Task, list[str]]) -> None:
    out, o, lines = tuned_artifact
    m = load_artifact(out, target="sm_90").manifest
    tuned = [n for n, k in m["kernels"].items() if k["schedule_origin"] == "tuned"]
    assert len(tuned) == 1, {n: k["schedule_origin"] for n, k in m["kernels"].items()}
    k = m["kernels"][tuned[0]]
    assert k["constexprs"] == {"BM": 1, "BN": 16, "BK": 64} and (k["num_warps"], k["num_stages"]) == (2, 3)
    assert k["cubin"]
    decode = [s["kernel"] for s in m["entries"]["decode"]["launches"]]
    assert decode.count(tuned[0]) == 2, "both layers' o GEMMs share the tuned kernel"
    sched = m["schedules"]
    assert list(sched["tuned"]) == tuned and sched["tuned"][tuned[0]]["task"] == o.key
    assert sched["tuned"][tuned[0]]["median_ms"] == pytest.approx(0.01)
    assert sched["database"] == {"target": "h200", "records": 2}
    fb = sched["fallbacks"]
    assert set(fb) == set(m["kernels"]) - set(tuned)
    tunable = [n for n in fb if m["kernels"][n]["template"] in ("gemm", "attention")]
    assert tunable and all(
        fb[n]["reason"] == "no record" and json.loads(fb[n]["task"])["template"] == m["kernels"][n]["template"]
        for n in tunable
    )
    assert all(fb[n]["task"] is None for n in fb if n not in tunable)
    line = next(x for x in lines if "tuned 1 of" in x)
    assert f"tuned 1 of {len(m['kernels'])} kernels; fallbacks: {len(tunable)} (no record)" in line


def test_inspect_shows_tuned_kernels(tuned_artifact: tuple[Path, Task, list[str]]) -> None:
    out, o, _ = tuned_artifact
    res = CliRunner().invoke(main, ["inspect", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "tuned: 1 kernels on a schedule from the tuning database" in res.stdout
    assert f"{o}: 10.0 us measured 2026-11-30" in res.stdout
    row = next(x for x in res.stdout.splitlines() if "BN=16" in x and "BK=64" in x)
    assert row.rstrip().endswith("tuned")
    s = json.loads(CliRunner().invoke(main, ["inspect", str(out), "--json"], catch_exceptions=False).stdout)
    assert len(s["tuned"]) == 1 and len(s["fallbacks"]["kernels"]) == len(s["kernels"]) - 1
    assert set(s["fallbacks"]["reasons"].values()) == {"no record", "template gather is not tuned"}


def test_llama_3_8b_decode_picks_the_fastest_record(tmp_path: Path) -> None:
    """The five decode GEMMs of a Llama-3-8B-shaped model, each with two records in a database:
    each gets the schedule of its lowest median; prefill GEMMs, with none, fall back (counted)."""
    module = fused(LLAMA_3_8B)
    dec = kernels(module, "decode")
    assert len(dec) == 5
    db = Database.load(tmp_path, "h200")
    for kop in dec:
        task = gemm_task(kop, 1)
        db.append(record(task, 1.0, bm=16, bn=64, bk=128, num_stages=3))
        db.append(record(task, 0.5, bn=16, bk=256))
    db = Database.load(tmp_path, "h200")
    for kop in dec:
        choice = select_schedule(kop, db, 2048)
        assert choice.origin == "tuned" and choice.schedule == gemm.GemmSchedule(1, 16, 256, 4, 2)
        ks = gemm.generate(kop, "k", choice.schedule, "sm_90")  # the schedule still generates
        assert ks.constexprs == {"BM": 1, "BN": 16, "BK": 256}
    for kop in kernels(module, "prefill"):
        choice = select_schedule(kop, db, 2048)
        assert choice.origin == "heuristic" and choice.reason == "no record"


def test_long_prompt_buckets_borrow_the_nearest_bucket_record(tmp_path: Path) -> None:
    """A prefill GEMM or attention task of 1024 rows or more with no record of its own takes the
    best record of the nearest such bucket (2x, then 1/2x, ...) where the task's space accepts it,
    said as borrowed; short-prompt buckets and decode tasks never borrow."""
    from inferx.compiler.families.attention.codegen import AttentionSchedule
    from inferx.compiler.families.attention.task import attention_task
    from inferx.compiler.schedules import schedules_section, tuning_line

    module = fused(LLAMA_3_8B)
    qkv, o = kernels(module, "prefill")[:2]
    attn = kernels(module, "prefill", "attention")[0]
    db = Database.load(tmp_path, "h200")
    db.append(record(gemm_task(o, 4096), 0.2, bm=128, bn=128, bk=64, num_warps=8, num_stages=3))
    db.append(record(gemm_task(qkv, 4096), 0.3, bm=128, bn=64, bk=64, num_warps=8, num_stages=3))  # half a head
    db.append(Record.make(attention_task(attn, 4096, 4096), {"bm": 64, "bn": 64, "num_warps": 4, "num_stages": 3},
                          [0.1], TOOLCHAIN, "2026-12-02", "test", "synthetic"))
    db = Database.load(tmp_path, "h200")
    for max_seq_len in (2048, 8192):
        c = select_schedule(o, db, max_seq_len)
        assert (c.origin, c.from_rows, c.task.rows) == ("borrowed", 4096, max_seq_len), c  # type: ignore[union-attr]
        assert c.schedule == gemm.GemmSchedule(128, 128, 64, 8, 3) and "4096-row bucket" in c.reason
    assert select_schedule(o, db, 2048, rows=512).reason == "no record"  # a short prompt's bucket
    assert select_schedule(o, db, 16384 * 4).reason == "no record"  # 65536 rows: 4096 is 16x away
    assert select_schedule(qkv, db, 2048).reason == "no record"  # BN 64 splits the 8B's 128-wide heads
    a = select_schedule(attn, db, 2048)  # seq and context 2048 from seq and context 4096
    assert a.origin == "borrowed" and a.schedule == AttentionSchedule(bn=64, num_warps=4, num_stages=3, bm=64), a
    db.append(record(gemm_task(o, 2048), 0.1, bm=64, bn=128, bk=64, num_warps=4, num_stages=4))
    db = Database.load(tmp_path, "h200")
    own = select_schedule(o, db, 2048)
    assert own.origin == "tuned" and own.from_rows is None and own.schedule.bm == 64
    assert tuning_line({"a": own, "b": a, "c": select_schedule(qkv, db, 2048)}) == \
        "tuned 1 of 3 kernels; 1 on a record of another row bucket; fallbacks: 1 (no record)"
    tuned = schedules_section({"a": own, "b": a}, db, CompileOptions(target="h200"), {}).to_json()["tuned"]
    assert tuned["b"]["from_rows"] == 4096 and "from_rows" not in tuned["a"]  # inspect says "borrowed"
    db.append(replace(record(gemm_task(o, 2048), 0.12, bm=128, bn=128, bk=64, num_warps=8, num_stages=3),
                      regime="sustained"))  # slower than the burst record, and the one chosen
    hot = select_schedule(o, Database.load(tmp_path, "h200"), 2048)
    assert hot.schedule.bm == 128 and hot.record.regime == "sustained"  # type: ignore[union-attr]
    assert tuning_line({"a": hot}) == "tuned 1 of 1 kernels; 1 on records timed at sustained clocks; fallbacks: none"
    assert schedules_section({"a": hot}, db, CompileOptions(target="h200"), {}).tuned["a"].regime == "sustained"


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["8b"])
def test_shipped_records_cover_every_task_of_llama_3_8b(shape: str, tmp_path: Path) -> None:
    """Compiling the Llama-3-8B shape for the H200 at the tuner's defaults (batch 1, prompts up to
    2048 tokens) with the shipped database picks a tuned schedule for every GEMM and attention
    kernel, in every row bucket it is generated for: nothing falls back to a heuristic."""
    from inferx.autotune.extract import fused_module
    from inferx.benchmark.shapes import make_config
    from inferx.compiler.schedules import kernel_row_buckets

    make_config(shape).save_pretrained(tmp_path)
    module = fused_module(str(tmp_path), "bf16")
    db = Database.load(Path(__file__).resolve().parent.parent / "tuning_logs", "h200")
    fallbacks, tuned = [], 0
    for kop in (op for op in module.walk() if isinstance(op, KernelOp)):
        if kop.template.data not in ("gemm", "attention"):
            continue
        for rows in kernel_row_buckets(kop, [1], 2048):
            choice = select_schedule(kop, db, 2048, rows)
            if choice.origin == "tuned":
                tuned += 1
            else:
                fallbacks.append(f"{choice.task}: {choice.reason}")
    assert tuned and not fallbacks, "\n".join(sorted(set(fallbacks)))


def test_short_prompt_heuristic_fills_the_sms() -> None:
    """At a short prompt's 128 or 512 rows the 8B o GEMM on 128 x 256 tiles would have 16 or 64
    programs for 132 SMs: it takes 64 x 64 tiles; the lm_head (501 large tiles at 128 rows) and
    gate/up (112) keep the large ones, which were faster there."""
    module = fused(LLAMA_3_8B)
    by_n = {gemm_task(k, 256).n: k for k in kernels(module, "prefill")}
    for rows in gemm.PREFILL_ROW_BUCKETS:
        assert gemm_heuristic.heuristic_schedule(by_n[4096], "sm_90", rows) == gemm.GemmSchedule(64, 64, 64, 4, 4)
        assert gemm_heuristic.heuristic_schedule(by_n[128256], "sm_90", rows) == gemm.GemmSchedule(128, 256, 64, 8, 3)
        assert gemm_heuristic.heuristic_schedule(by_n[28672], "sm_90", rows) == gemm.GemmSchedule(128, 128, 64, 8, 3)
    assert gemm_heuristic.heuristic_schedule(by_n[128256], "sm_90", 4096) == gemm.GemmSchedule(128, 256, 64, 8, 3)


def test_decode_batches_take_whole_heads_and_split_k_until_the_sms_fill() -> None:
    """Decode GEMMs of 2-64 rows without a record: whole-head tiles under RoPE, 64 wide else (128
    for a vocabulary), and split-K doubled until the programs number 128 (a wave of 132 SMs), as
    the H200 records of these tasks prefer (the 8B qkv at 16 rows: BN 128, split 4, 20.4 us
    against 27.6 for BN 32 without split)."""
    module = fused(LLAMA_3_8B)
    by_n = {gemm_task(k, 256).n: k for k in kernels(module, "decode")}
    h = gemm_heuristic.heuristic_schedule
    # qkv: 48 head tiles of 128 columns, x4 = 192 programs
    assert h(by_n[6144], "sm_90", 16) == gemm.GemmSchedule(16, 128, 128, 8, 4, split_k=4)
    # o (K 4096) and down (K 14336): 64 tiles of 64 columns, x2 = 128
    assert h(by_n[4096], "sm_90", 4) == gemm.GemmSchedule(16, 64, 128, 4, 4, split_k=2)
    # gate|up: 14336 output columns fill the SMs in 224 tiles; no split
    assert h(by_n[28672], "sm_90", 64) == gemm.GemmSchedule(64, 64, 128, 8, 4)  # two accumulators: 8 warps
    assert h(by_n[4096], "sm_90", 64) == gemm.GemmSchedule(64, 64, 128, 4, 4, split_k=2)
    assert h(by_n[128256], "sm_90", 16) == gemm.GemmSchedule(16, 128, 128, 8, 4)
    # batch 1 stays a GEMV; the CPU's interpreter keeps its few wide programs
    assert h(by_n[6144], "sm_90", 1).gemv and h(by_n[6144], "cpu", 16) == gemm.GemmSchedule(16, 64, 32)
    # RoPE at 64 rows: split 2 at most (8B qkv 25.1 us against 31.1 on split 4)
    assert h(by_n[6144], "sm_90", 64) == gemm.GemmSchedule(64, 128, 128, 8, 4, split_k=2)
