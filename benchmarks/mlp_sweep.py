"""The fused decode MLP (``--fuse-mlp``: one kernel for gate|up, SiLU*up, down and the residual add)
beside the two kernels it replaces, on the same GPU in the same process: whether fusing pays, and
on which schedule.

For a Llama shape at one decode batch: the unfused gate|up and down kernels, each on the tuning
database's best record for its task (else its heuristic schedule), and the fused kernel on its
heuristic schedule and on each schedule of a grid (BI, BK = BN, warps, stages) that the tuner's
space accepts (``inferx.compiler.families.mlp.space.MlpSpace``). Each fused schedule, the heuristic included, is checked
against torch on the same operands over six launches on one scratch (relative L2 within 2e-2,
bf16: ``inferx.benchmark.fused_check``); every kernel is timed as the tuner times one (a CUDA
graph of launches over rotated operand copies, so the L2 never holds the next launch's weights;
median per launch). Printed beside each: its weight bytes over its time, and the launch floor
(plain streaming kernels of those bytes, measured first: ``inferx.benchmark.floor``).

    python benchmarks/mlp_sweep.py --shape 1b --batch 1 --db tuning_logs --out r.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def grid(task: Any, bis: list[int], steps: list[int], warps: list[int], stages: list[int],
         prefetch: Sequence[int] = (1,), dot: Sequence[int] = (0,), defer: Sequence[int] = (0,)) -> list[Any]:
    """The fused schedules of the grid (BK = BN) that the tuner's space accepts for ``task``."""
    from inferx.compiler.families.mlp.codegen import MlpSchedule
    from inferx.compiler.families.mlp.space import MlpSpace, mlp_bm

    space, bm = MlpSpace(), mlp_bm(task)
    out = []
    for bi, step, w, st, pf, d, df in itertools.product(bis, steps, warps, stages, prefetch, dot, defer):
        s = MlpSchedule(bm, bi, step, step, num_warps=w, num_stages=st, prefetch=pf, dot=d, defer=df)
        if space.why_invalid(task, s.to_dict()) is None:
            out.append(s)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="1b")
    ap.add_argument("--batch", type=int, default=1, help="decode rows (1-8)")
    ap.add_argument("--db", default="tuning_logs", help="tuning database root ('' for heuristics only)")
    ap.add_argument("--target", default="h200")
    ap.add_argument("--bi", default="32,64,128")
    ap.add_argument("--steps", default="64,128,256", help="BK = BN values")
    ap.add_argument("--warps", default="8,16")
    ap.add_argument("--stages", default="1,2")
    ap.add_argument("--prefetch", default="1", help="0 (each step's loads after the last's products), 1, or both")
    ap.add_argument("--dot", default="0", help="1: products on tensor cores, loads pipelined by stages (0, 1, or both)")
    ap.add_argument("--defer", default="0", help="1: the first loop's reduction over K after the loop (0, 1, or both)")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    import torch

    from inferx.autotune.extract import fused_module
    from inferx.autotune.runner import LocalRunner
    from inferx.benchmark.floor import measure_launch_floor
    from inferx.benchmark.fused_check import mlp_errors
    from inferx.benchmark.shapes import make_config
    from inferx.compiler.codegen import generate
    from inferx.compiler.database import Database
    from inferx.compiler.families.common.hardware import HARDWARE
    from inferx.compiler.families.common.keys import rows_bucket
    from inferx.compiler.families.gemm import heuristic as gemm_heuristic
    from inferx.compiler.families.gemm.task import gemm_task
    from inferx.compiler.families.mlp import codegen as mlp
    from inferx.compiler.families.mlp.task import mlp_task
    from inferx.compiler.ir.ops_kernel import KernelOp
    from inferx.compiler.pipeline import registry
    from inferx.passes.pipeline import PassManager, parse

    hw = HARDWARE[args.target]
    with tempfile.TemporaryDirectory() as d:
        make_config(args.shape).save_pretrained(d)
        plain = fused_module(d, "bf16")
    fused = plain.clone()
    PassManager(parse("fuse-decode-mlp", registry())).run(fused)
    mlps = [o for o in fused.walk() if isinstance(o, KernelOp) and o.template.data == "mlp"]
    if not mlps:
        sys.exit(f"mlp_sweep: no decode MLP of the {args.shape} shape fuses")
    kop = mlps[len(mlps) // 2]  # a middle layer's (every layer's is the same kernel)
    parts = mlp.parts(kop)
    assert not isinstance(parts, str)
    # The two kernels it replaced: the decode GEMMs with the gate|up and the down weights' shapes
    pair: dict[str, KernelOp] = {}
    for op in plain.walk():
        if isinstance(op, KernelOp) and op.template.data == "gemm":
            task = gemm_task(op, args.batch)
            if task.shape == "decode" and (task.k, task.n) == (parts.k, 2 * parts.i):
                pair.setdefault("gate_up", op)
            elif task.shape == "decode" and (task.k, task.n) == (parts.i, parts.n):
                pair.setdefault("down", op)
    db = Database.load(args.db, args.target) if args.db else None
    env = {"batch": args.batch, "seq": 1, "ctx": 576}
    runner = LocalRunner({}, hw=hw, repeats=args.repeats)
    floor = measure_launch_floor()
    print(f"launch floor: {floor.launch_s * 1e6:.2f} us per launch + bytes / {floor.read_bytes_per_s / 1e12:.2f} TB/s",
          flush=True)
    rows: list[dict[str, Any]] = []

    def report(name: str, k: KernelOp, ks: Any, sched: Any, nbytes: int, origin: str) -> float:
        try:
            ms = statistics.median(runner.time_kernel(k, ks, env))
        except Exception as e:  # a failing candidate is reported and skipped
            print(f"{name:10s} {sched.to_dict()}: failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
            return math.inf
        fl = floor.kernel_s(nbytes) * 1e3
        rows.append({"kernel": name, "schedule": sched.to_dict(), "origin": origin, "ms": ms, "bytes": nbytes,
                     "floor_ms": fl})
        print(f"{name:10s} {ms * 1e3:8.1f} us  floor {fl * 1e3:6.1f}  {nbytes / ms / 1e9:5.2f} TB/s  {origin} "
              f"{sched.to_dict()}", flush=True)
        return ms

    item = 2  # bf16 weights
    w_gate_up, w_down = 2 * parts.i * parts.k * item, parts.n * parts.i * item
    total = 0.0
    for name, nbytes in (("gate_up", w_gate_up), ("down", w_down)):
        if name not in pair:
            sys.exit(f"mlp_sweep: no unfused {name} kernel found")
        task = gemm_task(pair[name], args.batch)
        best = db.best(task) if db is not None else None
        sched, origin = (best[0], "tuned") if best else (gemm_heuristic.heuristic_schedule(pair[name], "sm_90",
                                                                                  rows_bucket(args.batch)), "heuristic")
        total += report(name, pair[name], generate(pair[name], f"{name}_b{args.batch}", "sm_90", sched,
                                                   grid_dependency=False), sched, nbytes, origin)
    print(f"{'pair':10s} {total * 1e3:8.1f} us  floor {floor.chain_s(2, w_gate_up + w_down) * 1e6:6.1f}", flush=True)

    def checked(sched: Any, origin: str) -> float:
        """The schedule timed if its outputs match torch over six launches, else reported."""
        try:
            ks = generate(kop, f"mlp_{origin}", "sm_90", sched, grid_dependency=False)
            errs = mlp_errors(kop, ks, env)
        except Exception as e:  # a failing candidate is reported and skipped
            print(f"mlp        {sched.to_dict()}: failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
            return math.inf
        if not max(errs) <= 2e-2:
            wrong = sum(not e <= 2e-2 for e in errs)
            print(f"mlp        {sched.to_dict()}: wrong results in {wrong} of {len(errs)} launches (relative L2 "
                  f"against torch up to {max(errs):.3g}); repro: python3 benchmarks/mlp_sweep.py --shape {args.shape} "
                  f"--batch {args.batch} --bi {sched.bi} --steps {sched.bk} --warps {sched.num_warps} "
                  f"--stages {sched.num_stages} --prefetch {sched.prefetch} --dot {sched.dot} --defer {sched.defer} "
                  "--out /tmp/sweep.json",
                  flush=True)
            return math.inf
        return report("mlp", kop, ks, sched, w_gate_up + w_down, origin)

    heuristic = mlp.heuristic_schedule(kop, "sm_90", args.batch)
    best_ms = checked(heuristic, "heuristic")
    for sched in grid(mlp_task(kop, args.batch), int_list(args.bi), int_list(args.steps), int_list(args.warps),
                      int_list(args.stages), int_list(args.prefetch), int_list(args.dot), int_list(args.defer)):
        if sched != heuristic:
            best_ms = min(best_ms, checked(sched, "grid"))
    print(f"fused best {best_ms * 1e3:.1f} us against the pair's {total * 1e3:.1f} us ({total / best_ms:.2f}x)",
          flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "shape": args.shape, "batch": args.batch, "db": args.db,
        "environment": {"device": torch.cuda.get_device_name(), "torch": torch.__version__},
        "launch_floor": {"launch_s": floor.launch_s, "read_bytes_per_s": floor.read_bytes_per_s},
        "pair_ms": total, "fused_best_ms": best_ms, "results": rows}, indent=1))


if __name__ == "__main__":
    main()
