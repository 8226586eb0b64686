"""``--target h200`` builds sm_90 cubins on a machine with no GPU, and the prefill GEMMs use
wgmma (HGMMA in the SASS). Skips only where no cuobjdump can be found."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import transformers as T

import inferx
from inferx.runtime.artifact import load_artifact


def _cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import importlib.util

        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    bundled = Path(spec.origin).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    return str(bundled) if bundled.exists() else None


@pytest.fixture(scope="module")
def sm90_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=96, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = T.LlamaForCausalLM(cfg).eval()
    out = tmp_path_factory.mktemp("sm90") / "llama.ixa"
    return inferx.compile(model, target="h200", output=out, dtype="bf16", max_seq_len=64, max_batch=4,
                          jobs=os.cpu_count() or 2)


def test_every_kernel_has_a_cubin(sm90_artifact: Path) -> None:
    art = load_artifact(sm90_artifact, target="sm_90")
    kernels = art.manifest["kernels"]
    assert kernels
    for name, meta in kernels.items():
        assert art.file_bytes(meta["cubin"])[:4] == b"\x7fELF", f"{name}: cubin is not an ELF file"


def test_prefill_gemms_use_wgmma(sm90_artifact: Path, tmp_path: Path) -> None:
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump on PATH or bundled with triton")
    art = load_artifact(sm90_artifact)
    gemms = {step["kernel"] for step in art.manifest["entries"]["prefill"]["launches"]
             if art.manifest["kernels"][step["kernel"]]["template"] == "gemm"}
    assert len(gemms) >= 4
    for name in sorted(gemms):
        cubin = tmp_path / f"{name}.cubin"
        cubin.write_bytes(art.file_bytes(art.manifest["kernels"][name]["cubin"]))
        sass = subprocess.run([tool, "--dump-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
        assert "HGMMA" in sass, f"{name}: no HGMMA in its SASS (repro: pytest {__file__} -k wgmma)"


@pytest.mark.slow
def test_tma_kernels_build_and_get_their_global_scratch(tmp_path: Path) -> None:
    """Prefill GEMMs on persistent and TMA schedules (from tuning records) build for sm_90, with
    tensor-memory copies and wgmma where TMA applies; the manifest says how much global scratch
    each program needs (its two tensor descriptors), and a CUDA session passes each such launch
    an aligned buffer of that much per program of the prompt bucket's grid (NULL to the others)."""
    from inferx.autotune.extract import extract_tasks, fused_module
    from inferx.compiler.database import Database, Record
    from inferx.runtime.cuda_session import CudaSession
    from tests.fake_cuda import FakeDriver

    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=96, hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = T.LlamaForCausalLM(cfg).eval()
    # BN = head_dim; TMA loads everywhere (the gated gate/up GEMM as one box of 2*BN rows), persistent grids
    # but for the lm_head
    schedule = {"bm": 64, "bn": 32, "bk": 64, "num_warps": 4, "num_stages": 3, "tma": 1}
    db = Database.load(tmp_path / "logs", "h200")
    tasks = [t.task for t in extract_tasks(fused_module(model, "bf16"), 64).tasks
             if t.task.template == "gemm" and t.task.shape == "prefill"]
    for task in tasks:
        persistent = {"persistent": 1} if task.n != 96 else {}
        db.append(Record.make(task, {**schedule, **persistent}, [1.0], {}, "2026-12-01", "test"))
    art = inferx.compile(model, target="h200", output=tmp_path / "a", dtype="bf16", max_seq_len=64, max_batch=1,
                         tuning_logs=tmp_path / "logs", jobs=os.cpu_count() or 2)
    a = load_artifact(art)
    kernels = a.manifest["kernels"]
    tma = {n for n, k in kernels.items() if "make_tensor_descriptor" in a.file_bytes(k["file"]).decode()}
    assert len(tma) == len(tasks) == 5, tasks  # qkv, o, gate/up, down, lm_head
    assert all(kernels[n]["global_scratch"] >= 256 and kernels[n]["global_scratch_align"] >= 64 for n in tma)
    assert all(kernels[n]["global_scratch"] == 0 for n in set(kernels) - tma)
    persistent = {n for n, k in kernels.items() if k["grid"][0].startswith("min(")}
    assert len(persistent) == 4 and persistent < tma and all(len(kernels[n]["grid"]) == 1 for n in persistent)
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(a.file_bytes(kernels[sorted(tma)[0]]["cubin"]))
    tool = _cuobjdump()
    if tool is not None:
        sass = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
        assert "UTMALDG" in sass and "HGMMA" in sass
    session = CudaSession(a, driver=FakeDriver())  # type: ignore[arg-type]
    # launches take the compiled warp count (here the schedules', which no pass changed)
    assert all(kernels[n]["launch_warps"] == kernels[n]["num_warps"] == k.num_warps
               for n, (_, k) in session.kernels.items())
    bound = session._bind("prefill", 1, 40)
    for ln in bound.launches:
        scratch = ln.storage[len(ln.source.params)].value
        if ln.source.name in tma:
            align = kernels[ln.source.name]["global_scratch_align"]
            assert scratch and scratch % align == 0, ln.source.name
        else:
            assert not scratch, ln.source.name


