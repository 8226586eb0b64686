"""The qgemm kernel alone on the Llama-3-8B projections, beside torch's int4 weight-only kernel
(``torch.ops.aten._weight_int4pack_mm``, tinygemm) and the bf16 matmul, at 1 and 16 rows, and at 2048 (a prefill's).

Each kernel is timed as the product runs it: a CUDA graph of ``--launches`` launches, replayed
after warm-up, CUDA events around each replay, the median over ``--iters`` replays divided by the
launches. The launches of one graph cycle through copies of the weight that together exceed
twice the L2 (50 MB on the H200), so every launch reads its weight from HBM as a decode step
does. For each shape, every schedule of the sweep (``--sweep``) is checked against the
dequantized weight (fp32 matmul) once and timed; the table gives the best, the heuristic's, the
peers and the roofline (the kernel's bytes over ``--copy-rate``).

    python benchmarks/qgemm_probe.py --json benchmarks/results/qgemm_probe_h200_DATE.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import torch

from inferx.benchmark.floor import launch_cycle_s
from inferx.compiler.families.qgemm import codegen
from inferx.compiler.families.qgemm.heuristic import heuristic_schedule
from inferx.compiler.families.qgemm.schedule import QGemmSchedule, check_fits
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.textio import parse_module
from inferx.runtime.plan import eval_dim
from inferx.runtime.triton_kernels import grid, load_kernel

SHAPES_8B = {  # name: (N, K)
    "q/o": (4096, 4096),
    "k/v": (1024, 4096),
    "gate/up": (14336, 4096),
    "down": (4096, 14336),
}
L2_BYTES = 50 * 2**20


def kernel_op(m: int, k: int, n: int, group: int) -> KernelOp:
    """A qgemm kernel of one asymmetric ``ix.qlinear`` (bf16 x, scales and minimums; y bf16)."""
    g = k // group
    x, w, s = f"!ix.tensor<[{m}, {k}], bf16>", f"!ix.tensor<[{n}, {k}], i4>", f"!ix.tensor<[{n}, {g}], bf16>"
    y = f"!ix.tensor<[{m}, {n}], bf16>"
    text = f"""
    func.func @f(%x0: {x}, %x1: {w}, %x2: {s}, %x3: {s}) -> {y} {{
      %y = ix.kernel "qgemm"(%x0, %x1, %x2, %x3) {{name = "k0"}} : ({x}, {w}, {s}, {s}) -> {y} {{
      ^bb0(%a0: {x}, %a1: {w}, %a2: {s}, %a3: {s}):
        %q = ix.qlinear %a0, %a1, %a2 mins %a3 {{group = {group} : i64}} : {x}, {w}, {s} mins {s} -> {y}
        ix.yield %q : {y}
      }}
      func.return %y : {y}
    }}
    """
    module, _ = parse_module(text)
    return next(o for o in module.walk() if isinstance(o, KernelOp))


def graph_ms(launch, copies: int, launches: int, iters: int) -> float:  # type: ignore[no-untyped-def]
    """Median ms per launch of a CUDA graph of ``launches`` calls of ``launch(i % copies)``."""
    return launch_cycle_s(launch, copies, launches, iters) * 1e3


def sweep(m: int, group: int, k: int) -> list[QGemmSchedule]:
    """The schedules tried at ``m`` rows: GEMV mode with deferred sums (its loads a step ahead or
    not) and the dot path at one row, the dot path with split-K at more (decode batches), the dot
    path at a prefill's rows."""
    if m == 1:  # GEMV mode (loads a step ahead, or not), then the dot path on 16 rows of which one is x
        space = [*((1, bn, bk, w, 2, 1, p) for p, bn, bk, w in itertools.product([1, 0], [16, 8, 32], [512, 1024, 256],
                                                                                 [4, 8])),
                 *itertools.product([16], [32, 64, 16], [128], [4], [4], [4, 8, 2, 1])]
    elif m <= 64:  # the dot path, split-K over K's steps
        space = itertools.product([16], [32, 16, 64], [128, 64], [4], [4, 3], [4, 8, 2, 1])
    else:  # likeliest first: the sweep is cut short by the budget
        space = [(128, 128, 64, 8, 3), (256, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 128, 128, 8, 3),
                 (256, 128, 128, 8, 2), (128, 128, 64, 4, 3), (64, 128, 128, 4, 3), (128, 128, 64, 8, 4),
                 (256, 64, 64, 8, 3), (128, 64, 128, 4, 3), (64, 256, 64, 8, 3)]
    fields = ("bm", "bn", "bk", "num_warps", "num_stages", "split_k", "prefetch")
    out = [QGemmSchedule(**dict(zip(fields, v, strict=False))) for v in space]
    out = [s for s in out if check_fits(s, group, k) is None]
    return [s for s in out if s.bm > 1 or s.bn * s.bk <= 16384]


