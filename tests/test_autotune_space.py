"""Schedule spaces and Hopper constraints (each invalid schedule pruned with the rule it breaks),
sampling and mutation, and task extraction from a model (the tasks the compiler looks up)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from inferx.autotune.extract import extract_tasks, fused_module
from inferx.autotune.space import Knob, schedule_key, space_for
from inferx.compiler.database import ScheduleError
from inferx.compiler.families.common.hardware import H200
from inferx.compiler.families.gemm.schedule import gemm_schedule
from inferx.compiler.families.gemm.space import GemmSpace, wave_efficiency, weight_tiles
from inferx.compiler.families.gemm.task import Task
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.schedules import select_schedule
from inferx.models.decoder import build_decoder_module
from inferx.models.registry import decoder_config

TINY = dict(vocab_size=96, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128, model_type="llama", architectures=["LlamaForCausalLM"])


def gemm(k: int, n: int, rows: int, shape: str, epilogue: str = "residual", tile_n: int | None = None) -> Task:
    return Task("gemm", "bf16", "bf16", "bf16", k, n, tile_n or n, "nk", "none", epilogue, shape, rows)


DECODE = gemm(4096, 4096, 1, "decode")
DECODE16 = gemm(4096, 4096, 16, "decode")
PREFILL = gemm(4096, 4096, 4096, "prefill")
GATED = gemm(4096, 28672, 4096, "prefill", "gated+mul+silu", 14336)
S = dict(bm=64, bn=64, bk=64, num_warps=4, num_stages=2)


@pytest.mark.parametrize("task,changes,reason", [
    (PREFILL, dict(bm=1), "GEMV mode (BM <= 8) runs a few rows per program: only for decode tasks"),
    (PREFILL, dict(bm=256, bn=256, bk=128, num_warps=8, num_stages=2), "shared memory 131072 B per stage x 2"),
    (GATED, dict(bm=128, bn=128, bk=128, num_warps=8, num_stages=3), "exceeds 232448 B"),
    (PREFILL, dict(bm=256, bn=256, bk=16, num_warps=4), "accumulator needs 512 fp32 registers per thread"),
    (DECODE, dict(bm=1, bn=32, bk=1024, num_warps=2), "GEMV product tile needs 512 fp32 registers"),
    (PREFILL, dict(bm=128, num_warps=2), "wgmma, which needs whole warpgroups"),
    (PREFILL, dict(bm=16, bn=16, num_warps=16), "fewer values than the 512 threads"),
    (DECODE, dict(bm=64), "BM=64 exceeds the task's rows (1)"),
    (gemm(64, 4096, 4096, "prefill"), dict(bk=256), "BK=256 exceeds the task's K (64)"),
    (PREFILL, dict(bn=8), "the dot path needs BM, BN, BK >= 16"),
    (PREFILL, dict(num_warps=3), "num_warps must be 1, 2, 4, 8 or 16"),
])
def test_invalid_schedules_are_pruned_with_their_reason(task: Task, changes: dict, reason: str) -> None:
    assert reason in (GemmSpace().why_invalid(task, {**S, **changes}) or "")


@pytest.mark.thorough  # every valid schedule of four spaces: outside CI's run
def test_valid_schedules_pass_and_the_template_accepts_every_one() -> None:
    space = GemmSpace()
    assert space.why_invalid(PREFILL, dict(bm=128, bn=128, bk=64, num_warps=8, num_stages=3)) is None
    assert space.why_invalid(DECODE, dict(bm=1, bn=8, bk=512, num_warps=4, num_stages=2)) is None  # the heuristic
    for task in (DECODE, DECODE16, PREFILL, GATED):
        valid = space.all_valid(task)
        # GEMV rows 1-8 and split-K widen decode spaces; TMA, persistent grids and tile orders prefill ones
        assert 500 < len(valid) < 40000, (task, len(valid))
        for s in valid:
            gemm_schedule(s)  # raises if the template would refuse it
        assert (any(s["bm"] == 1 for s in valid)) == (task.shape == "decode")


def test_new_knobs_are_emitted_only_when_off() -> None:
    knobs = {k.name for k in GemmSpace().knobs_for(PREFILL)}
    space = replace(GemmSpace(), knobs=(*GemmSpace().knobs, Knob("swizzle", (1, 8))))
    s = {**S, "split_k": 1, "swizzle": 1}
    assert space.emit(s) == S and space.why_invalid(PREFILL, s) is None
    assert "swizzle=8 is not implemented" in (space.why_invalid(PREFILL, {**s, "swizzle": 8}) or "")
    assert all(set(x) == knobs | {"swizzle"} for x in space.sample(PREFILL, random.Random(0), 20))


@pytest.mark.slow
def test_split_k_is_a_knob_of_the_dot_path() -> None:
    space = GemmSpace()
    on = {**S, "bm": 16, "bn": 32, "bk": 128, "split_k": 4}
    assert space.why_invalid(DECODE16, on) is None
    assert space.emit(on)["split_k"] == 4 and "split_k" not in space.emit({**on, "split_k": 1})
    assert schedule_key({**on, "split_k": 1}) == schedule_key(space.emit({**on, "split_k": 1}))
    assert "not in GEMV mode" in (space.why_invalid(DECODE, {**S, "bm": 1, "bn": 8, "split_k": 2}) or "")
    assert "does not divide K" in (space.why_invalid(gemm(4096, 4096, 16, "decode"), {**on, "bk": 1024, "split_k": 8})
                                   or "")
    assert any(s.get("split_k", 1) > 1 for s in space.all_valid(DECODE16))
    # a grid that fills the SMs gains nothing from split-K (and, large, its partials outgrow
    # 32-bit offsets): the 8B lm_head at 4096 rows in 16 x 16 tiles is refused
    lm_head = gemm(4096, 128256, 4096, "prefill")
    assert "already fill the 132 SMs" in (space.why_invalid(lm_head, {**on, "bm": 16, "bn": 16, "bk": 64,
                                                                      "split_k": 8}) or "")


@pytest.mark.slow
def test_unroll_is_a_knob_of_decode_gemvs_with_their_weights_in_registers() -> None:
    space = GemmSpace()
    on = dict(bm=1, bn=4, bk=1024, num_warps=8, num_stages=1, unroll=1)
    down = gemm(8192, 2048, 1, "decode")  # 4 x 8192 weights over 256 threads: 128 each
    assert space.why_invalid(down, on) is None and space.emit(on)["unroll"] == 1
    assert "unroll" not in space.emit({**on, "unroll": 0}) and gemm_schedule(space.emit(on)).unroll == 1
    assert "num_stages must be 1" in (space.why_invalid(down, {**on, "num_stages": 2}) or "")
    assert "256 per thread (> 128)" in (space.why_invalid(down, {**on, "bn": 8}) or "")
    assert "only in GEMV mode" in (space.why_invalid(DECODE16, dict(bm=16, bn=32, bk=128, num_warps=4,
                                                                    num_stages=1, unroll=1)) or "")
    assert "unroll" not in {k.name for k in space.knobs_for(PREFILL)}
    assert any(s.get("unroll") == 1 for s in space.all_valid(down))


@pytest.mark.slow
def test_defer_is_a_knob_of_one_row_decode_gemvs() -> None:
    space = GemmSpace()
    on = dict(bm=1, bn=4, bk=1024, num_warps=8, num_stages=5, defer=1)
    down = gemm(8192, 2048, 1, "decode")  # [4, 1024] fp32 sums over 256 threads: 16 each
    assert space.why_invalid(down, on) is None and space.emit(on)["defer"] == 1
    assert "defer" not in space.emit({**on, "defer": 0}) and gemm_schedule(space.emit(on)).defer == 1
    assert space.why_invalid(down, {**on, "num_warps": 2}) is None  # 64 each
    assert "128 per thread (> 64)" in (space.why_invalid(down, {**on, "num_warps": 1}) or "")
    assert "at BM 1" in (space.why_invalid(gemm(8192, 2048, 4, "decode"), {**on, "bm": 4}) or "")
    with pytest.raises(ScheduleError, match="1 only in GEMV mode at BM 1"):
        gemm_schedule({**on, "bm": 16, "bn": 16, "bk": 64})
    assert "defer" not in {k.name for k in space.knobs_for(PREFILL)} | {k.name for k in space.knobs_for(DECODE16)}
    assert any(s.get("defer") == 1 for s in space.all_valid(down))


@pytest.mark.slow
def test_tma_is_a_knob_of_dot_path_tiles_of_contiguous_rows() -> None:
    space = GemmSpace()
    on = dict(bm=128, bn=128, bk=64, num_warps=8, num_stages=4, tma=1)
    assert space.why_invalid(PREFILL, on) is None and space.emit(on)["tma"] == 1
    assert "tma" not in space.emit({**on, "tma": 0}) and gemm_schedule(space.emit(on)).tma == 1
    # decode: on the dot path, also with split-K; GEMV mode loads W rows itself
    assert "tma" in {k.name for k in space.knobs_for(DECODE16)}
    assert space.why_invalid(DECODE16, dict(bm=16, bn=64, bk=128, num_warps=4, num_stages=4, split_k=4, tma=1)) is None
    assert "dot path" in (space.why_invalid(DECODE, dict(bm=1, bn=8, bk=512, num_warps=4, num_stages=2, tma=1))
                          or "")
    assert space.why_invalid(GATED, on) is None  # gate and up rows as two boxes
    assert "16-byte aligned rows" in (space.why_invalid(gemm(4100, 4096, 4096, "prefill"), {**on, "bk": 16}) or "")
    rope = gemm(4096, 6144, 4096, "prefill", "kv_write+rope")
    assert space.why_invalid(rope, on) is None
    assert "whole heads" in (space.why_invalid(rope, {**on, "bn": 256, "num_stages": 2}) or "")  # head_dim unknown
    two_heads = replace(rope, rope_head_dim=128)  # tiles of two whole 128-wide heads are boxes too
    assert space.why_invalid(two_heads, {**on, "bm": 64, "bn": 256, "num_stages": 2}) is None
    assert "head_dim 128" in (space.why_invalid(replace(rope, rope_head_dim=128, shape="decode", rows=16),
                                                {**on, "bm": 16, "bn": 64}) or "")
    assert any(s.get("tma") == 1 for s in space.all_valid(PREFILL))


def test_persistent_grids_are_a_knob_of_prefill_without_split_k() -> None:
    from inferx.compiler.families.gemm.space import programs

    space = GemmSpace()
    on = dict(bm=128, bn=128, bk=64, num_warps=8, num_stages=3, persistent=2)
    assert space.why_invalid(PREFILL, on) is None and gemm_schedule(space.emit(on)).persistent == 2
    assert programs(PREFILL, on) == 264 and programs(PREFILL, {**on, "persistent": 0}) == 1024
    assert "persistent" not in {k.name for k in space.knobs_for(DECODE16)}
    assert "without split-K" in (space.why_invalid(gemm(4096, 4096, 128, "prefill"), {**on, "split_k": 2}) or "")
    assert "persistent must be 0, 1 or 2" in (space.why_invalid(PREFILL, {**on, "persistent": 3}) or "")



def test_grouped_tile_order_is_a_knob_of_prefill_with_several_row_tiles() -> None:
    space = GemmSpace()
    on = dict(bm=128, bn=128, bk=64, num_warps=8, num_stages=3, group_m=8)
    assert space.why_invalid(PREFILL, on) is None and gemm_schedule(space.emit(on)).group_m == 8
    assert "group_m" not in space.emit({**on, "group_m": 0}) and schedule_key({**on, "group_m": 0}) == \
        schedule_key({k: v for k, v in on.items() if k != "group_m"})  # off: the key of older records
    assert "group_m" not in {k.name for k in space.knobs_for(DECODE16)}
    assert "covers all" in (space.why_invalid(gemm(4096, 4096, 512, "prefill"), on) or "")  # 4 row tiles
    assert "power of two up to 64" in (space.why_invalid(PREFILL, {**on, "group_m": 3}) or "")
    assert "not in GEMV mode" in str(pytest.raises(ScheduleError, gemm_schedule, {**on, "bm": 1}).value)
    assert any(s.get("group_m") for s in space.sample(PREFILL, random.Random(0), 40))

def test_sampling_mutation_and_crossover_stay_valid_and_are_seeded() -> None:
    space, rng = GemmSpace(), random.Random(1)
    samples = space.sample(DECODE16, rng, 50)
    assert len(samples) == 50 and len({schedule_key(s) for s in samples}) == 50
    assert samples == GemmSpace().sample(DECODE16, random.Random(1), 50)
    for a, b in zip(samples, samples[1:], strict=False):
        for child in (space.mutate(DECODE16, a, rng), space.crossover(DECODE16, a, b, rng)):
            assert child is not None and space.why_invalid(DECODE16, child) is None
        m = space.mutate(DECODE16, a, rng)
        assert m is not None and m != a


def test_wave_efficiency_is_a_score_not_a_filter() -> None:
    big = dict(bm=128, bn=256, bk=64, num_warps=8, num_stages=4)  # 192 KB of pipeline: one program per SM
    assert wave_efficiency(gemm(4096, 132 * 256, 128, "prefill"), big) == pytest.approx(1.0)
    ragged = gemm(4096, 133 * 256, 128, "prefill")  # one program too many: a second, nearly empty wave
    assert wave_efficiency(ragged, big) == pytest.approx(133 / 264)
    assert GemmSpace().why_invalid(ragged, big) is None
    with pytest.raises(ValueError, match="no schedule space"):
        space_for("gather", "h200")


def test_extraction_gives_the_compilers_tasks_with_weights() -> None:
    module = fused_module(build_decoder_module(replace(decoder_config(TINY), dtype="bf16")))
    ex = extract_tasks(module, max_seq_len=128)
    # qkv, o, gate_up, down, lm_head, attention; decode and prefill (every prefill qkv takes its norm
    # statistics from the kernel before it: norm-stats); prefill_last's kernels are prefill's and
    # decode's (its last down GEMM sums the statistics no one reads, to stay prefill's kernel)
    assert len(ex.tasks) == 12
    assert ex.untuned == {"gather: template gather is not tuned": 4}  # 3 embeddings, 1 last-token gather
    wanted = set()
    for func in module.ops:
        for kop in func.body.block.ops:  # type: ignore[attr-defined]
            if isinstance(kop, KernelOp) and select_schedule(kop, None, 128).task is not None:
                wanted.add(select_schedule(kop, None, 128).task.key)  # type: ignore[union-attr]
    assert {t.task.key for t in ex.tasks} == wanted
    assert sum(t.share for t in ex.tasks) == pytest.approx(1.0)
    assert [t.weight for t in ex.tasks] == sorted((t.weight for t in ex.tasks), reverse=True)
    # each launch weighs its roofline plus the fixed cost of a launch, which no schedule removes
    assert all(t.floor_ms == pytest.approx(t.roofline_ms + H200.launch_s * 1e3) for t in ex.tasks)
    assert all(t.weight == pytest.approx(t.launches_per_token * t.floor_ms) for t in ex.tasks)
    gemms = [t for t in ex.tasks if isinstance(t.task, Task)]
    head = next(t for t in gemms if t.task.shape == "decode" and t.task.epilogue == "plain")
    o = next(t for t in gemms if t.task.shape == "decode" and t.task.k == t.task.n == 128)  # type: ignore[union-attr]
    assert (head.launches, o.launches, o.launches_per_token) == (1, 2, 2.0)  # prefill_last's not counted again
    down = [t for t in gemms if t.task.shape == "prefill" and t.task.k == 256]  # type: ignore[union-attr]
    assert [(t.task.epilogue, t.entry, t.launches) for t in down] == [  # type: ignore[union-attr]
        ("residual+sum_squares", "prefill", 2)]
    pre = next(t for t in gemms if t.task.shape == "prefill" and t.task.k == t.task.n == 128)  # type: ignore[union-attr]
    assert pre.tokens == pre.task.rows == 128 and pre.launches_per_token == 2 / 128
    flat = extract_tasks(module, max_seq_len=128, weighting="launches")
    assert {t.weight for t in flat.tasks} == {1.0, 2.0, 1 / 128, 2 / 128}


def test_prefill_rope_tiles_hold_whole_heads() -> None:
    """The extracted qkv task knows its head dim (32 here) and its prefill space keeps tiles of
    whole heads only (half a head, permuted, measured 1.7-3.2x slower on an H200); its decode
    space and a task read back from a record (no head dim) keep every width; the key ignores it."""
    module = fused_module(build_decoder_module(replace(decoder_config(TINY), dtype="bf16")))
    tasks = extract_tasks(module, max_seq_len=256, batches=(1, 16)).tasks
    qkv = [t.task for t in tasks if t.task.template == "gemm" and "rope" in t.task.epilogue]
    assert {t.rope_head_dim for t in qkv} == {32} and {t.shape for t in qkv} >= {"prefill", "decode"}
    space = GemmSpace()
    for task in qkv:
        s = dict(bm=64 if task.shape == "prefill" else 16, bk=64, num_warps=4, num_stages=2)
        half = space.why_invalid(task, {**s, "bn": 16})
        assert (half is not None and "whole heads" in half) == (task.shape == "prefill"), (task, half)
        assert space.why_invalid(task, {**s, "bn": 32}) is None and space.why_invalid(task, {**s, "bn": 64}) is None
        back = Task.from_json(task.to_json())
        assert back == task and back.key == task.key and back.rope_head_dim == 0
        assert space.why_invalid(back, {**s, "bn": 16}) is None
        # 256 columns of whole heads hold their partners: one weight tile a K step (two where unknown)
        assert weight_tiles(task, {**s, "bn": 256}) == 1 and weight_tiles(back, {**s, "bn": 256}) == 2