@pytest.mark.slow
def test_pdl_artifacts_launch_with_pdl(tmp_path: Path) -> None:
    """By default (``pdl``) the manifest says to launch with PDL and a CUDA session does so unless
    told otherwise; compiled without it, the kernels are the same (each waits for the one before
    it either way) and sessions launch plainly; for the CPU, no PDL."""
    from inferx.runtime.cuda_session import CudaSession
    from tests.fake_cuda import FakeDriver

    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=96, hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = T.LlamaForCausalLM(cfg).eval()
    art = inferx.compile(model, target="h200", output=tmp_path / "a", dtype="bf16", max_seq_len=64, max_batch=1,
                         tuning_logs=None, jobs=os.cpu_count() or 2)
    a = load_artifact(art)
    assert a.manifest["launch"] == {"pdl": True, "overlap": False}
    kernels = a.manifest["kernels"]
    assert all(k["grid_dependency"] and "gdc_wait()" in a.file_bytes(k["file"]).decode() for k in kernels.values())
    unlaunched = load_artifact(inferx.compile(model, target="h200", output=tmp_path / "c", dtype="bf16", max_seq_len=64,
                                              max_batch=1, pdl=False, tuning_logs=None, jobs=os.cpu_count() or 2))
    assert unlaunched.manifest["launch"] == {"pdl": False, "overlap": False}
    assert set(unlaunched.manifest["kernels"]) == set(kernels)
    assert not CudaSession(unlaunched, driver=FakeDriver()).pdl  # type: ignore[arg-type]
    assert CudaSession(a, driver=FakeDriver()).pdl  # type: ignore[arg-type]
    assert not CudaSession(a, driver=FakeDriver(), pdl=False).pdl  # type: ignore[arg-type]
    plain = load_artifact(inferx.compile(model, target="cpu", output=tmp_path / "b", dtype="fp32", max_seq_len=64,
                                         max_batch=1, pdl=True))
    assert plain.manifest["launch"] == {"pdl": False, "overlap": False}


@pytest.mark.slow
def test_int4_prefill_kernels_build_with_wgmma_and_bind_their_row_sums(tmp_path: Path) -> None:
    """An int4 model built for sm_90: every prompt bucket's qgemm kernels build; the tiles of
    prompts up to 128 rows (W dequantized in registers, 128 + q by byte permutes) run on wgmma, as
    do the longer prompts' tiles on dense weights (TMA loads, no unpacking); o and down sum their
    rows' squares for the next norm (norm-stats) in scratch a CUDA session binds; the dense
    weights' one buffer is shared by the prompt buckets."""
    from inferx.runtime.cuda_session import CudaSession
    from tests.fake_cuda import FakeDriver

    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=96, hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    model = T.LlamaForCausalLM(cfg).eval()
    art = inferx.compile(model, target="h200", output=tmp_path / "a", dtype="bf16", max_seq_len=256, max_batch=1,
                         quant="int4-g32", jobs=os.cpu_count() or 2)
    a = load_artifact(art)
    kernels = a.manifest["kernels"]
    launches = a.manifest["entries"]["prefill"]["launches"]
    by_rows = [step.get("by_rows") or [[None, step["kernel"]]] for step in launches
               if kernels[step["kernel"]]["template"] == "qgemm"]
    assert len(by_rows) == 4 and all([b for b, _ in v] == [16, 128, 256] for v in by_rows), by_rows
    tiles, longest = {v[1][1] for v in by_rows}, {v[-1][1] for v in by_rows}
    assert sorted(kernels[n]["constexprs"]["BM"] for n in longest) == [128] * 4
    assert sum(bool(kernels[n]["scratch"]) for n in longest) == 2  # o and down: row sums of squares
    sources = {n: a.file_bytes(kernels[n]["file"]).decode() for n in tiles | longest}
    assert all(("0x43000000" in sources[n]) == (n in tiles) for n in sources)
    assert sum("w_desc" in sources[n] for n in longest) == 3  # TMA but for q|k|v's RoPE partners
    tool = _cuobjdump()
    for name in sorted(sources):
        if tool is not None:
            cubin = tmp_path / f"{name}.cubin"
            cubin.write_bytes(a.file_bytes(kernels[name]["cubin"]))
            sass = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
            assert "HGMMA" in sass and ("PRMT" in sass or name in longest), name
    session = CudaSession(a, driver=FakeDriver())  # type: ignore[arg-type]
    made: list[str] = []
    alloc = session.drv.alloc
    session.drv.alloc = lambda n, what: (made.append(what), alloc(n, what))[1]  # type: ignore[method-assign]
    bound = session._bind("prefill", 1, 200)
    session._bind("prefill", 1, 1)  # another bucket: the same dense weight buffer, no other
    assert len([w for w in made if w.endswith("_w#0")]) == 1, made
    summing = [ln for ln in bound.launches if ln.source.scratch]  # o and down of the 200-row prompt
    assert len(summing) == 2
    for ln in summing:  # the partial sums and the row-block counters, bound to buffers
        ptrs = [ln.storage[i].value for i, p in enumerate(ln.source.params) if p.kind == "scratch"]
        assert len(ptrs) == 2 and all(ptrs), ln.source.name
