"""`inferx bench` without a GPU: shapes, roofline counts, the plain Llama peer against HF, the
report, the run's flow with InferX's session faked, and the CLI's error without a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner

from inferx.benchmark import report
from inferx.benchmark.floor import LaunchFloor, fit
from inferx.benchmark.llama import PlainLlama
from inferx.benchmark.main import BenchError, check_device, int_list, options
from inferx.benchmark.roofline import (
    Ceilings,
    Dims,
    decode_bytes,
    fp8_weight_bytes,
    int4_weight_bytes,
    prefill_bytes,
    prefill_flops,
)
from inferx.benchmark.run import BenchOptions, Hooks, compile_settings, run_bench
from inferx.benchmark.shapes import make_config, make_model
from inferx.cli import main

# --- shapes -----------------------------------------------------------------------------------


def test_shapes_carry_the_hf_config_values() -> None:
    one, eight = make_config("1b"), make_config("8b")
    got = [(c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
            c.head_dim, c.vocab_size, c.tie_word_embeddings) for c in (one, eight)]
    assert got == [(2048, 8192, 16, 32, 8, 64, 128256, True), (4096, 14336, 32, 32, 8, 128, 128256, False)]
    assert one.rope_parameters["rope_type"] == "llama3" and one.rope_parameters["factor"] == 32.0
    assert one.rope_parameters["rope_theta"] == eight.rope_parameters["rope_theta"] == 500000.0
    assert eight.rope_parameters["rope_type"] == "default"


def test_unknown_shape_names_the_shapes() -> None:
    with pytest.raises(ValueError, match="the shapes are 1b, 8b, tiny"):
        make_config("70b")


def test_plain_gemm_module_holds_the_projections_as_bare_gemms() -> None:
    """Each entry of ``plain_gemm_module`` fuses to one GEMM kernel per projection, with nothing
    folded in (no norm, RoPE, residual or activation) and no two merged, at the projections'
    (N, K); gemm_vs_cublas.py names each by its K and N."""
    from inferx.autotune.extract import extract_tasks, fused_module
    from inferx.benchmark.shapes import plain_gemm_module, projections
    from inferx.compiler.ir.ops_kernel import KernelOp

    assert projections("8b") == {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096),
                                 "down": (4096, 14336)}
    assert projections("1b")["qkv"] == (3072, 2048)
    dims = projections("tiny")
    module = fused_module(plain_gemm_module("tiny"))
    kernels = [op for op in module.walk() if isinstance(op, KernelOp)]
    assert len(kernels) == 8 and all(k.template.data == "gemm" for k in kernels)
    assert all([o.name for o in k.body.block.ops] == ["ix.linear", "ix.yield"] for k in kernels)
    tasks = [t.task for t in extract_tasks(module, 256, batches=(1,)).tasks]
    assert {(t.shape, t.prologue, t.epilogue) for t in tasks} == {("decode", "none", "plain"),
                                                                   ("prefill", "none", "plain")}
    assert {(t.n, t.k) for t in tasks} == set(dims.values())
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    try:
        from gemm_vs_cublas import projection
    finally:
        sys.path.pop(0)
    c = make_config("tiny")
    names = {projection(t, c.hidden_size, c.intermediate_size, 0, dims["qkv"][0]) for t in tasks}  # as --plain
    assert names == set(dims)
    with pytest.raises(ValueError, match="the shapes are"):
        projections("70b")


# --- roofline ---------------------------------------------------------------------------------


def test_decode_bytes_by_hand_8b() -> None:
    h, f, L, V, kv = 4096, 14336, 32, 128256, 8 * 128
    layer = h * h + 2 * h * kv + h * h + 3 * h * f + 2 * h  # q, k+v, o, gate/up/down, two norms
    weights = 2 * (L * layer + h + V * h)  # layers, final norm, lm_head; the untied embedding is not read
    kv_read = 2 * L * 1 * 512 * kv * 2
    parts = decode_bytes(Dims.of(make_config("8b")), batch=1, context=512)
    assert parts["weights"] == weights and parts["kv_read"] == kv_read
    assert parts["total"] == weights + kv_read + 2 * L * kv * 2 + 2 * h + 2 * V
    assert round(parts["total"] / 1e9, 2) == 15.08  # docs/performance.md: 15.08 GB at this config


def test_int4_weight_bytes_by_hand_8b() -> None:
    """int4-g128 with bf16 scales and minimums: 0.5 + 4/128 bytes per layer weight; the norms stay
    bf16; the LM head int4 with ``head``, else bf16."""
    h, f, L, V, kv = 4096, 14336, 32, 128256, 8 * 128
    mats = L * (2 * h * h + 2 * h * kv + 3 * h * f)
    norms = 2 * (2 * L * h + h)
    d = Dims.of(make_config("8b"))
    assert int4_weight_bytes(d, 128, False, head=True) == round((mats + V * h) * (0.5 + 4 / 128) + norms)
    assert int4_weight_bytes(d, 128, False, head=False) == round(mats * (0.5 + 4 / 128) + norms + 2 * V * h)
    assert int4_weight_bytes(d, 32, True, head=True) == round((mats + V * h) * (0.5 + 2 / 32) + norms)
    with_head = decode_bytes(d, 1, 512, weights=int4_weight_bytes(d, 128, False, head=True))["total"]
    assert 4.0e9 < with_head < 4.4e9  # the issue's ~4.2 GB for the 8B step with an int4 LM head


def test_decode_bytes_count_a_tied_embedding_once() -> None:
    d = Dims.of(make_config("1b"))
    params = sum(p.numel() for p in make_model("tiny", "cpu", torch.float32).parameters())  # tied: once
    tiny = Dims.of(make_config("tiny"))
    assert decode_bytes(tiny, 1, 1)["weights"] == 2 * params
    assert round(decode_bytes(d, 1, 512)["total"] / 1e9, 2) == 2.49  # docs/performance.md


def test_prefill_counts_by_hand() -> None:
    d = Dims.of(make_config("tiny"))  # hidden 64, inter 128, 2 layers, 4 heads, 2 KV heads, dim 16, vocab 256
    matmul = 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128) + 256 * 64
    attention = 2 * 2 * 2 * 4 * 16 * (10 * 11 // 2)
    assert prefill_flops(d, 1, 10) == 2 * matmul * 10 + attention
    assert prefill_bytes(d, 1, 10)["logits"] == 10 * 256 * 2
    c = Ceilings(copy_bytes_per_s=1e9, matmul_flops_per_s=1e9)
    assert c.prefill_ms(d, 1, 10) == pytest.approx(max(prefill_flops(d, 1, 10), prefill_bytes(d, 1, 10)["total"])
                                                   / 1e9 * 1e3)
    # the last token's logits alone: the LM head over one row per sequence
    assert prefill_flops(d, 2, 10, last=True) == 2 * (prefill_flops(d, 1, 10) - 2 * 256 * 64 * 9)
    assert prefill_bytes(d, 2, 10, last=True)["logits"] == 2 * 256 * 2
    assert c.prefill_ms(d, 1, 10, last=True) < c.prefill_ms(d, 1, 10)


# --- the plain Llama peer against HF ------------------------------------------------------------


@pytest.mark.parametrize("attend", ["masked", "causal"])
def test_plain_llama_matches_hf_fp32(attend: str) -> None:
    torch.manual_seed(0)
    model = make_model("tiny", "cpu", torch.float32, seed=1)
    for p in model.parameters():  # larger weights than the benchmark's, so errors would show
        p.data.mul_(10.0) if p.dim() > 1 else p.data.uniform_(0.5, 1.5)
    plain = PlainLlama(model)
    ids = torch.randint(0, 256, (2, 12))
    with torch.no_grad():
        ref = model(ids).logits
        plain.setup_cache(2, 16)
        steps = [plain(ids[:, :9], torch.arange(9), attend)]
        steps += [plain(ids[:, i:i + 1], torch.tensor([i])) for i in range(9, 11)]
        plain.k_cache = [t[:, :, :12] for t in plain.k_cache]  # views: the next step is the cache's last
        plain.v_cache = [t[:, :, :12] for t in plain.v_cache]
        steps.append(plain(ids[:, 11:12], torch.tensor([11]), "all"))
    got = torch.cat(steps, dim=1)
    err = float((got - ref).norm() / ref.norm())
    assert err < 1e-4, (f"PlainLlama vs HF: rel err {err:.2e}; repro: HF_HUB_OFFLINE=1 python -m pytest -q "
                        f"tests/test_benchmark.py -k 'plain_llama_matches_hf and {attend}'")
    with torch.no_grad():
        plain.setup_cache(2, 16)
        last = plain(ids[:, :9], torch.arange(9), attend, last=True)
    assert last.shape == (2, 1, 256)
    torch.testing.assert_close(last, steps[0][:, -1:], rtol=1e-5, atol=1e-5)


# --- report -----------------------------------------------------------------------------------


def _rows() -> list[dict[str, Any]]:
    ms = [report.measurement("decode", 1, 1, 512, "inferx", [2.0, 1.0, 3.0]),
          report.measurement("decode", 1, 1, 512, "compile:reduce-overhead", [4.0]),
          report.measurement("decode", 1, 1, 512, "compile:max-autotune", [3.0]),
          report.measurement("decode", 1, 1, 512, "eager", [20.0]),
          report.measurement("decode", 1, 1, 512, "hf", error="OutOfMemoryError: boom"),
          report.measurement("prefill", 1, 512, 512, "eager", [50.0])]
    return report.config_rows(ms, Dims.of(make_config("8b")), Ceilings(4e12, 8e14))


def test_config_rows_derive_roofline_and_ratios() -> None:
    dec, pre = _rows()
    assert dec["inferx_ms"] == 2.0 and dec["compile_ms"] == 3.0 and dec["compile_mode"] == "max-autotune"
    assert dec["speedup_vs_compile"] == 1.5 and dec["tokens_per_s"] == 500.0
    assert dec["roofline_ms"] == pytest.approx(decode_bytes(Dims.of(make_config("8b")), 1, 512)["total"] / 4e9)
    assert dec["fraction_of_roofline"] == pytest.approx(dec["roofline_ms"] / 2.0)
    assert dec["hf_ms"] is None and dec["errors"] == {"hf": "OutOfMemoryError: boom"}
    assert pre["inferx_ms"] is None and pre["fraction_of_roofline"] is None and pre["eager_ms"] == 50.0


def test_int4_rows_and_table() -> None:
    """An int4 artifact's measurement beside bf16's: its ms, the speedup over bf16, and its own
    roofline (fewer bytes, so a lower floor); the table grows four columns."""
    ms = [report.measurement("decode", 1, 1, 512, "inferx", [4.0]),
          report.measurement("decode", 1, 1, 512, "inferx-int4", [1.6])]
    dims = Dims.of(make_config("8b"))
    (row,) = report.config_rows(ms, dims, Ceilings(4e12, 8e14), quant=report.QuantBytes(128, False, True))
    assert row["int4_ms"] == 1.6 and row["int4_speedup"] == pytest.approx(2.5)
    want = decode_bytes(dims, 1, 512, weights=int4_weight_bytes(dims, 128, False, True))["total"] / 4e9
    assert row["int4_roofline_ms"] == pytest.approx(want) and row["int4_roofline_ms"] < row["roofline_ms"] / 3
    assert row["int4_fraction"] == pytest.approx(want / 1.6)
    lines = report.shape_table([row])
    assert "int4 ms" in lines[0] and "int4 vs bf16" in lines[0] and "2.50x" in lines[1]


def test_fp8_rows_and_table() -> None:
    """An FP8 artifact's measurement (``--quant fp8``): its columns named fp8, its roofline from a
    byte a weight (and a 4-byte scale an output channel): between int4's and bf16's."""
    ms = [report.measurement("decode", 1, 1, 512, "inferx", [4.0]),
          report.measurement("decode", 1, 1, 512, "inferx-fp8", [2.5])]
    dims = Dims.of(make_config("8b"))
    quant = report.QuantBytes(0, True, False, kind="fp8")
    (row,) = report.config_rows(ms, dims, Ceilings(4e12, 8e14), quant=quant)
    assert row["fp8_ms"] == 2.5 and row["fp8_speedup"] == pytest.approx(1.6) and "int4_ms" not in row
    w = fp8_weight_bytes(dims, head=False)
    layers = dims.layers * (dims.layer_params() - 2 * dims.hidden)
    assert layers < w < layers * 1.01 + dims.vocab * dims.hidden * 2 + dims.hidden * (2 * dims.layers + 1) * 2
    assert row["fp8_roofline_ms"] == pytest.approx(decode_bytes(dims, 1, 512, weights=w)["total"] / 4e9)
    assert row["roofline_ms"] / 2.2 < row["fp8_roofline_ms"] < row["roofline_ms"] / 1.5
    lines = report.shape_table([row])
    assert "fp8 ms" in lines[0] and "fp8 vs bf16" in lines[0] and "1.60x" in lines[1]
    assert BenchOptions(quant="fp8").quant == "fp8"
    with pytest.raises(ValueError, match="and fp8"):
        BenchOptions(quant="fp16")
    # --kv-fp8: the quantized artifact's roofline reads the KV cache at a byte an element
    kv = report.QuantBytes(0, True, False, kind="fp8", kv_elem=1)
    (row2048,) = report.config_rows([report.measurement("decode", 64, 1, 2048, "inferx", [9.0]),
                                     report.measurement("decode", 64, 1, 2048, "inferx-fp8", [4.5])],
                                    dims, Ceilings(4e12, 8e14), quant=kv)
    want = decode_bytes(dims, 64, 2048, weights=w, kv_elem=1)["total"]
    assert row2048["fp8_roofline_ms"] == pytest.approx(want / 4e9)
    assert want < decode_bytes(dims, 64, 2048, weights=w)["total"] - 8e9  # 17 GB of bf16 cache halved
    with pytest.raises(ValueError, match="--kv-fp8"):
        BenchOptions(kv_fp8=True)


def test_tables_and_atomic_json(tmp_path: Path) -> None:
    lines = report.shape_table(_rows())
    assert lines[0].split()[:3] == ["config", "InferX", "ms"]
    assert "decode b1 ctx512" in lines[1] and "1.50x" in lines[1] and "max-autotune" in lines[1]
    kernels = report.kernel_table([{"kernel": "k0", "template": "gemm", "launches": 32, "ms_per_launch": 0.1,
                                    "bytes_per_launch": 400e6, "flops_per_launch": 0}])
    assert "4000" in kernels[1] and "100.0%" in kernels[1]  # 400 MB in 0.1 ms
    path = report.write_json({"a": [1, 2]}, tmp_path / "sub" / "r.json")
    assert json.loads(path.read_text()) == {"a": [1, 2]} and [p.name for p in path.parent.iterdir()] == ["r.json"]


# --- the run's flow on the CPU, InferX's session faked -----------------------------------------


class FakeSession:
    """The runtime's timing interface (time_step, time_kernels, host_ms) with made-up numbers."""

    def __init__(self) -> None:
        self.host_ms: list[float] = []
        self.steps: list[tuple[str, int, int, int]] = []
        self.kernel_configs: list[tuple[str, int, int, int]] = []
        self.closed = False

    def time_step(self, entry: str, batch: int, seq: int, context: int, warmup: int = 10,
                  iters: int = 50) -> list[float]:
        self.steps.append((entry, batch, seq, context))
        return [0.5 + 0.01 * i for i in range(iters)]

    def time_kernels(self, entry: str, batch: int, seq: int, context: int) -> list[dict[str, Any]]:
        self.kernel_configs.append((entry, batch, seq, context))
        return [{"kernel": "gemm_0", "template": "gemm", "launches": 2, "ms_per_launch": 0.01,
                 "bytes_per_launch": 1_000_000, "flops_per_launch": 2_000_000}]

    def reset(self) -> None:
        pass

    def prefill(self, ids: Any) -> None:
        pass

    def decode(self, ids: Any) -> None:
        self.host_ms.append(0.02)

    def close(self) -> None:
        self.closed = True


