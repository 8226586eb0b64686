"""The compiler's GEMM kernels beside cuBLAS (``torch.nn.functional.linear``) on the same GPU, in
the same process, on operands of the same shapes: the measurement behind the tuner's acceptance.

For each projection of a Llama-shaped model (qkv, o, gate|up, down, and lm_head with
``--lm-head``) and each row count M, the kernel the compiler would generate, in the form most
layers run it (decode kernel at M <= 64, with the schedule of M's batch bucket; prefill kernel
above, one sequence of M tokens, with the schedule of M's row bucket), with the tuning
database's best record for its task where there is one, else the heuristic schedule. Our kernels
include their fused prologues and epilogues (RMSNorm, RoPE, KV-cache writes, SiLU*up, residual
adds): cuBLAS runs the bare product, so the comparison leans its way. With ``--plain`` ours run
the bare products too (``shapes.plain_gemm_module``: the projections with nothing folded in,
with their own tasks and records): like for like.

Both sides are timed alike: a CUDA graph of launches over rotated operand copies (the L2 never
holds the next launch's operands), replayed after warm-up, CUDA events, median per launch.

    python benchmarks/gemm_vs_cublas.py --shape 8b --rows 1,16,128,4096 --db tuning_logs --out r.json
    python benchmarks/gemm_vs_cublas.py --shape 8b --plain --db tuning_logs --out plain.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROJECTIONS = ("qkv", "o", "gate_up", "down", "lm_head")


def projection(task: Any, hidden: int, inter: int, vocab: int, qkv: int = 0) -> str | None:
    """Which projection of a decoder a GEMM task is, from its K and N (``qkv``: the qkv
    projection's N, where a bare GEMM has no prologue to tell it by)."""
    if task.k == hidden and task.n == vocab:
        return "lm_head"
    if task.k == hidden and task.n == 2 * inter:
        return "gate_up"
    if task.k == inter and task.n == hidden:
        return "down"
    if task.k == hidden and task.n == hidden:
        return "o"
    if task.k == hidden and (task.prologue != "none" or task.n == qkv):
        return "qkv"
    return None


def cublas_ms(m: int, k: int, n: int, warmup: int, repeats: int, l2_bytes: int) -> list[float]:
    import torch

    from inferx.autotune.runner import graph_times, launches_per_graph, rotation_count

    sets = rotation_count((m * k + n * k + m * n) * 2, l2_bytes)
    ops = [((torch.randn(m, k, device="cuda") * 0.02).to(torch.bfloat16),
            (torch.randn(n, k, device="cuda") * 0.02).to(torch.bfloat16)) for _ in range(sets)]
    outs = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    per = launches_per_graph(sets)

    def run() -> None:
        for j in range(per):
            x, w = ops[j % sets]
            torch.matmul(x, w.t(), out=outs[j % sets])

    run()
    torch.cuda.synchronize()
    return graph_times(run, per, warmup, repeats)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="8b")
    ap.add_argument("--rows", default="1,16,128,4096")
    ap.add_argument("--db", default="tuning_logs", help="tuning database root ('' for heuristics only)")
    ap.add_argument("--target", default="h200")
    ap.add_argument("--lm-head", action="store_true")
    ap.add_argument("--plain", action="store_true", help="ours as bare GEMMs too (no fused prologue or epilogue)")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    import torch

    from inferx.autotune.extract import fused_module
    from inferx.autotune.runner import LocalRunner
    from inferx.benchmark.shapes import SHAPES, make_config, plain_gemm_module, projections
    from inferx.compiler.codegen import generate
    from inferx.compiler.database import Database
    from inferx.compiler.families.common.hardware import HARDWARE
    from inferx.compiler.families.common.keys import rows_bucket
    from inferx.compiler.families.gemm.heuristic import heuristic_schedule
    from inferx.compiler.families.gemm.task import gemm_task, shape_of
    from inferx.compiler.ir.ops_kernel import KernelOp

    hw = HARDWARE[args.target]
    cfg = SHAPES[args.shape]
    hidden, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    if args.plain and args.lm_head:
        sys.exit("gemm_vs_cublas: --plain covers the four projections of a layer, not --lm-head")
    if args.plain:
        module = fused_module(plain_gemm_module(args.shape))
    else:
        with tempfile.TemporaryDirectory() as d:
            make_config(args.shape).save_pretrained(d)
            module = fused_module(d, "bf16")
    qkv_n = projections(args.shape)["qkv"][0]
    db = Database.load(args.db, args.target) if args.db else None
    # Each projection's kernel as most layers run it (the first layer's qkv computes its norm
    # statistics itself; the others are given them by the previous layer's down GEMM).
    found: dict[tuple[str, str], dict[str, tuple[int, KernelOp]]] = {}
    for op in module.walk():
        if isinstance(op, KernelOp) and op.template.data == "gemm":
            task = gemm_task(op, 1)
            name = projection(task, hidden, inter, 0 if args.plain else vocab, qkv_n)  # plain: no LM head
            if name is not None:
                forms = found.setdefault((name, shape_of(op)), {})
                count, first = forms.get(task.key, (0, op))
                forms[task.key] = (count + 1, first)
    kernels = {key: max(forms.values(), key=lambda f: f[0])[1] for key, forms in found.items()}
    wanted = [p for p in PROJECTIONS if p != "lm_head" or args.lm_head]
    runner = LocalRunner({}, hw=hw, repeats=args.repeats)
    rows_list = [int(x) for x in args.rows.split(",")]
    results: list[dict[str, Any]] = []
    print(f"{'gemm':8s} {'M':>5s} {'K':>6s} {'N':>6s} {'ours us':>9s} {'cuBLAS us':>9s} {'ratio':>6s} "
          f"{'TFLOP/s':>8s} {'TB/s':>6s}  schedule", flush=True)
    for name in wanted:
        for m in rows_list:
            shape = "decode" if m <= 64 else "prefill"
            kop = kernels.get((name, shape))
            if kop is None:
                print(f"{name}: no {shape} kernel", flush=True)
                continue
            task = gemm_task(kop, m)
            best = db.best(task) if db is not None else None
            if best is not None:
                sched, origin = best[0], "tuned"
            else:
                sched = heuristic_schedule(kop, "sm_90", rows_bucket(m))
                origin = "heuristic"
            ks = generate(kop, f"{name}_m{m}", "sm_90", sched, grid_dependency=False)
            env = ({"batch": m, "seq": 1, "ctx": 576} if shape == "decode"
                   else {"batch": 1, "seq": m, "ctx": max(576, m)})
            try:
                ours = statistics.median(runner.time_kernel(kop, ks, env))
            except Exception as e:  # report and go on
                print(f"{name} M={m}: ours failed: {type(e).__name__}: {e}", flush=True)
                ours = math.inf
            k, n = task.k, task.n
            ref = statistics.median(cublas_ms(m, k, n, 3, args.repeats, hw.l2_bytes))
            flops = 2.0 * m * k * n
            nbytes = 2.0 * (m * k + k * n + m * n)
            row = {"gemm": name, "M": m, "K": k, "N": n, "ours_ms": ours, "cublas_ms": ref,
                   "speedup_vs_cublas": ref / ours if ours > 0 else 0.0, "schedule": sched.to_dict(),
                   "origin": origin, "task": task.to_json(),
                   "ours_tflops": flops / ours / 1e9, "cublas_tflops": flops / ref / 1e9,
                   "ours_tbps": nbytes / ours / 1e9}
            results.append(row)
            print(f"{name:8s} {m:5d} {k:6d} {n:6d} {ours * 1e3:9.1f} {ref * 1e3:9.1f} {ref / ours:6.2f} "
                  f"{flops / ours / 1e9:8.1f} {nbytes / ours / 1e9:6.2f}  {origin} {sched.to_dict()}",
                  flush=True)
    ratios: list[float] = [r["speedup_vs_cublas"] for r in results if r["speedup_vs_cublas"] > 0]
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else 0.0
    print(f"geomean speedup vs cuBLAS over {len(ratios)} GEMMs: {geo:.3f}; lowest {min(ratios, default=0):.3f}",
          flush=True)
    env_info = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    try:
        import triton

        env_info["triton"] = triton.__version__
    except ImportError:
        pass
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"shape": args.shape, "plain": args.plain, "environment": env_info,
                                    "geomean_speedup": geo, "results": results, "db": args.db}, indent=1))


if __name__ == "__main__":
    main()
