"""The FP8 KV cache (``kv_dtype="fp8"``): E4M3 bytes made and read in Triton's interpreter exactly
as the reference rounds; calibrated per-head scales; compiled artifacts against the reference
session of the same program (prefill of two prompts, padded or not, decode steps); the manifest, the
session's cache and the errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from test_artifact import _write_manifest
from test_fp8_kernels import PROMPTS, _agree, _close, _model
from test_precision import ByteTokenizer

import inferx
from inferx.cli import main
from inferx.compiler.families.common.e4m3 import emit_from_bytes, emit_to_bytes
from inferx.compiler.families.common.source import module_source
from inferx.compiler.interpreter.numerics import round_f8e4m3
from inferx.compiler.ir import fp8
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.options import CompileError, CompileOptions
from inferx.compiler.pipeline import calibration_windows
from inferx.compiler.quant.kv import observe_kv, quantize_program_kv
from inferx.program import Program
from inferx.runtime.kernel_source import KernelSource, Param
from inferx.runtime.triton_kernels import load_kernel

TEXT = ("Keys and values are stored in eight bits with a scale for each head, " * 5)[:256]


class _Lines:
    """What the e4m3 helpers emit into: lines at an indent."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 1

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)


def _roundtrip_kernel() -> Any:
    em = _Lines()
    em.emit("i = tl.arange(0, N)")
    em.emit("x = tl.load(in0 + i)")
    emit_to_bytes(em, "x", "b")  # type: ignore[arg-type]
    em.emit("tl.store(in1 + i, b)")
    emit_from_bytes(em, "b", "y", "tl.float32")  # type: ignore[arg-type]
    em.emit("tl.store(in2 + i, y)")
    source = module_source("rt", "in0, in1, in2, N: tl.constexpr", em.lines)
    ks = KernelSource(name="rt", template="test", source=source,
                      params=(Param("in0", "in", index=0, dtype="f32"), Param("in1", "in", index=1, dtype="f32"),
                              Param("in2", "in", index=2, dtype="f32")),
                      grid=("1",), constexprs={"N": 0})
    return load_kernel(ks, interpret=True)


def test_e4m3_bytes_in_the_interpreter_are_the_reference_rounding() -> None:
    """Every finite E4M3 value, every midpoint between neighbours (ties to even), and random values
    within +-448: the kernel's bytes are ``encode_e4m3(round_f8e4m3(x))`` and its decoded values
    ``round_f8e4m3(x)``, bit for bit."""
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], dtype=np.uint8)
    values = np.sort(fp8.decode_e4m3(codes))
    pos = np.unique(values[values >= 0])
    mids = (pos[:-1] + pos[1:]) / 2
    rng = np.random.default_rng(0)
    x = np.concatenate([values, mids, -mids, rng.uniform(-448, 448, 200), rng.standard_normal(300) * 0.01])
    x = x.astype(np.float32)
    n = 1 << (len(x) - 1).bit_length()
    x = np.pad(x, (0, n - len(x)))
    b, y = torch.zeros(n, dtype=torch.uint8), torch.zeros(n, dtype=torch.float32)
    _roundtrip_kernel()[(1,)](torch.from_numpy(x), b, y, N=n)
    want = round_f8e4m3(x)
    assert np.array_equal(y.numpy(), want), "decoded values differ from round_f8e4m3"
    same = fp8.encode_e4m3(want) == b.numpy()
    zero = want == 0  # -0 and +0 may differ in their sign bit
    assert (same | zero).all(), f"bytes differ at {x[~(same | zero)][:5]}"


def test_kv_quantize_saturates_past_the_calibrated_range() -> None:
    new = np.array([[[[0.5, -2.0, 3.0]]], [[[1.0, 0.25, -1.0]]]], dtype=np.float32).reshape(1, 2, 1, 3)
    scale = fp8.kv_scales(np.array([1.0, 0.0]))  # head 0 calibrated to 1.0; head 1 never saw a value
    assert scale.tolist() == [np.float32(1 / 448), 1.0]
    q = fp8.kv_quantize(new, scale)
    assert q[0, 0, 0].tolist() == [224.0, -448.0, 448.0]  # 0.5 -> 224; past +-1.0 saturates
    assert np.allclose(fp8.kv_dequantize(q, scale)[0, 1], new[0, 1])


def _program() -> Program:
    program = inferx.import_model(_model("llama"), dtype="f32")
    program.tokenizer = ByteTokenizer()
    return program


def _options(tmp_path: Path, **kw: Any) -> dict[str, Any]:
    text = tmp_path / "calibration.txt"
    text.write_text(TEXT)
    return dict(target="cpu", max_seq_len=32, max_batch=2, kv_dtype="fp8", calibration=text, **kw)