@pytest.mark.thorough  # the bench's flow on the cpu: test_cli_on_cpu_writes_json in CI's run
def test_run_flow_with_a_faked_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = FakeSession()
    compiled: list[Path] = []

    def fake_compile(ckpt: Path, out: Path, opts: BenchOptions, say: Any, quant: str | None = None) -> Path:
        assert (ckpt / "config.json").is_file() and list(ckpt.glob("*.safetensors"))
        assert json.loads((ckpt / "config.json").read_text())["tie_word_embeddings"] is True
        out.mkdir()
        compiled.append(out)
        return out

    opts = BenchOptions(shapes=("tiny",), batches=(1, 2), contexts=(8, 16), prefills=(8,), peers=("eager", "hf"),
                        iters=3, warmup=1, device="cpu", workdir=tmp_path / "work", prefill_last=True)
    lines: list[str] = []
    results = run_bench(opts, Hooks(compile=fake_compile, load=lambda art, dev: session), lines.append)
    shape = results["shapes"][0]
    assert session.steps == [("decode", 1, 1, 8), ("decode", 1, 1, 16), ("decode", 2, 1, 8), ("decode", 2, 1, 16),
                             ("prefill", 1, 8, 8), ("prefill_last", 1, 8, 8)] and session.closed and len(compiled) == 1
    impls = {(m["entry"], m["batch"], m["context"], m["impl"]) for m in shape["measurements"] if "error" not in m}
    assert {("decode", 2, 16, "eager"), ("decode", 2, 16, "hf"), ("prefill", 1, 8, "hf"),
            ("prefill_last", 1, 8, "eager"), ("prefill_last", 1, 8, "hf")} <= impls, shape
    last, full = (next(r for r in shape["rows"] if r["entry"] == e) for e in ("prefill_last", "prefill"))
    assert last["flops"] < full["flops"] and last["roofline_ms"] <= full["roofline_ms"]
    assert shape["host_ms"]["steps"] == 3 and shape["kernels_config"]["context"] == 8
    assert session.kernel_configs == [("decode", 1, 1, 8), ("decode", 2, 1, 8), ("prefill", 1, 8, 8)]
    assert shape["kernels_large_config"]["batch"] == 2 and shape["prefill_kernels"][0]["kernel"] == "gemm_0"
    assert all(r["fraction_of_roofline"] is not None for r in shape["rows"])
    text = report.render(results)
    assert "== tiny-llama (tiny) ==" in text and "gemm_0" in text and "decode b2 ctx16" in text
    assert "InferX kernels, prefill b1 8 tok" in text and "InferX kernels, decode b2 ctx8" in text
    assert "prefill b1 8 tok, last logits" in text
    assert any("generating random bf16 weights" in line for line in lines)
    run_bench(opts, Hooks(compile=fake_compile, load=lambda art, dev: FakeSession()), lines.append)
    assert len(compiled) == 1  # the kept work directory's artifact is reused
    # ... unless it was compiled with other options: then it is compiled again, and the run says so
    run_bench(replace(opts, fuse_mlp=True), Hooks(compile=fake_compile, load=lambda art, dev: FakeSession()),
              lines.append)
    assert len(compiled) == 2 and any("compiling again with" in line and '"fuse_mlp": true' in line for line in lines)
    assert "InferX compiled with" not in text
    fused = run_bench(replace(opts, fuse_mlp=True), Hooks(compile=fake_compile, load=lambda art, dev: FakeSession()),
                      lines.append)
    assert "InferX compiled with --fuse-mlp\n" in report.render(fused)

    # --quant: a second artifact, compiled with the scheme and timed as inferx-int4 in the same run
    schemes: list[str | None] = []

    def quant_compile(ckpt: Path, out: Path, opts: BenchOptions, say: Any, quant: str | None = None) -> Path:
        schemes.append(quant)
        return fake_compile(ckpt, out, opts, say)

    sessions: list[FakeSession] = []

    def load(art: Path, dev: str) -> FakeSession:
        sessions.append(FakeSession())
        return sessions[-1]

    # rates fixed where the host's would be measured: on a host whose measured matmul rate is low
    # against its copy rate a tiny decode is bound by FLOPs, the same for both artifacts
    import inferx.benchmark.run as bench_run
    from inferx.benchmark.roofline import Ceilings

    monkeypatch.setattr(bench_run, "measure_ceilings", lambda device: Ceilings(4e12, 8e14))
    q_opts = replace(opts, workdir=None, quant="int4-g32", quant_head=True)
    results = run_bench(q_opts, Hooks(compile=quant_compile, load=load), lines.append)
    assert schemes == [None, "int4-g32"] and len(sessions) == 2 and all(x.closed for x in sessions)
    assert sessions[1].steps == sessions[0].steps
    shape = results["shapes"][0]
    assert {m["impl"] for m in shape["measurements"]} >= {"inferx", "inferx-int4"}
    assert all(r["int4_ms"] is not None and r["int4_roofline_ms"] <= r["roofline_ms"] for r in shape["rows"])
    assert all(r["int4_roofline_ms"] < r["roofline_ms"] for r in shape["rows"] if r["entry"] == "decode")
    text = report.render(results)
    assert "InferX int4 kernels, decode b2 ctx8" in text and "int4 vs bf16" in text
    assert "the LM head int4 too" in text
    # --quant fp8: the same, its columns, tables and impl named fp8
    results = run_bench(replace(q_opts, quant="fp8", quant_head=False), Hooks(compile=quant_compile, load=load),
                        lines.append)
    assert schemes[-1] == "fp8"
    shape = results["shapes"][0]
    assert {m["impl"] for m in shape["measurements"]} >= {"inferx", "inferx-fp8"}
    assert all(r["fp8_ms"] is not None and r["fp8_roofline_ms"] <= r["roofline_ms"] for r in shape["rows"])
    text = report.render(results)
    assert "InferX fp8 kernels, decode b2 ctx8" in text and "fp8 vs bf16" in text and "the LM head bf16" in text


