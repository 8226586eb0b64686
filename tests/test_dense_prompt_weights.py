"""A prompt's int4 GEMMs on weights dequantized once (dense-prompt-weights, the dequant family):
the CPU artifact against the reference, and on a GPU target the row buckets at which the
dequantize kernel runs and those at which its GEMM reads what it wrote, which must agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_gpu import _model  # the tiny configs (that module's tests need a GPU; this one does not)

import inferx
from inferx.compiler import pipeline
from inferx.compiler.families import family
from inferx.compiler.families.dequant.codegen import DequantSchedule, dequantize_of, generate
from inferx.compiler.families.interface import ScheduleError
from inferx.compiler.families.qgemm.codegen import qlinear_of
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.options import CompileOptions
from inferx.compiler.quant.store import quantize_program
from inferx.compiler.schedules import kernel_row_buckets
from inferx.runtime.artifact import load_artifact


def _fused(options: CompileOptions, family_name: str = "llama"):  # type: ignore[no-untyped-def]
    program = quantize_program(inferx.import_model(_model(family_name, 1024), dtype="bf16"), "int4-g32", head=True)
    for _, spec in pipeline.phases(options):
        pipeline.run(spec, program)
    return {f.sym_name.data: [o for o in f.body.block.ops if isinstance(o, KernelOp)]  # type: ignore[attr-defined]
            for f in program.module.ops}


def test_gpu_schedules_on_dense_weights_match_the_reference(tmp_path: Path) -> None:
    """The GPU's schedules in Triton's interpreter (``schedules="sm_90"`` on a cpu artifact, f16:
    the interpreter computes bf16 wrongly; Qwen2, whose q|k|v have biases): every prompt GEMM
    after a dequantize launch whose kernels switch at 128 rows, decode's GEMMs on the codes; a
    136-token prompt (dense weights through TMA descriptors) and a 20-token one (the codes, an
    empty dequantize launch) against the reference on the same quantized weights, within f16's
    rounding."""
    program = quantize_program(inferx.import_model(_model("qwen2", 256), dtype="f16"), "int4-g32")
    path = inferx.compile(program, target="cpu", schedules="sm_90", output=tmp_path / "a", max_seq_len=256,
                          max_batch=1)
    manifest = load_artifact(path).manifest
    plan = manifest["entries"]
    for entry in ("prefill", "prefill_last"):
        steps = plan[entry]["launches"]
        names = [step["kernel"].split("_")[0] for step in steps]
        pairs = [(a, b) for a, b in zip(steps, steps[1:], strict=False) if b["kernel"].startswith("qgemm")]
        assert pairs and all(a["kernel"].startswith("dequant") for a, _ in pairs), (entry, names)
        for dq, _ in pairs:
            assert [bound for bound, _ in dq["by_rows"]][0] == 128
            assert manifest["kernels"][dq["by_rows"][0][1]]["grid"] == ["0", "1"]  # below 129 rows: empty
    assert not any(step["kernel"].startswith("dequant") for step in plan["decode"]["launches"])
    repro = "repro: pytest tests/test_dense_prompt_weights.py -k reference"
    ref = program.reference_session(max_batch=1, max_context=256)
    cpu = inferx.load(path, device="cpu")
    for n in (136, 20):
        ids = np.random.default_rng(n).integers(0, 160, (1, n))
        cpu.reset()
        ref.reset()
        got, want = np.asarray(cpu.prefill(ids)), np.asarray(ref.prefill(ids))
        err = float(np.abs(got.astype(np.float32) - want.astype(np.float32)).max())
        tol = 5e-3 * max(1.0, float(np.abs(want).max()))
        assert err <= tol, f"{n} tokens: max abs error {err:.3g} > {tol:.3g}\n{repro}"


def _runs(buckets: list[int | None], schedules: list[object], rows: int, attr: str) -> bool:
    """Whether the variant the launch plan picks at ``rows`` (the first bucket holding them, the
    last past them all) has ``attr`` set, as ``LaunchStep.kernel_for`` picks."""
    for bound, s in zip(buckets, schedules, strict=True):
        if bound is None or rows <= bound:
            return bool(getattr(s, attr))
    return bool(getattr(schedules[-1], attr))


def test_gpu_buckets_agree_on_where_the_dense_weight_is_written_and_read() -> None:
    """sm_90, max_seq_len 1024: at every prompt length up to it, a dequantize kernel runs exactly
    where the GEMM after it reads the dense weight (from 129 rows), both picked by rows as the
    launch plan picks; prefill_last's LM head and decode keep the codes."""
    opts = CompileOptions(target="h200", max_seq_len=1024, max_batch=4)
    funcs = _fused(opts)
    for fname, kernels in funcs.items():
        readers = [(k, n) for k, n in zip(kernels, kernels[1:], strict=False) if k.template.data == "dequant"]
        gemms = [k for k in kernels if k.template.data == "qgemm" and "seq" in str(qlinear_of(k).input.type)]
        if fname == "decode":
            assert not readers and all(qlinear_of(k).dense is None for k in kernels if k.template.data == "qgemm")
            continue
        assert len(readers) == len(gemms) > 0, fname
        for dq, gemm in readers:
            assert gemm.template.data == "qgemm" and qlinear_of(gemm).dense is not None
            assert gemm.inputs[-1] == dq.results[0]
            d_buckets = kernel_row_buckets(dq, [1, 2, 4], 1024)
            g_buckets = kernel_row_buckets(gemm, [1, 2, 4], 1024)
            d_sched = [family("dequant").heuristic(dq, "h200", b) for b in d_buckets]
            g_sched = [family("qgemm").heuristic(gemm, "h200", b) for b in g_buckets]
            for rows in range(1, 4 * 1024 + 1):
                runs = not _runs(d_buckets, d_sched, rows, "skip")
                assert runs == _runs(g_buckets, g_sched, rows, "dense") == (rows >= 129), (fname, rows)


