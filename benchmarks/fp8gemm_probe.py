"""The fp8gemm kernel alone on the Llama-3-8B projections, beside cuBLASLt's FP8 GEMM
(``torch._scaled_mm`` with per-token and per-channel scales, given x already quantized, and with
x's quantization by torch ops before it) and the bf16 matmul, at decode batches and a prefill's
rows.

Each kernel is timed as the product runs it: a CUDA graph of ``--launches`` launches, replayed
after warm-up, CUDA events around each replay, the median over ``--iters`` replays divided by the
launches. At decode rows the launches cycle through copies of the weight that together exceed
twice the L2, so each reads its weight from HBM. Each schedule is checked once against x
quantized per token by torch and the E4M3 weight dequantized (fp32 matmul). The table gives the
best, the heuristic's, the peers, the byte roofline (``--copy-rate``) and the FP8 FLOP floor
(``--fp8-flops``). At every row count it also times x quantized once by a kernel of its own (one
program a row) and the GEMM on E4M3 x (``row_scales``, operands loaded as E4M3 straight into
the dot, by pointers and by TMA descriptors), the form a producer that writes x quantized would
give every FP8 GEMM.

    python benchmarks/fp8gemm_probe.py --json benchmarks/results/fp8gemm_probe_h200_DATE.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

from inferx.benchmark.floor import launch_cycle_s
from inferx.compiler.families.fp8gemm import codegen
from inferx.compiler.families.fp8gemm.codegen import Fp8GemmSchedule
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.textio import parse_module
from inferx.runtime.triton_kernels import grid, load_kernel

SHAPES_8B = {"q/o": (4096, 4096), "k/v": (1024, 4096), "gate/up": (14336, 4096), "down": (4096, 14336)}
L2_BYTES = 50 * 2**20
SWEEP_DECODE = [(16, 64, 128, 4, 4), (16, 32, 128, 4, 4), (16, 128, 128, 4, 4), (32, 64, 128, 4, 4),
                (64, 64, 128, 4, 3), (64, 128, 128, 4, 3), (16, 64, 256, 4, 3)]
# the GEMM on E4M3 x at decode rows: 64-row tiles are FP8 wgmma's least (a warpgroup's M)
SWEEP_PRE_DECODE = [(64, 64, 128, 4, 3), (64, 128, 128, 4, 3), (64, 32, 128, 4, 4), (64, 64, 256, 4, 3),
                    (64, 128, 128, 8, 3), (32, 64, 128, 4, 4), (16, 64, 128, 4, 4)]
SWEEP_PREFILL = [(128, 128, 128, 8, 3), (128, 256, 128, 8, 3), (256, 128, 128, 8, 3), (128, 128, 64, 8, 4),
                 (128, 128, 128, 4, 3), (64, 128, 128, 4, 4), (128, 256, 64, 8, 4)]


def kernel_op(m: int, k: int, n: int) -> KernelOp:
    """An fp8gemm kernel of one ``ix.fp8_linear`` (bf16 x, E4M3 codes, f32 channel scales)."""
    x, c, s, y = (f"!ix.tensor<[{m}, {k}], bf16>", f"!ix.tensor<[{n}, {k}], f8e4m3>", f"!ix.tensor<[{n}], f32>",
                  f"!ix.tensor<[{m}, {n}], bf16>")
    text = f"""
    func.func @f(%x0: {x}, %x1: {c}, %x2: {s}) -> {y} {{
      %y = ix.kernel "fp8gemm"(%x0, %x1, %x2) {{name = "k0"}} : ({x}, {c}, {s}) -> {y} {{
      ^bb0(%a0: {x}, %a1: {c}, %a2: {s}):
        %q = ix.fp8_linear %a0, %a1, %a2 : {x}, {c}, {s} -> {y}
        ix.yield %q : {y}
      }}
      func.return %y : {y}
    }}
    """
    module, _ = parse_module(text)
    return next(o for o in module.walk() if isinstance(o, KernelOp))


def quantized_input_op(m: int, k: int, n: int) -> KernelOp:
    """An fp8gemm kernel whose x arrives E4M3 with a scale a row (``row_scales``), bf16 out."""
    x, rs, c, s, y = (f"!ix.tensor<[{m}, {k}], f8e4m3>", f"!ix.tensor<[{m}], f32>", f"!ix.tensor<[{n}, {k}], f8e4m3>",
                      f"!ix.tensor<[{n}], f32>", f"!ix.tensor<[{m}, {n}], bf16>")
    text = f"""
    func.func @f(%x0: {x}, %x1: {c}, %x2: {s}, %x3: {rs}) -> {y} {{
      %y = ix.kernel "fp8gemm"(%x0, %x1, %x2, %x3) {{name = "k0"}} : ({x}, {c}, {s}, {rs}) -> {y} {{
      ^bb0(%a0: {x}, %a1: {c}, %a2: {s}, %a3: {rs}):
        %q = ix.fp8_linear %a0, %a1, %a2 row_scales %a3 {{out_dtype = "bf16"}} : {x}, {c}, {s} row_scales {rs} -> {y}
        ix.yield %q : {y}
      }}
      func.return %y : {y}
    }}
    """
    module, _ = parse_module(text)
    return next(o for o in module.walk() if isinstance(o, KernelOp))


@triton.jit
def _quantize_rows_kernel(x, xq, sx, K: tl.constexpr, BK: tl.constexpr):  # type: ignore[no-untyped-def]
    """One row per program: its largest magnitude, then x / s as E4M3 bytes and s."""
    r = tl.program_id(0).to(tl.int64)
    kk = tl.arange(0, BK)
    amax = tl.zeros((BK,), dtype=tl.float32)
    for k0 in range(0, K, BK):
        amax = tl.maximum(amax, tl.abs(tl.load(x + r * K + k0 + kk).to(tl.float32)))
    m = tl.max(amax, 0)
    s = tl.where(m > 0, m / 448.0, 1.0)
    tl.store(sx + r, s)
    out = xq.to(tl.pointer_type(tl.float8e4nv))
    for k0 in range(0, K, BK):
        a = tl.load(x + r * K + k0 + kk).to(tl.float32) / s
        tl.store(out + r * K + k0 + kk, a.to(tl.float8e4nv))


def graph_us(launch, copies: int, launches: int, iters: int) -> float:  # type: ignore[no-untyped-def]
    """Median us per launch of a CUDA graph of ``launches`` calls of ``launch(i % copies)``."""
    return launch_cycle_s(launch, copies, launches, iters) * 1e6


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(E4M3 x / s, s [M, 1] fp32): each row by its largest magnitude over 448."""
    amax = x.float().abs().amax(dim=-1, keepdim=True)
    s = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
    return (x.float() / s).to(torch.float8_e4m3fn), s