# --- options and the CLI ------------------------------------------------------------------------


def test_option_errors() -> None:
    assert int_list("1, 4,16", "--batch") == (1, 4, 16)
    with pytest.raises(BenchError, match="--batch '1,x': 'x' is not a positive integer"):
        int_list("1,x", "--batch")
    with pytest.raises(BenchError, match="unknown quant scheme 'int8'"):
        options("1b", "1", "512", "", "eager", "", 3, 1, "cuda", None, quant="int8")
    with pytest.raises(BenchError, match="--quant-head needs --quant"):
        options("1b", "1", "512", "", "eager", "", 3, 1, "cuda", None, quant_head=True)
    assert options("1b", "1", "512", "", "eager", "", 3, 1, "cuda", None, quant="fp8", quant_head=True).quant_head
    assert compile_settings(options("1b", "1", "512", "", "eager", "", 3, 1, "cuda", None), "int4-g128") != \
        compile_settings(options("1b", "1", "512", "", "eager", "", 3, 1, "cuda", None))
    fp8 = options("1b", "1", "512", "", "eager", "", 3, 1, "cuda", None, quant="fp8")
    assert compile_settings(fp8, "fp8") != compile_settings(replace(fp8, kv_fp8=True), "fp8")
    with pytest.raises(BenchError, match="unknown peer 'vllm'"):
        options("1b", "1", "512", "", "vllm", "", 3, 1, "cuda", None)
    with pytest.raises(BenchError, match="--device cpu runs only --shape tiny"):
        check_device(options("1b", "1", "512", "", "eager", "", 3, 1, "cpu", None))
    assert options("1b", "1", "512", "", "eager", "", 3, 1, "cuda", None).pdl  # the default
    assert not options("1b", "1", "512", "", "eager", "", 3, 1, "cuda", None, pdl=False).pdl
    fused = options("1b", "1", "512", "", "eager", "", 3, 1, "cuda", None, fuse_mlp=True, fuse_attention_o=True)
    plain = options("1b", "1", "512", "", "eager", "", 3, 1, "cuda", None)
    assert fused.fuse_mlp and fused.fuse_attention_o and compile_settings(fused) != compile_settings(plain)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given without a GPU")