def test_gpu_short_contexts_keep_the_codes() -> None:
    """Where no prompt reaches 129 rows (max_seq_len 128) the pass is not run: no dequantize."""
    funcs = _fused(CompileOptions(target="h200", max_seq_len=128, max_batch=1))
    assert not any(k.template.data == "dequant" for kernels in funcs.values() for k in kernels)


def test_a_record_cannot_ask_for_dense_weights() -> None:
    """Only the heuristic, which knows the row bucket, sets dense: a record naming it is refused."""
    with pytest.raises(ScheduleError, match="fields"):
        family("qgemm").parse_schedule({"bm": 128, "bn": 128, "bk": 32, "num_warps": 8, "num_stages": 3, "dense": 1})


def test_the_skipped_bucket_is_an_empty_launch() -> None:
    """Below min_rows the dequantize kernel has no programs (``KernelSource.empty``: a session
    leaves it out); from it, one program per BN x BK block of the weight."""
    dq = next(k for k in _fused(CompileOptions(target="h200", max_seq_len=1024, max_batch=1))["prefill"]
              if k.template.data == "dequant")
    op = dequantize_of(dq)
    assert isinstance(op, nn.DequantizeOp)
    empty = generate(dq, "k", DequantSchedule(skip=True))
    assert empty.grid == ("0", "1") and empty.empty and "tl.store" not in empty.source
    full = generate(dq, "k", DequantSchedule(64, 32))
    assert not full.empty
    n, k = op.codes.type.shape  # type: ignore[attr-defined]
    assert full.grid == (f"cdiv({n}, 64)", str(k // 32)) and "tl.store(out0" in full.source


def test_kernels_of_one_source_that_write_in_place_differently_get_two_names() -> None:
    """The empty launch of a dequantize kernel has one source whether or not it writes in place:
    the first kernel's output is a buffer of its own, the others' the one before (an alias), so
    the two must not share a kernel, and so a launch plan."""
    from inferx.compiler.driver import _kernel_name
    from inferx.runtime.kernel_source import KernelSource, Param

    params = (Param("in0", "in", 0, dtype="i4"), Param("out0", "out", 0, dtype="bf16"))
    own = KernelSource("kernel", "dequant", "src", params, ("1",))
    aliased = KernelSource("kernel", "dequant", "src", params, ("1",), aliases={0: 0})
    first = _kernel_name("dequant", own, {})
    assert _kernel_name("dequant", aliased, {first: own}) != first
    assert _kernel_name("dequant", own, {first: own}) == first
