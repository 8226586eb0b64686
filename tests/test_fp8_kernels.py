"""The fp8gemm family (FP8 W8A8 kernels): its E4M3 emulation in Triton's interpreter against
PyTorch's float8_e4m3fn, E4M3 bytes as stored, the kernel against the interpreter's
``ix.fp8_linear`` (with and without its RMSNorm prologue and a gated epilogue), models compiled
with ``quant="fp8"`` against their reference session, and the GPU kernels building for sm_90."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers as T

import inferx
from inferx.compiler.families.common import e4m3
from inferx.compiler.families.fp8gemm import codegen
from inferx.compiler.families.fp8gemm.codegen import Fp8GemmSchedule
from inferx.compiler.interpreter.context import KernelContext
from inferx.compiler.interpreter.kernels import KERNELS
from inferx.compiler.interpreter.numerics import round_to
from inferx.compiler.ir import fp8
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.textio import parse_module
from inferx.compiler.ir.types import DType
from inferx.runtime.triton_kernels import grid, load_kernel


def _torch_e4m3(x: np.ndarray) -> np.ndarray:
    return torch.from_numpy(x.astype(np.float32)).clamp(-448, 448).to(torch.float8_e4m3fn).float().numpy()


def test_e4m3_bytes_are_torchs_layout() -> None:
    """Every finite E4M3 value encodes to the byte PyTorch's float8_e4m3fn stores for it and
    decodes back; a value that is not an E4M3 value is refused. Compared exactly: an E4M3 value
    is exact in float32 and the mapping is bit arithmetic, the same on every CPU (as is the
    interpreter's emulation below: integer operations and single IEEE float32 operations, each
    correctly rounded)."""
    b = np.arange(256, dtype=np.uint8)
    values = torch.from_numpy(b).view(torch.float8_e4m3fn).float().numpy()
    finite = np.isfinite(values)
    np.testing.assert_array_equal(fp8.decode_e4m3(b[finite]), values[finite])
    np.testing.assert_array_equal(fp8.encode_e4m3(values[finite]), b[finite])
    with pytest.raises(ValueError, match="not E4M3 values"):
        fp8.encode_e4m3(np.array([0.3], dtype=np.float32))


def _emulation_kernel():  # type: ignore[no-untyped-def]
    """A Triton kernel running the template's two emulations: x rounded to E4M3, bytes decoded."""
    import triton
    import triton.language as tl

    round_src = e4m3.ROUND.format(v="v", out="q").replace("\n", "\n    ")
    decode_src = e4m3.DECODE.format(b="b", out="d").replace("\n", "\n    ")
    src = f"""
def k(x, y, codes, out, N: tl.constexpr):
    i = tl.arange(0, N)
    v = tl.load(x + i)
    {round_src}
    tl.store(y + i, q)
    b = tl.load(codes + i)
    {decode_src}
    tl.store(out + i, d)
"""
    scope: dict[str, Any] = {"tl": tl, "triton": triton}
    exec(compile(src, "<fp8-emulation>", "exec"), scope)  # noqa: S102 - the kernel text above
    return triton.jit(scope["k"])