def probe_row(name: str, n: int, k: int, m: int, a: argparse.Namespace, gen: torch.Generator,
              per_row_s: float) -> dict:
    """One projection at ``m`` rows: the sweep's schedules checked and timed, then the peers."""
    dev = "cuda"
    start = time.time()
    g = k // a.group
    q_bytes = n * k // 2 + 2 * n * g * 2
    copies = max(2, -(-2 * L2_BYTES // q_bytes))
    codes = [torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=dev, generator=gen)
             for _ in range(copies)]
    scales = [torch.rand((n, g), device=dev, generator=gen).to(torch.bfloat16) * 0.02 + 0.001
              for _ in range(copies)]
    mins = [-(torch.rand((n, g), device=dev, generator=gen) * 0.1).to(torch.bfloat16) for _ in range(copies)]
    x = torch.randn((m, k), device=dev, generator=gen).to(torch.bfloat16)
    y = torch.empty((m, n), device=dev, dtype=torch.bfloat16)
    # the dequantized first copy, for the check: low nibble is the even k
    lo, hi = (codes[0] & 15).float(), (codes[0] >> 4).float()
    q = torch.stack([lo, hi], dim=-1).reshape(n, k)
    w = (q.reshape(n, g, a.group) * scales[0].float()[:, :, None] + mins[0].float()[:, :, None]).reshape(n, k)
    want = x.float() @ w.T
    op = kernel_op(m, k, n, a.group)
    row: dict = {"shape": name, "n": n, "k": k, "m": m, "bytes": q_bytes,
                 "roofline_us": q_bytes / a.copy_rate * 1e6, "schedules": []}
    # a prefill kernel's rows carry seq, which this static-shape kernel's do not: its heuristic by hand
    heuristic = heuristic_schedule(op, "sm_90", m) if m <= 64 else QGemmSchedule(256, 128, min(a.group, 64), 8, 3)
    for s in [heuristic] + [s for s in sweep(m, a.group, k) if s != heuristic]:
        if time.time() - start > per_row_s:
            row["note"] = "sweep cut short by --budget-s"
            break
        try:
            ks = codegen.generate(op, "probe", s)
            fn = load_kernel(ks, interpret=False)
            gr = grid(ks, {})

            scratch = [torch.zeros([eval_dim(d, {}) for d in sc.shape], device=dev,
                                   dtype={"f32": torch.float32, "i32": torch.int32}[sc.dtype]) for sc in ks.scratch]

            def launch(i: int, fn=fn, gr=gr, ks=ks, scratch=scratch) -> None:  # type: ignore[no-untyped-def]
                fn[gr](x, codes[i], scales[i], mins[i], y, *scratch, **ks.constexprs, num_warps=ks.num_warps,
                       num_stages=ks.num_stages)

            launch(0)
            torch.cuda.synchronize()
            err = float((y.float() - want).abs().max() / want.abs().max())
            if err > 2e-2:
                row["schedules"].append({**s.to_dict(), "error": f"max rel error {err:.3g}"})
                continue
            us = graph_ms(launch, copies, a.launches, a.iters) * 1e3
            row["schedules"].append({**s.to_dict(), "us": us, "heuristic": s == heuristic})
        except Exception as e:  # noqa: BLE001 - a schedule that does not build or run is recorded
            row["schedules"].append({**s.to_dict(), "error": " ".join(str(e).split())[:200]})
    # peers: bf16 matmul, tinygemm
    wb = [torch.randn((n, k), device=dev, generator=gen).to(torch.bfloat16)
          for _ in range(max(2, -(-2 * L2_BYTES // (2 * n * k))))]
    row["bf16_us"] = graph_ms(lambda i: torch.matmul(x, wb[i].T, out=y), len(wb), a.launches, a.iters) * 1e3
    wb.clear()
    try:
        packed = [torch.ops.aten._convert_weight_to_int4pack(c, 8) for c in codes]
        sz = [torch.stack([s, mn], dim=-1).transpose(0, 1).contiguous()
              for s, mn in zip(scales, mins, strict=True)]

        def tiny(i: int) -> None:
            torch.ops.aten._weight_int4pack_mm(x, packed[i], a.group, sz[i])

        row["tinygemm_us"] = graph_ms(tiny, copies, a.launches, a.iters) * 1e3
    except Exception as e:  # noqa: BLE001
        row["tinygemm_error"] = " ".join(str(e).split())[:300]
    ok = [s for s in row["schedules"] if "us" in s]
    best = min(ok, key=lambda s: s["us"]) if ok else None
    row["best"] = best
    row["heuristic_us"] = next((s["us"] for s in ok if s["heuristic"]), None)
    tg = row.get("tinygemm_us", row.get("tinygemm_error"))
    sched = best and {f: v for f, v in best.items() if f not in ("us", "heuristic")}
    print(f"{name:8s} m={m:3d} n={n:6d} k={k:6d}: best {best and round(best['us'], 2)} us {sched}, heuristic "
          f"{row['heuristic_us'] and round(row['heuristic_us'], 2)}, tinygemm {tg}, bf16 {row['bf16_us']:.2f}, "
          f"roofline {row['roofline_us']:.2f} us; {len(ok)} of {len(row['schedules'])} schedules ran", flush=True)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="1,16,2048")
    p.add_argument("--group", type=int, default=128)
    p.add_argument("--launches", type=int, default=64)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--copy-rate", type=float, default=4.28e12, help="bytes/s of the roofline")
    p.add_argument("--budget-s", type=float, default=240, help="sweeping time, shared evenly by the shapes")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("error: qgemm_probe needs a CUDA GPU")
    dev = "cuda"
    rows = [int(r) for r in a.rows.split(",")]
    per_row_s = a.budget_s / (len(SHAPES_8B) * len(rows))
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "group": a.group, "rows": []}
    gen = torch.Generator(device=dev).manual_seed(0)
    for (name, (n, k)), m in itertools.product(SHAPES_8B.items(), rows):
        row = probe_row(name, n, k, m, a, gen, per_row_s)
        results["rows"].append(row)
        torch.cuda.empty_cache()
        if a.json:
            a.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