def probe_row(name: str, n: int, k: int, m: int, a: argparse.Namespace, gen: torch.Generator,
              per_row_s: float) -> dict:
    """One projection at ``m`` rows: the sweep's schedules checked and timed, then the peers."""
    dev = "cuda"
    start = time.time()
    decode = m <= 64
    copies = max(2, -(-2 * L2_BYTES // (n * k))) if decode else 2
    launches = a.launches if decode else max(2, a.launches // 8)
    ws = [torch.randn((n, k), device=dev, generator=gen) * 0.02 for _ in range(copies)]
    sw = [w.abs().amax(dim=1, keepdim=True) / 448.0 for w in ws]
    codes8 = [(w / s).to(torch.float8_e4m3fn) for w, s in zip(ws, sw, strict=True)]
    ws.clear()
    codes = [c.view(torch.uint8) for c in codes8]
    scales = [s.reshape(n).contiguous() for s in sw]
    x = torch.randn((m, k), device=dev, generator=gen).to(torch.bfloat16)
    y = torch.empty((m, n), device=dev, dtype=torch.bfloat16)
    xq, sx = quantize_rows(x)
    want = (xq.float() @ codes8[0].float().T) * sx * scales[0][None, :]
    op = kernel_op(m, k, n)
    flops = 2 * m * n * k
    row: dict = {"shape": name, "n": n, "k": k, "m": m, "weight_bytes": n * k,
                 "roofline_us": (n * k + 2 * m * (n + k)) / a.copy_rate * 1e6,
                 "flop_floor_us": flops / a.fp8_flops * 1e6, "schedules": []}
    # a prefill kernel's rows carry seq, which this static-shape kernel's do not: its heuristic by hand
    heuristic = codegen.heuristic_schedule(op, "sm_90") if decode else Fp8GemmSchedule(128, 128, 128, 8, 3)
    space = [Fp8GemmSchedule(*v) for v in (SWEEP_DECODE if decode else SWEEP_PREFILL)]
    for s in [heuristic] + [s for s in space if s != heuristic]:
        if time.time() - start > per_row_s:
            row["note"] = "sweep cut short by --budget-s"
            break
        try:
            ks = codegen.generate(op, "probe", s)
            fn = load_kernel(ks, interpret=False)
            gr = grid(ks, {})

            def launch(i: int, fn=fn, gr=gr, ks=ks) -> None:  # type: ignore[no-untyped-def]
                fn[gr](x, codes[i], scales[i], y, **ks.constexprs, num_warps=ks.num_warps,
                       num_stages=ks.num_stages)

            launch(0)
            torch.cuda.synchronize()
            err = float((y.float() - want).abs().max() / want.abs().max())
            if err > 2e-2:
                row["schedules"].append({**s.to_dict(), "error": f"max rel error {err:.3g}"})
                continue
            us = graph_us(launch, copies, launches, a.iters)
            row["schedules"].append({**s.to_dict(), "us": us, "heuristic": s == heuristic})
        except Exception as e:  # noqa: BLE001 - a schedule that does not build or run is recorded
            row["schedules"].append({**s.to_dict(), "error": " ".join(str(e).split())[:200]})
    pre_row(row, n, k, m, x, codes, scales, want, copies, launches, a, start, per_row_s, decode)
    # peers: cuBLASLt FP8 (x quantized already; and x quantized by torch ops first), bf16 matmul
    try:
        wt = [c.T for c in codes8]
        st = [s.reshape(1, n) for s in sw]
        row["scaled_mm_us"] = graph_us(lambda i: torch._scaled_mm(xq, wt[i], sx, st[i], out_dtype=torch.bfloat16),
                                       copies, launches, a.iters)

        def quant_mm(i: int) -> None:
            q, s = quantize_rows(x)
            torch._scaled_mm(q, wt[i], s, st[i], out_dtype=torch.bfloat16)

        row["quant_scaled_mm_us"] = graph_us(quant_mm, copies, launches, a.iters)
        got = torch._scaled_mm(xq, wt[0], sx, st[0], out_dtype=torch.bfloat16).float()
        row["scaled_mm_rel_err"] = float((got - want).abs().max() / want.abs().max())
    except Exception as e:  # noqa: BLE001
        row["scaled_mm_error"] = " ".join(str(e).split())[:300]
    codes8.clear()
    wb = [torch.randn((n, k), device=dev, generator=gen).to(torch.bfloat16)
          for _ in range(max(2, -(-2 * L2_BYTES // (2 * n * k))) if decode else 2)]
    row["bf16_us"] = graph_us(lambda i: torch.matmul(x, wb[i].T, out=y), len(wb), launches, a.iters)
    wb.clear()
    ok = [s for s in row["schedules"] if "us" in s]
    best = min(ok, key=lambda s: s["us"]) if ok else None
    row["best"] = best
    row["heuristic_us"] = next((s["us"] for s in ok if s["heuristic"]), None)
    sched = best and {f: v for f, v in best.items() if f not in ("us", "heuristic")}
    peer = row.get("scaled_mm_us", row.get("scaled_mm_error"))
    print(f"{name:8s} m={m:5d} n={n:6d} k={k:6d}: best {best and round(best['us'], 2)} us {sched}, heuristic "
          f"{row['heuristic_us'] and round(row['heuristic_us'], 2)}, scaled_mm {peer}, quant+scaled_mm "
          f"{row.get('quant_scaled_mm_us')}, bf16 {row['bf16_us']:.2f}, roofline {row['roofline_us']:.2f}, "
          f"flop floor {row['flop_floor_us']:.2f} us; {len(ok)} of {len(row['schedules'])} schedules ran",
          flush=True)
    return row


def pre_row(row: dict, n: int, k: int, m: int, x: torch.Tensor, codes: list, scales: list, want: torch.Tensor,
            copies: int, launches: int, a: argparse.Namespace, start: float, per_row_s: float,
            decode: bool) -> None:
    """x quantized once by a kernel of its own, then the GEMM on E4M3 x (``row_scales``): the
    quantizing kernel's time, each schedule's GEMM time, and the best sum (``pre_total_us``)."""
    xq = torch.empty((m, k), device="cuda", dtype=torch.uint8)
    sx = torch.empty((m,), device="cuda", dtype=torch.float32)
    bk = 1024 if k % 1024 == 0 else 256
    row["quantize_us"] = graph_us(lambda i: _quantize_rows_kernel[(m,)](x, xq, sx, K=k, BK=bk), copies,
                                  launches, a.iters)
    y = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
    op = quantized_input_op(m, k, n)
    row["pre_schedules"] = []
    sweep = SWEEP_PRE_DECODE if decode else SWEEP_PREFILL
    for s in [Fp8GemmSchedule(*v, tma=t) for v in sweep for t in (1, 0)]:  # type: ignore[misc]
        if time.time() - start > 2 * per_row_s:
            row["pre_note"] = "sweep cut short by --budget-s"
            break
        try:
            ks = codegen.generate(op, "probe_pre", s)
            fn = load_kernel(ks, interpret=False)
            gr = grid(ks, {})

            def launch(i: int, fn=fn, gr=gr, ks=ks) -> None:  # type: ignore[no-untyped-def]
                fn[gr](xq, codes[i], scales[i], sx, y, **ks.constexprs, num_warps=ks.num_warps,
                       num_stages=ks.num_stages)

            launch(0)
            torch.cuda.synchronize()
            err = float((y.float() - want).abs().max() / want.abs().max())
            if err > 2e-2:
                row["pre_schedules"].append({**s.to_dict(), "error": f"max rel error {err:.3g}"})
                continue
            row["pre_schedules"].append({**s.to_dict(), "us": graph_us(launch, copies, launches, a.iters)})
        except Exception as e:  # noqa: BLE001 - a schedule that does not build or run is recorded
            row["pre_schedules"].append({**s.to_dict(), "error": " ".join(str(e).split())[:200]})
    ok = [s for s in row["pre_schedules"] if "us" in s]
    if ok:
        best = min(ok, key=lambda s: s["us"])
        row["pre_best"] = best
        row["pre_total_us"] = best["us"] + row["quantize_us"]
        print(f"{row['shape']:8s} m={m}: x quantized once {row['quantize_us']:.2f} us + GEMM on E4M3 x "
              f"{best['us']:.2f} us = {row['pre_total_us']:.2f} us", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="16,64,4096")
    p.add_argument("--launches", type=int, default=64)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--copy-rate", type=float, default=4.28e12, help="bytes/s of the roofline")
    p.add_argument("--fp8-flops", type=float, default=1.979e15, help="dense FP8 FLOP/s of the floor")
    p.add_argument("--budget-s", type=float, default=180, help="sweeping time, shared evenly by the shapes")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("error: fp8gemm_probe needs a CUDA GPU")
    rows = [int(r) for r in a.rows.split(",")]
    per_row_s = a.budget_s / (len(SHAPES_8B) * len(rows))
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    gen = torch.Generator(device="cuda").manual_seed(0)
    for (name, (n, k)), m in itertools.product(SHAPES_8B.items(), rows):
        results["rows"].append(probe_row(name, n, k, m, a, gen, per_row_s))
        torch.cuda.empty_cache()
        if a.json:
            a.json.write_text(json.dumps(results, indent=1))
    big = [r for r in results["rows"] if r["m"] == max(rows) and r.get("best") and r.get("scaled_mm_us")]
    if big:
        ratios = [r["scaled_mm_us"] / r["best"]["us"] for r in big]
        geo = statistics.geometric_mean(ratios)
        print(f"at {max(rows)} rows: fp8gemm vs scaled_mm geomean {geo:.3f}x, lowest {min(ratios):.3f}x")
        pre = [r for r in big if r.get("pre_best")]
        if pre:
            gemm = [r["scaled_mm_us"] / r["pre_best"]["us"] for r in pre]
            total = [r["quant_scaled_mm_us"] / r["pre_total_us"] for r in pre if r.get("quant_scaled_mm_us")]
            with_quant = statistics.geometric_mean(total) if total else float("nan")
            print(f"at {max(rows)} rows, x quantized once: GEMM on E4M3 x vs scaled_mm geomean "
                  f"{statistics.geometric_mean(gemm):.3f}x (lowest {min(gemm):.3f}x); with the quantizing kernel vs "
                  f"torch's quantization + scaled_mm {with_quant:.3f}x")


if __name__ == "__main__":
    main()
