"""Prefill GEMM and attention kernels of Llama-shaped models under a fixed grid of schedules,
beside cuBLAS for the GEMMs: the data behind the prefill heuristics.

Each prefill task of the shape (as ``inferx tune`` extracts it, rows bucket of a 2048-token
prompt: 4096) is built and timed by the tuner's local runner (parallel builds, a CUDA graph over
rotated operand copies, medians); cuBLAS (``torch.matmul`` into a preallocated output) runs the
bare product of the same M, K, N. Attention FLOPs count the causal half.

    python benchmarks/prefill_sweep.py --shapes 1b,8b --out sweep.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

GEMM = [dict(bm=128, bn=128, bk=64, num_warps=8, num_stages=3), dict(bm=128, bn=64, bk=64, num_warps=8, num_stages=3),
        dict(bm=128, bn=128, bk=64, num_warps=8, num_stages=4), dict(bm=64, bn=128, bk=64, num_warps=4, num_stages=4),
        dict(bm=128, bn=256, bk=64, num_warps=8, num_stages=3), dict(bm=128, bn=128, bk=128, num_warps=8, num_stages=3),
        dict(bm=256, bn=128, bk=64, num_warps=8, num_stages=3)]
ATTENTION = [dict(bm=64, bn=32, num_warps=4, num_stages=2), dict(bm=128, bn=64, num_warps=8, num_stages=3),
             dict(bm=128, bn=64, num_warps=4, num_stages=3), dict(bm=64, bn=64, num_warps=4, num_stages=3),
             dict(bm=128, bn=128, num_warps=8, num_stages=3), dict(bm=128, bn=32, num_warps=8, num_stages=3)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="1b,8b")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    from gemm_vs_cublas import cublas_ms

    from inferx.autotune.extract import extract_tasks, fused_module
    from inferx.autotune.runner import LocalRunner
    from inferx.benchmark.shapes import make_config

    results = []
    for shape in args.shapes.split(","):
        with tempfile.TemporaryDirectory() as d:
            make_config(shape).save_pretrained(d)
            extraction = extract_tasks(fused_module(d, "bf16"), 2048)
        tasks = [t for t in extraction.tasks if t.task.shape == "prefill"]
        runner = LocalRunner({t.task.key: t.kernel for t in tasks if t.kernel is not None}, jobs=16, repeats=10)
        try:
            for tt in tasks:
                task = tt.task
                started = time.time()
                schedules = ATTENTION if task.template == "attention" else GEMM
                measured = runner.measure(task, schedules)
                m = task.rows
                if task.template == "gemm":
                    flops = 2.0 * m * task.k * task.n  # type: ignore[union-attr]
                    ref = statistics.median(cublas_ms(m, task.k, task.n, 3, 10, 50 << 20))  # type: ignore[union-attr]
                    print(f"{shape} {task}  [{time.time() - started:.0f}s] cuBLAS {ref * 1e3:.1f} us "
                          f"{flops / ref / 1e9:.0f} TFLOP/s", flush=True)
                    results.append({"shape": shape, "task": task.to_json(), "cublas_ms": ref})
                else:
                    flops = 4.0 * m * m / 2 * task.head_dim * task.q_heads  # type: ignore[union-attr]
                    print(f"{shape} {task}  [{time.time() - started:.0f}s]", flush=True)
                for s, r in zip(schedules, measured, strict=True):
                    rate = flops / r.median_ms / 1e9 if r.ok else 0.0
                    print(f"   {s}: {r.median_ms * 1e3:9.1f} us {rate:6.0f} TFLOP/s {r.error[:150]}", flush=True)
                    results.append({"shape": shape, "task": task.to_json(), "schedule": s, "ms": r.median_ms,
                                    "error": r.error})
        finally:
            runner.close()
    args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