def _reference(kw: dict[str, Any]) -> Any:
    """The reference session of the program the compile makes: the same windows, scales and
    (with quant fp8) weights."""
    from inferx.compiler.quant.fp8 import quantize_program_fp8

    program = _program()
    amax = observe_kv(program, calibration_windows(program, CompileOptions(**kw)))
    if kw.get("quant") == "fp8":
        quantize_program_fp8(program)
    return quantize_program_kv(program, amax).reference_session(max_batch=2, max_context=32)


@pytest.mark.parametrize("quant", [pytest.param(None, marks=pytest.mark.thorough), "fp8"])
def test_fp8_kv_artifacts_match_the_reference(quant: str | None, tmp_path: Path) -> None:
    """kv_dtype fp8 (with float or FP8 linears): the manifest says f8e4m3, a scale per cache;
    the session's caches are bytes (a quarter of float32's); logits within 1e-4 of the largest
    against the reference session, prefill of two prompts and three decode steps (each reads
    every earlier step's E4M3 keys and values), then two padded prompts (the padding's keys and
    values are not written)."""
    kw = _options(tmp_path, quant=quant)
    path = inferx.compile(_program(), output=tmp_path / "a", **kw)
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["model"]["kv_dtype"] == "f8e4m3"
    scales = sorted(n for n in manifest["weights"] if n.startswith("kv."))
    assert scales == sorted(f"kv.{kv}{i}.scale" for kv in "kv" for i in range(2)), scales
    shown = CliRunner().invoke(main, ["inspect", str(path)], catch_exceptions=False).output
    assert "KV cache f8e4m3" in shown, shown
    cpu = inferx.load(path, device="cpu")
    cpu.prefill(PROMPTS[:, :4])
    assert all(c.dtype == torch.uint8 for c in cpu.caches) and len(cpu.caches) == 4
    cpu.reset()
    ref, repro = _reference(kw), f"repro: pytest tests/test_kv_fp8.py -k 'match and {quant}'"
    _agree(cpu, ref, "f32", repro, steps=3)
    cpu.reset()
    ref.reset()
    lengths = [10, 6]
    _close(np.asarray(cpu.prefill(PROMPTS, lengths)), np.asarray(ref.prefill(PROMPTS, lengths)), "f32", "padded", repro)
    tok = np.array([[3], [4]])
    _close(np.asarray(cpu.decode(tok)), np.asarray(ref.decode(tok)), "f32", "padded decode", repro)


def test_the_scales_are_the_calibrated_ranges(tmp_path: Path) -> None:
    """Each cache's scales: its largest magnitude per KV head over the calibration text, at 448;
    no key or value the calibration wrote saturates."""
    kw = _options(tmp_path)
    program = _program()
    windows = calibration_windows(program, CompileOptions(**kw))
    amax = observe_kv(program, windows)
    assert sorted(amax) == ["k0", "k1", "v0", "v1"] and all(a.shape == (2,) and (a > 0).all() for a in amax.values())
    quantize_program_kv(program, amax)
    assert program.info is not None and program.info.cache_dtype == "f8e4m3"
    for op in program.module.walk():
        if isinstance(op, nn.KVWriteOp):
            assert op.scale is not None
        if isinstance(op, nn.AttentionOp):
            assert op.k_scale is not None and op.v_scale is not None
    np.testing.assert_allclose(program.weights["kv.k0.scale"] * 448, amax["k0"], rtol=1e-6)


def test_kv_fp8_needs_text_to_calibrate_on(tmp_path: Path) -> None:
    program = inferx.import_model(_model("llama"), dtype="f32")  # no tokenizer
    with pytest.raises(CompileError, match=r"kv_dtype fp8 calibrates on text: the model has no tokenizer"):
        inferx.compile(program, target="cpu", output=tmp_path / "a", max_seq_len=32, max_batch=1, kv_dtype="fp8")
    assert not (tmp_path / "a").exists()
    with pytest.raises(CompileError, match=r"unknown kv_dtype 'int8'"):
        inferx.compile(program, target="cpu", output=tmp_path / "a", max_seq_len=32, max_batch=1, kv_dtype="int8")