def test_the_interpreters_e4m3_emulation_is_torchs_cast(monkeypatch: pytest.MonkeyPatch) -> None:
    """In Triton's interpreter the template rounds every value in [-448, 448] (E4M3 values, their
    midpoints, subnormals, random values) as PyTorch's cast does, and decodes every byte but NaN's
    as PyTorch reads it."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    values = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float().numpy()
    finite = np.unique(values[np.isfinite(values)])
    mids = (finite[:-1] + finite[1:]) / 2
    rng = np.random.default_rng(0)
    x = np.concatenate([finite, mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(0)),
                        [2.0**-10, -(2.0**-12), 447.9, 2.0**-6 - 2.0**-12],
                        np.clip(rng.standard_normal(2048) * 40, -448, 448)]).astype(np.float32)
    n = 1 << (len(x) - 1).bit_length()
    x = np.concatenate([x, np.zeros(n - len(x), np.float32)])
    codes = np.arange(n, dtype=np.int64) % 256
    codes = np.where((codes & 127) == 127, 0, codes).astype(np.uint8)  # NaN's bytes are never stored
    y, out = torch.empty(n), torch.empty(n)
    _emulation_kernel()[(1,)](torch.from_numpy(x), y, torch.from_numpy(codes), out, N=n)
    want = _torch_e4m3(x)
    bad = np.flatnonzero(y.numpy() != want)
    got = y.numpy()
    assert bad.size == 0, f"{bad.size} values round differently, e.g. {x[bad[:3]]} -> {got[bad[:3]]} vs {want[bad[:3]]}"
    np.testing.assert_array_equal(out.numpy(), torch.from_numpy(codes).view(torch.float8_e4m3fn).float().numpy())


def _kernel(m: int, k: int, n: int, dtype: str, norm: bool, gated: bool) -> KernelOp:
    """An fp8gemm kernel: an fp8_linear (behind an RMSNorm with ``norm``; silu(gate) * up of its
    halves with ``gated``), static shapes."""
    x, c, s = f"!ix.tensor<[{m}, {k}], {dtype}>", f"!ix.tensor<[{n}, {k}], f8e4m3>", f"!ix.tensor<[{n}], f32>"
    w, y = f"!ix.tensor<[{k}], {dtype}>", f"!ix.tensor<[{m}, {n}], {dtype}>"
    out = f"!ix.tensor<[{m}, {n // 2}], {dtype}>" if gated else y
    body = [f"%h = ix.rmsnorm %a0, %a3 {{eps = 1.0e-05 : f64}} : ({x}, {w}) -> {x}"] if norm else []
    body.append(f"%q = ix.fp8_linear {'%h' if norm else '%a0'}, %a1, %a2 : {x}, {c}, {s} -> {y}")
    if gated:
        body += [f"%gt, %up = ix.split %q {{dim = -1 : i64}} : ({y}) -> ({out}, {out})",
                 f"%g = ix.silu %gt : ({out}) -> {out}", f"%r = ix.mul %g, %up : ({out}, {out}) -> {out}"]
    result = "%r" if gated else "%q"
    types = [x, c, s, w]
    args = ", ".join(f"%x{i}: {t}" for i, t in enumerate(types))
    block = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
    lines = "\n        ".join(body)
    text = f"""
    func.func @f({args}) -> {out} {{
      %y = ix.kernel "fp8gemm"(%x0, %x1, %x2, %x3) {{name = "k0"}} : ({", ".join(types)}) -> {out} {{
      ^bb0({block}):
        {lines}
        ix.yield {result} : {out}
      }}
      func.return %y : {out}
    }}
    """
    module, _ = parse_module(text)
    return next(o for o in module.walk() if isinstance(o, KernelOp))


def _reference(kernel: KernelOp, ins: list[np.ndarray]) -> np.ndarray:
    """The kernel's body run op by op by the interpreter's kernels, each result rounded to its
    dtype, as the reference session runs it."""
    env: dict[Any, np.ndarray] = dict(zip(kernel.body.block.args, ins, strict=True))
    for op in kernel.body.block.ops:
        if op.name == "ix.yield":
            return env[op.operands[0]]
        outs = KERNELS[type(op)](op, [env[v] for v in op.operands], KernelContext(env={}, weights={}))
        for r, o in zip(op.results, outs, strict=True):
            env[r] = round_to(np.asarray(o), DType(r.type.dtype.value))
    raise AssertionError("no yield")


CASES = [
    # (M, K, N, dtype, norm, gated, schedule or None for the cpu heuristic)
    (5, 64, 40, "f32", False, False, None),
    (5, 128, 40, "f32", True, False, (16, 32, 32)),  # four K steps, three passes over x
    (33, 64, 48, "f32", True, True, (16, 16, 64)),  # two row tiles, silu(gate) * up
    (7, 64, 40, "f16", True, False, None),  # the norm's output rounded to f16 before its scale
    (3, 96, 24, "f16", False, False, (16, 16, 32)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "m{}-k{}-n{}-{}-norm{:d}-gated{:d}".format(*c))
def test_fp8gemm_matches_the_interpreter(case: tuple[Any, ...]) -> None:
    """The kernel in Triton's interpreter against the interpreter's ops on the same E4M3 weight:
    x's tokens quantized alike, the products summed in another order (fp32: within 1e-4 of the
    largest output; f16: the output's rounding, 2e-3)."""
    m, k, n, dtype, norm, gated, sched = case
    kernel = _kernel(m, k, n, dtype, norm, gated)
    schedule = codegen.heuristic_schedule(kernel, "cpu") if sched is None else Fp8GemmSchedule(*sched)
    ks = codegen.generate(kernel, "kernel", schedule)
    np_dtype = np.float32 if dtype == "f32" else np.float16
    rng = np.random.default_rng(m * 100 + k + n)
    x = rng.standard_normal((m, k)).astype(np_dtype)
    x[m // 2] = 0  # a token of zeros: its scale is 1
    codes, scales = fp8.quantize_weight(rng.standard_normal((n, k)).astype(np.float32) * 0.1)
    g = (rng.random(k) + 0.5).astype(np_dtype)
    want = _reference(kernel, [x, codes, scales, g]).astype(np.float32)
    out_t = torch.float32 if dtype == "f32" else torch.float16
    out = torch.empty(want.shape, dtype=out_t)
    tensors = [torch.from_numpy(a) for a in (x, fp8.encode_e4m3(codes), scales, g)]
    used = {p.index for p in ks.params if p.kind == "in"}
    fn = load_kernel(ks, interpret=True)
    fn[grid(ks, {})](*[t for i, t in enumerate(tensors) if i in used], out, **ks.constexprs,
                     num_warps=ks.num_warps, num_stages=ks.num_stages)
    err = float(np.abs(out.float().numpy() - want).max())
    tol = (1e-4 if dtype == "f32" else 2e-3) * max(1.0, float(np.abs(want).max()))
    repro = f"repro: pytest tests/test_fp8_kernels.py -k 'm{m}-k{k}-n{n}-{dtype}' ({schedule})"
    assert err <= tol, f"max abs error {err:.3g} > {tol:.3g}\n{repro}"


def _quantized_input_kernel(m: int, k: int, n: int, dtype: str, gated: str = "") -> KernelOp:
    """An fp8gemm kernel whose x arrives E4M3 with a scale a row (``row_scales``); with ``gated``
    "split" or "pairs", silu(gate) * up of its halves (split in two, or as even and odd columns,
    as interleave-pairs stores gate|up)."""
    x, rs, c, s = (f"!ix.tensor<[{m}, {k}], f8e4m3>", f"!ix.tensor<[{m}], f32>", f"!ix.tensor<[{n}, {k}], f8e4m3>",
                   f"!ix.tensor<[{n}], f32>")
    y = f"!ix.tensor<[{m}, {n}], {dtype}>"
    out = f"!ix.tensor<[{m}, {n // 2}], {dtype}>" if gated else y
    body = [f"%q = ix.fp8_linear %a0, %a1, %a2 row_scales %a3 {{out_dtype = \"{dtype}\"}} : {x}, {c}, {s} "
            f"row_scales {rs} -> {y}"]
    if gated == "split":
        body.append(f"%gt, %up = ix.split %q {{dim = -1 : i64}} : ({y}) -> ({out}, {out})")
    elif gated == "pairs":
        body += [f"%gt = ix.slice %q {{dim = -1 : i64, start = #ix.dim<{i}>, end = #ix.dim<{n}>, step = 2 : i64}} : "
                 f"({y}) -> {out}".replace("%gt", name) for i, name in ((0, "%gt"), (1, "%up"))]
    if gated:
        body += [f"%g = ix.silu %gt : ({out}) -> {out}", f"%r = ix.mul %g, %up : ({out}, {out}) -> {out}"]
    lines = "\n        ".join(body)
    text = f"""
    func.func @f(%x0: {x}, %x1: {c}, %x2: {s}, %x3: {rs}) -> {out} {{
      %y = ix.kernel "fp8gemm"(%x0, %x1, %x2, %x3) {{name = "k0"}} : ({x}, {c}, {s}, {rs}) -> {out} {{
      ^bb0(%a0: {x}, %a1: {c}, %a2: {s}, %a3: {rs}):
        {lines}
        ix.yield {"%r" if gated else "%q"} : {out}
      }}
      func.return %y : {out}
    }}
    """
    module, _ = parse_module(text)
    return next(o for o in module.walk() if isinstance(o, KernelOp))


@pytest.mark.parametrize("m, k, n, dtype, gated, tma", [
    (5, 64, 40, "f32", "", 0), (33, 128, 48, "f16", "", 0),
    (5, 64, 40, "f32", "", 1), (33, 64, 48, "f32", "split", 1), (18, 64, 64, "f32", "pairs", 1),
])
def test_an_input_already_e4m3_matches_the_interpreter(m: int, k: int, n: int, dtype: str, gated: str,
                                                       tma: int) -> None:
    """x handed on as E4M3 bytes with a scale a row (what a kernel that quantizes x once would
    write): the plain FP8 product in Triton's interpreter against the interpreter's op, and the
    same values as the kernel that quantizes x itself; with ``tma``, the tiles through tensor
    descriptors (plain, a gated split's two boxes, gate|up pairs as one box of 2 x BN rows)."""
    kernel = _quantized_input_kernel(m, k, n, dtype, gated)
    ks = codegen.generate(kernel, "kernel", Fp8GemmSchedule(16, 16, 32, tma=tma))
    assert ("x_desc.load" in ks.source) == bool(tma)
    np_dtype = np.float32 if dtype == "f32" else np.float16
    rng = np.random.default_rng(m + k + n)
    xf = rng.standard_normal((m, k)).astype(np.float32)
    xq, sx = fp8.quantize_rows(xf)
    codes, scales = fp8.quantize_weight(rng.standard_normal((n, k)).astype(np.float32) * 0.1)
    want = _reference(kernel, [xq, codes, scales, sx]).astype(np.float32)
    if not gated:
        np.testing.assert_allclose(want, fp8.fp8_matmul(xf, codes, scales).astype(np_dtype), rtol=2e-3, atol=2e-3)
    out = torch.empty(want.shape, dtype=torch.float32 if dtype == "f32" else torch.float16)
    tensors = [torch.from_numpy(a) for a in (fp8.encode_e4m3(xq), fp8.encode_e4m3(codes), scales, sx)]
    fn = load_kernel(ks, interpret=True)
    fn[grid(ks, {})](*tensors, out, **ks.constexprs, num_warps=ks.num_warps, num_stages=ks.num_stages)
    err = float(np.abs(out.float().numpy() - want).max())
    tol = (1e-4 if dtype == "f32" else 2e-3) * max(1.0, float(np.abs(want).max()))
    repro = f"repro: pytest tests/test_fp8_kernels.py -k 'e4m3 and {m}-{k}-{n}-{dtype}-{gated}-{tma}'"
    assert err <= tol, f"max abs error {err:.3g} > {tol:.3g}\n{repro}"


# --- models compiled with quant="fp8" ---------------------------------------------------------

def test_inputs_quantized_once_match_the_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``fp8_inputs_once``: each prompt FP8 GEMM reads x from an fp8quant kernel (the norm
    applied there; one kernel for the GEMMs of one input) as E4M3 with its row scales; a decode
    GEMM reads it (``given``) in the batch buckets from ``fp8_decode_min_batch`` (here 2), and
    quantizes x in its tiles below, where the quantizing kernel has no programs and the session
    launches nothing for it. The GPU's schedules in Triton's interpreter against the reference
    session (f32: within 1e-4 of the largest logit): prefill and two decode steps of two
    sequences, and prefill and a decode step of one."""
    from inferx.compiler.quant.fp8 import quantize_program_fp8

    path = inferx.compile(inferx.import_model(_model("llama"), dtype="f32"), target="cpu", schedules="sm_90",
                          output=tmp_path / "a", max_seq_len=32, max_batch=2, quant="fp8", fp8_inputs_once=True,
                          fp8_decode_min_batch=2)
    manifest = json.loads((path / "manifest.json").read_text())
    prefill = [s["kernel"] for s in manifest["entries"]["prefill"]["launches"]]
    decode = manifest["entries"]["decode"]["launches"]
    # per layer: q|k|v after the input norm, o, gate|up after the post-attention norm, down
    assert sum(k.startswith("fp8quant_") for k in prefill) == 2 * 4, prefill
    quant = [s for s in decode if s["kernel"].startswith("fp8quant_")]
    assert len(quant) == 2 * 4, decode
    kernels = manifest["kernels"]
    for s in quant:  # batch 1: no programs; batch 2: x's rows
        assert [b for b, _ in s["by_rows"]] == [1, 2], s
        assert [kernels[k]["grid"] == ["0"] for _, k in s["by_rows"]] == [True, False], s
    gemms = [s for s in decode if s["kernel"].startswith("fp8gemm_")]
    assert all(len({k for _, k in s["by_rows"]}) == 2 for s in gemms), gemms
    import inferx.runtime.loaded as loaded

    counts: list[int] = []
    run = loaded.run
    monkeypatch.setattr(loaded, "run", lambda launches: (counts.append(len(launches)), run(launches)))
    repro = "repro: pytest tests/test_fp8_kernels.py -k quantized_once"
    for prompts, steps in ((PROMPTS, 2), (PROMPTS[:1], 1)):
        ref = quantize_program_fp8(inferx.import_model(_model("llama"), dtype="f32")).reference_session(
            max_batch=2, max_context=32)
        counts.clear()
        _agree(inferx.load(path, device="cpu"), ref, "f32", f"{repro} (batch {len(prompts)})", steps=steps,
               prompts=prompts)
        # prefill, then the decode steps: at batch 1 without the quantizing kernels' empty launches
        assert counts[1:] == [len(decode) - (len(quant) if len(prompts) == 1 else 0)] * steps, counts


PROMPTS = np.array([[5, 17, 3, 88, 41, 9, 60, 2, 33, 71], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]])


def _model(family: str) -> Any:
    torch.manual_seed(0)
    common = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64)
    cfg = T.LlamaConfig(**common) if family == "llama" else T.Qwen2Config(**common)
    return (T.LlamaForCausalLM if family == "llama" else T.Qwen2ForCausalLM)(cfg).eval()


@pytest.mark.parametrize("family, dtype, schedules", [("llama", "f32", "sm_90"), ("qwen2", "f16", None)])
def test_fp8_artifacts_match_the_reference(family: str, dtype: str, schedules: str | None, tmp_path: Path) -> None:
    """A tiny model compiled with ``quant="fp8"`` (every layer linear on fp8gemm kernels, q|k|v and
    gate|up merged, with the cpu target's schedules or the GPU's in Triton's interpreter; Llama's
    prompts with x quantized once, Qwen2's quantized in each tile, its q|k|v with biases)
    against its reference session on the same E4M3 weights: prefill and two decode steps of two
    sequences. fp32: within 1e-4 of the largest logit. f16: the kernels and the reference differ
    by an f16 ulp here and there upstream of a linear (fused epilogues round once), and a token's
    E4M3 rounding flips where that ulp crosses a midpoint (a product off by up to 1/16): within 3%
    of the largest logit, and every position's logits at cosine >= 0.999."""
    program = inferx.import_model(_model(family), dtype=dtype)
    path = inferx.compile(program, target="cpu", schedules=schedules, output=tmp_path / "a", max_seq_len=32,
                          max_batch=2, quant="fp8", fp8_inputs_once=family == "llama")
    names = [p.name for p in (path / "kernels").glob("*.py")]
    assert sum(n.startswith("fp8gemm_") for n in names) >= 4, names
    weights = json_weights(path)
    # 4 a layer (q|k|v and gate|up merged: codes and channel scales concatenated), the LM head float
    assert sum(w["dtype"] == "f8e4m3" for w in weights.values()) == 8
    from inferx.compiler.quant.fp8 import quantize_program_fp8

    ref = quantize_program_fp8(inferx.import_model(_model(family), dtype=dtype)).reference_session(
        max_batch=2, max_context=32)
    cpu = inferx.load(path, device="cpu")
    _agree(cpu, ref, dtype, f"repro: pytest tests/test_fp8_kernels.py -k 'artifacts and {family} and {dtype}'", 2)


def _agree(cpu: Any, ref: Any, dtype: str, repro: str, steps: int = 1, prompts: np.ndarray = PROMPTS) -> None:
    """The compiled session ``cpu`` against ``ref``: the prefill of ``prompts``, then ``steps``
    greedy decode steps (``_close``'s tolerances)."""
    want = np.asarray(ref.prefill(prompts)).astype(np.float32)
    _close(np.asarray(cpu.prefill(prompts)).astype(np.float32), want, dtype, "prefill", repro)
    for step in range(steps):
        tok = want[:, -1].argmax(-1)[:, None]
        want = np.asarray(ref.decode(tok)).astype(np.float32)
        _close(np.asarray(cpu.decode(tok)).astype(np.float32), want, dtype, f"decode {step}", repro)


def json_weights(path: Path) -> dict[str, Any]:
    import json

    return json.loads((path / "manifest.json").read_text())["weights"]


def _close(got: np.ndarray, want: np.ndarray, dtype: str, what: str, repro: str) -> None:
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(got - want).max())
    tol = (1e-4 if dtype == "f32" else 3e-2) * scale
    assert err <= tol, f"{what}: max abs error {err:.3g} > {tol:.3g}\n{repro}"
    g, w = got.reshape(-1, got.shape[-1]), want.reshape(-1, want.shape[-1])
    cos = (g * w).sum(-1) / np.maximum(np.linalg.norm(g, axis=-1) * np.linalg.norm(w, axis=-1), 1e-30)
    assert cos.min() >= 0.999, f"{what}: cosine {cos.min():.6f} < 0.999\n{repro}"


def test_the_gpu_kernels_build_for_sm_90() -> None:
    """A decode tile (16 rows: E4M3 unpacked to f16 for mma), a prompt tile (128 x 128 on FP8
    wgmma, QGMMA in the SASS), each with its norm prologue, and a prompt tile whose x arrives
    E4M3 assemble for sm_90 (Triton's ptxas in a build worker, no GPU needed), also through
    TMA descriptors (gate|up pairs in one box)."""
    import subprocess

    import triton

    from inferx.compiler.build import build_cubins

    ks = {"dec": codegen.generate(_kernel(16, 512, 256, "bf16", True, False), "dec",
                                  Fp8GemmSchedule(16, 64, 128, 4, 4)),
          "pre": codegen.generate(_kernel(256, 512, 512, "bf16", True, True), "pre",
                                  Fp8GemmSchedule(128, 128, 128, 8, 3)),
          "e4m3": codegen.generate(_quantized_input_kernel(256, 512, 512, "bf16"), "e4m3",
                                   Fp8GemmSchedule(128, 128, 128, 8, 3)),
          "tma": codegen.generate(_quantized_input_kernel(256, 512, 512, "bf16", "pairs"), "tma",
                                  Fp8GemmSchedule(128, 128, 128, 8, 3, tma=1))}
    assert all("tl.float8e4nv" in k.source for k in ks.values())
    built = build_cubins(ks, "sm_90", 2, lambda _: None)
    assert all(len(b["cubin"]) > 1000 for b in built.values())
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    for name in ("pre", "e4m3", "tma"):
        cubin = Path(__file__).parent / f".fp8_{name}.cubin"
        try:
            cubin.write_bytes(built[name]["cubin"])
            sass = subprocess.run([str(tools / "cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True,
                                  check=True).stdout
        finally:
            cubin.unlink(missing_ok=True)
        assert "QGMMA" in sass and "E4M3.E4M3" in sass, name
        assert ("UTMALDG" in sass) == (name == "tma"), name


@pytest.mark.parametrize("include, exclude", [
    pytest.param("*q_proj*", "", id="q-fp8"),
    pytest.param("*", "*q_proj*", id="k-v-fp8", marks=pytest.mark.thorough),
])
def test_mixed_precision_layers_match_the_reference(include: str, exclude: str, tmp_path: Path) -> None:
    """Some linears in FP8 and the rest float, split so that k|v merge without q (into two equal
    halves, one with RoPE, which is not a gated pair): the GPU's schedules in Triton's interpreter
    against the reference session of the same program, f32 (within 1e-4 of the largest logit)."""
    from inferx.compiler.quant.fp8 import quantize_program_fp8

    def program() -> Any:
        return quantize_program_fp8(inferx.import_model(_model("llama"), dtype="f32"), include=include,
                                    exclude=exclude)

    path = inferx.compile(program(), target="cpu", schedules="sm_90", output=tmp_path / "a", max_seq_len=32,
                          max_batch=2)
    ref = program().reference_session(max_batch=2, max_context=32)
    cpu = inferx.load(path, device="cpu")
    _agree(cpu, ref, "f32", f"repro: pytest tests/test_fp8_kernels.py -k 'mixed_precision and {include}-{exclude}'")