def test_cli_without_gpu_fails_in_one_line() -> None:
    result = CliRunner().invoke(main, ["bench", "--shape", "1b"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "error: inferx bench needs an NVIDIA GPU (CUDA) and torch sees none; "
        "--shape tiny --device cpu only exercises the code"]


def test_cli_on_cpu_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(main, ["bench", "--shape", "tiny", "--device", "cpu", "--batch", "2", "--context", "8",
                                       "--prefill", "", "--peers", "eager", "--iters", "2", "--warmup", "0",
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["shapes"][0]["rows"][0]["eager_ms"] > 0 and data["ceilings"]["copy_bytes_per_s"] > 0
    assert {"device", "versions", "commit", "date"} <= set(data) and "torch" in data["versions"]
    assert "decode b2 ctx8" in result.output


SIGTERM_SCRIPT = """
import sys, time
from pathlib import Path
from inferx.benchmark.main import bench
from inferx.benchmark.run import BenchOptions, Hooks

def slow_compile(ckpt, out, opts, say, quant=None):
    Path(sys.argv[1]).write_text(str(out.parent))
    time.sleep(120)

opts = BenchOptions(shapes=("tiny",), batches=(1,), contexts=(8,), prefills=(), peers=(), iters=1, warmup=0,
                    device="cpu")
bench(opts, None, Hooks(compile=slow_compile, load=lambda art, dev: None))
"""


@pytest.mark.slow  # a few seconds: CI runs it, the fast tier does not
def test_sigterm_removes_the_work_directory(tmp_path: Path) -> None:
    """A run stopped by SIGTERM (as `timeout` stops it) removes its work directory: the 8B
    shape's checkpoint and artifact are 16 GB each."""
    import os
    import signal
    import subprocess
    import sys
    import time

    mark = tmp_path / "workdir.txt"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_SCRIPT, str(mark)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not mark.is_file() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert mark.is_file(), "the run never reached the compile step"
        workdir = Path(mark.read_text())
        assert (workdir / "checkpoint").is_dir()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    assert not workdir.exists(), f"left behind: {workdir}"



def test_prefill_only_run_breaks_down_prefill_alone(tmp_path: Path) -> None:
    """``--context ''`` measures prefill alone: no decode rows, the prefill kernels broken down."""
    session = FakeSession()

    def fake_compile(ckpt: Path, out: Path, opts: BenchOptions, say: Any, quant: str | None = None) -> Path:
        out.mkdir()
        return out

    opts = BenchOptions(shapes=("tiny",), batches=(1,), contexts=(), prefills=(8,), peers=(), iters=2, warmup=0,
                        device="cpu", workdir=tmp_path / "work")
    shape = run_bench(opts, Hooks(compile=fake_compile, load=lambda art, dev: session), lambda line: None)["shapes"][0]
    assert session.steps == [("prefill", 1, 8, 8)] and session.kernel_configs == [("prefill", 1, 8, 8)]
    assert {r["entry"] for r in shape["rows"]} == {"prefill"} and "kernels" not in shape
    assert shape["prefill_kernels_config"]["seq"] == 8 and not shape["notes"], shape["notes"]


def test_launch_floor_fits_a_fixed_cost_and_a_rate() -> None:
    """The floor of plain streaming kernels: ``t = launch_s + bytes / rate`` recovered from exact
    points and despite one stray size; benchmarks/launch_floor.py refuses to run without a GPU in
    one line."""
    exact = [(b, 3e-6 + b / 4e12) for b in (8e6, 12.6e6, 33.6e6, 117e6, 235e6)]
    f = fit(exact)
    assert abs(f.launch_s - 3e-6) < 1e-12 and abs(f.read_bytes_per_s / 4e12 - 1) < 1e-9
    f = fit([*exact, (67.1e6, 3e-6 + 67.1e6 / 4e12 + 7e-6)])  # one stray size, 7 us slow
    assert abs(f.launch_s - 3e-6) < 0.1e-6 and abs(f.read_bytes_per_s / 4e12 - 1) < 0.01
    assert abs(f.chain_s(10, 1e9) - (10 * f.launch_s + 1e9 / f.read_bytes_per_s)) < 1e-15
    with pytest.raises(ValueError, match="two distinct sizes"):
        fit([(8e6, 1e-5), (8e6, 2e-5)])
    if not torch.cuda.is_available():
        script = Path(__file__).resolve().parent.parent / "benchmarks" / "launch_floor.py"
        proc = subprocess.run([sys.executable, str(script), "--sizes", "1"], capture_output=True, text=True)
        assert proc.returncode != 0 and proc.stderr.strip() == "launch_floor: needs a CUDA GPU"


def test_the_streaming_kernel_sums_its_chunks() -> None:
    """``floor_kernel.read_sum`` in Triton's interpreter: program i sums its chunk (the last one
    partial), and with CHUNK 0 every program stores 0 (the empty kernel of the chain)."""
    from inferx.benchmark.floor_kernel import BLOCK, read_sum

    x = torch.arange(10000, dtype=torch.float16) % 7
    out = torch.full((2,), -1.0)
    read_sum[(2,)](x, out, 10000, CHUNK=4 * BLOCK, BLOCK=BLOCK)
    assert out.tolist() == [x[: 4 * BLOCK].float().sum().item(), x[4 * BLOCK:].float().sum().item()]
    out = torch.full((3,), -1.0)
    read_sum[(3,)](x, out, 0, CHUNK=0, BLOCK=BLOCK)
    assert out.tolist() == [0.0, 0.0, 0.0]


def test_the_persistent_streaming_kernel_sums_its_phases_and_reports_a_barrier_it_gave_up_on() -> None:
    """``floor_kernel.read_phases`` in Triton's interpreter (programs one after another): without
    barriers the programs' sums add up to all phases' elements, also where each program loads
    its next region's first chunks ahead (AHEAD 1 or 2); with one program every barrier is passed at
    once; with two, the first program's waits give up (the second has not started) and it reports
    -1, while the second, arriving after, passes every barrier and sums its share.
    benchmarks/launch_floor.py refuses a negative --phases in one line."""
    from inferx.benchmark.floor_kernel import BLOCK, read_phases

    x = torch.arange(3 * 10000, dtype=torch.float16) % 7
    total = x.float().sum().item()
    for g in (2, 3):
        out, counter = torch.full((g,), -2.0), torch.zeros(1, dtype=torch.int32)
        read_phases[(g,)](x, out, counter, 10000, PHASES=3, CHUNK=2 * BLOCK, BLOCK=BLOCK, SYNC=False, MAX_POLLS=4)
        assert out.sum().item() == total and counter.item() == 0
    out, counter = torch.full((1,), -2.0), torch.zeros(1, dtype=torch.int32)
    read_phases[(1,)](x, out, counter, 10000, PHASES=3, CHUNK=2 * BLOCK, BLOCK=BLOCK, SYNC=True, MAX_POLLS=4)
    assert out.tolist() == [total] and counter.item() == 3
    out, counter = torch.full((2,), -2.0), torch.zeros(1, dtype=torch.int32)
    read_phases[(2,)](x, out, counter, 10000, PHASES=3, CHUNK=2 * BLOCK, BLOCK=BLOCK, SYNC=True, MAX_POLLS=4)
    assert out[0].item() == -1.0 and 0 < out[1].item() < total and counter.item() == 6
    for g, sync, ahead in ((1, True, 1), (3, False, 1), (2, False, 2)):  # next region's first chunks loaded early
        out, counter = torch.full((g,), -2.0), torch.zeros(1, dtype=torch.int32)
        read_phases[(g,)](x, out, counter, 10000, PHASES=3, CHUNK=2 * BLOCK, BLOCK=BLOCK, SYNC=sync, MAX_POLLS=4,
                          AHEAD=ahead)
        assert out.sum().item() == total, (g, sync, ahead, out)
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "launch_floor.py"
    proc = subprocess.run([sys.executable, str(script), "--phases", "-1"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert proc.stderr.strip() == "launch_floor: --phases -1 must be >= 0 and --per-sm '1,2' each >= 1"
    proc = subprocess.run([sys.executable, str(script), "--phases", "4", "--ahead", "3"], capture_output=True,
                          text=True)
    assert proc.returncode != 0
    assert proc.stderr.strip() == "launch_floor: --ahead '3': each a power of 2 (chunks loaded before a wait)"


def test_decode_kernel_tables_show_the_launch_floor() -> None:
    """With a measured launch floor, each decode kernel's floor (fixed cost plus bytes over the read
    rate) and the chain's below the table; without one (CPU runs), neither; a failed measurement
    is said once."""
    kernels = [{"kernel": "gemm_0", "template": "gemm", "launches": 16, "ms_per_launch": 0.0066,
                "bytes_per_launch": 12_600_000, "flops_per_launch": 0},
               {"kernel": "gemm_1", "template": "gemm", "launches": 1, "ms_per_launch": 0.1176,
                "bytes_per_launch": 525_600_000, "flops_per_launch": 0}]
    floor = LaunchFloor(launch_s=2.4e-6, read_bytes_per_s=4.65e12)
    text = "\n".join(report.kernel_table(kernels, floor))
    rows = text.splitlines()
    assert rows[0].endswith("launch floor us") and rows[1].endswith(" 5.1")  # 2.4 us + 12.6 MB / 4.65 TB/s
    assert rows[2].endswith(" 115.4")
    assert "launch floor of 17 launches moving 727 MB: 0.197 ms" in text  # 17 x 2.4 us + 727 MB / 4.65 TB/s
    assert "launch floor" not in "\n".join(report.kernel_table(kernels)) and "record us" not in text
    kernels[0]["record_ms"] = 0.0049  # tuned: its record's time beside the step's
    rows = report.kernel_table(kernels)
    assert rows[0].split()[3:5] == ["us/launch", "record"] and rows[1].split()[3:5] == ["6.6", "4.9"]
    assert rows[2].split()[3:5] == ["117.6", "-"]
    shape = {"name": "tiny-llama", "shape": "tiny", "rows": [], "kernels": kernels,
             "kernels_config": {"batch": 1, "context": 8}}
    results = {"device": "GPU", "commit": "abc", "shapes": [shape],
               "ceilings": {"copy_bytes_per_s": 4e12, "matmul_flops_per_s": 8e14}}
    assert "launch floor of 17 launches" in report.render({**results, "launch_floor": asdict(floor)})
    failed = report.render({**results, "launch_floor": {"error": "no GPU"}})
    assert "launch floor not measured: no GPU" in failed and "launch floor us" not in failed