def test_a_given_kv_scale_needs_no_text(tmp_path: Path) -> None:
    """kv_scale: every head of every cache takes the scale given, nothing calibrated (a model
    without a tokenizer compiles); the artifact matches the reference with those scales; the
    option's rules are errors naming it."""
    from inferx.compiler.quant.kv import uniform_kv

    program = inferx.import_model(_model("llama"), dtype="f32")  # no tokenizer
    path = inferx.compile(program, target="cpu", output=tmp_path / "a", max_seq_len=32, max_batch=2, kv_dtype="fp8",
                          kv_scale=0.05)
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["model"]["kv_dtype"] == "f8e4m3"
    ref_program = _program()
    amax = uniform_kv(ref_program, 0.05)
    assert sorted(amax) == ["k0", "k1", "v0", "v1"]
    ref = quantize_program_kv(ref_program, amax)
    np.testing.assert_allclose(ref.weights["kv.v1.scale"], [0.05, 0.05], rtol=1e-6)
    _agree(inferx.load(path, device="cpu"), ref.reference_session(max_batch=2, max_context=32), "f32",
           "repro: pytest tests/test_kv_fp8.py -k given_kv_scale", steps=2)
    for kw, msg in ((dict(kv_scale=1.0), "give kv_dtype fp8 with it"), (dict(kv_dtype="fp8", kv_scale=0.0),
                                                                          "kv_scale must be a positive number"),
                    (dict(kv_dtype="fp8", kv_scale=1.0, calibration=tmp_path / "t.txt"), "calibration")):
        with pytest.raises(CompileError, match=msg):
            inferx.compile(program, target="cpu", output=tmp_path / "b", max_seq_len=32, max_batch=1, **kw)
    assert not (tmp_path / "b").exists()


def test_a_manifest_whose_caches_disagree_with_kv_dtype_is_refused(tmp_path: Path) -> None:
    """The manifest's model.kv_dtype is checked: an unknown type, and caches that are not of it."""
    path = inferx.compile(_program(), output=tmp_path / "a", **_options(tmp_path))
    manifest = path / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["model"]["kv_dtype"] = "i4"
    _write_manifest(path, doc)
    with pytest.raises(Exception, match=r"kv_dtype.*'i4'"):
        inferx.load(path, device="cpu")
    del doc["model"]["kv_dtype"]
    _write_manifest(path, doc)
    with pytest.raises(Exception, match=r"args\[3\]: 'k0' is .* of f8e4m3, not \[batch, 2, ctx, 16\] of f32"):
        inferx.load(path, device="cpu")


def _decode_attention(dt: str, fp8: bool) -> Any:
    """benchmarks/kv_fp8_attention.py's decode attention kernel: 16 sequences, 32/8 heads of 128."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    try:
        from kv_fp8_attention import kernel_op
    finally:
        sys.path.pop(0)
    return kernel_op(16, 32, 8, 128, 2048, fp8, dt)


def test_kv_f16_decodes_keys_and_values_to_f16() -> None:
    """The decode knob kv_f16 (an FP8 cache under a bf16 query): the query rounded to f16 and K/V
    decoded to f16, so the sm_90 build converts E4M3 pairs to f16 and nothing to bf16 (one
    instruction a value fewer) and its products run on f16 tensor cores; without it, each E4M3
    value goes to bf16 through f16. Only decode schedules take it, 0 or 1, and only an FP8 cache
    under a bf16 query."""
    import re
    import subprocess

    import triton

    from inferx.compiler.build import build_cubins
    from inferx.compiler.families.attention import codegen
    from inferx.compiler.families.attention.codegen import AttentionSchedule
    from inferx.compiler.families.attention.schedule import attention_schedule
    from inferx.compiler.families.interface import ScheduleError

    on = attention_schedule({"bn": 64, "splits": 4, "num_warps": 4, "num_stages": 2, "kv_f16": 1})
    assert on.kv_f16 == 1 and attention_schedule(on.to_dict()) == on
    for bad in ({"bn": 64, "bm": 64, "num_warps": 4, "num_stages": 2, "kv_f16": 1},
                {"bn": 64, "splits": 4, "num_warps": 4, "num_stages": 2, "kv_f16": 2}):
        with pytest.raises(ScheduleError, match="kv_f16"):
            attention_schedule(bad)
    with pytest.raises(Exception, match="FP8 cache under a bf16 query"):
        codegen.generate(_decode_attention("bf16", False), "k", schedule=on)
    ks = {f"k{f}": codegen.generate(_decode_attention("bf16", True), f"k{f}",
                                    schedule=AttentionSchedule(bn=64, splits=4, kv_f16=f)) for f in (0, 1)}
    assert "q = q.to(tl.float16)" in ks["k1"].source and "q = q.to(tl.float16)" not in ks["k0"].source
    built = build_cubins(ks, "sm_90", 2, lambda _: None)
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    ops = {}
    for name, b in built.items():
        cubin = Path(__file__).parent / f".kv_{name}.cubin"
        try:
            cubin.write_bytes(b["cubin"])
            sass = subprocess.run([str(tools / "cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True,
                                  check=True).stdout
        finally:
            cubin.unlink(missing_ok=True)
        ops[name] = re.findall(r"\b(F2F\.BF16\.F16|F2FP\.F16\.E4M3\.UNPACK_B|HMMA\.16816\.F32\.BF16)\b", sass)
    assert "F2F.BF16.F16" in ops["k0"] and "HMMA.16816.F32.BF16" in ops["k0"]
    assert "F2F.BF16.F16" not in ops["k1"] and "HMMA.16816.F32.BF16" not in ops["k1"]
    assert "F2FP.F16.E4M3.UNPACK_B" in ops["k1"]
