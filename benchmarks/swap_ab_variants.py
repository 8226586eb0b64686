"""Swap-AB on the GEMM template's dot path, timed as source variants: each K step computes
``acc^T += W_tile @ x_tile^T``, so the weight tile is the MMA's M side (64 or 128 rows: wgmma
sized) and the few token rows its N side, the accumulators transposed back after the K loop and
the epilogue unchanged. On 16-row tiles Triton 3.6 emits ``mma.sync`` as built and ``wgmma``
swapped. Each variant is checked against the heuristic schedule's results and timed by the
tuner's runner, from each task's best record.

    python benchmarks/swap_ab_variants.py --shape 8b --rows 16
    python benchmarks/swap_ab_variants.py --shape 8b --rows 16 --dry   # compile for sm_90 only (no GPU)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def swap(src: str) -> str | None:
    """The kernel source with its K loop's dots swapped, or None where the edit does not apply."""
    at = re.search(r"\n +for k0 in ", src)
    if at is None:
        return None
    head, tail = src[: at.start()], src[at.start() :]
    head, n0 = re.subn(r"= tl\.zeros\(\(BM, BN\), dtype=tl\.float32\)", "= tl.zeros((BN, BM), dtype=tl.float32)", head)
    head, n1 = re.subn(r"= tl\.zeros\(\(BM, 2 \* BN\), dtype=tl\.float32\)",
                       "= tl.zeros((2 * BN, BM), dtype=tl.float32)", head)
    src, n2 = re.subn(r"(\w+) \+= tl\.dot\((\w+), (\w+)\)", r"\1 += tl.dot(tl.trans(\3), tl.trans(\2))", head + tail)
    if not n2 or not (n0 or n1):
        return None
    accs = sorted(set(re.findall(r"(\w+) \+= tl\.dot\(", src)))
    lines = src.split("\n")
    i = next(i for i, ln in enumerate(lines) if re.match(r" +for k0 in ", ln))
    ind = len(lines[i]) - len(lines[i].lstrip())
    j = next(j for j in range(i + 1, len(lines))
             if lines[j].strip() and len(lines[j]) - len(lines[j].lstrip()) <= ind)
    lines[j:j] = [" " * ind + f"{a} = tl.trans({a})" for a in accs]
    return "\n".join(lines)


def compile_sm90(ks: Any) -> str:
    """Compile for sm_90 here (no GPU): the MMA instructions and shared memory the variant takes."""
    os.environ["TRITON_INTERPRET"] = "0"
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from inferx.compiler.codegen.gemm import signature
    from inferx.runtime.triton_kernels import load_kernel

    sig = signature(ks)
    aligned = {(i,): [["tt.divisibility", 16]] for i, ty in enumerate(sig.values()) if ty.startswith("*")}
    c = triton.compile(ASTSource(fn=load_kernel(ks, interpret=False), signature=sig, constexprs=ks.constexprs,
                                 attrs=aligned), target=GPUTarget("cuda", 90, 64),
                       options={"num_warps": ks.num_warps, "num_stages": ks.num_stages})
    ptx = c.asm["ptx"]
    return f"wgmma {ptx.count('wgmma.mma_async')}, mma.sync {ptx.count('mma.sync')}, shared {c.metadata.shared} B"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="8b")
    ap.add_argument("--rows", type=int, default=16, help="a decode batch bucket (<= 64) or a prefill row bucket")
    ap.add_argument("--db", default="tuning_logs")
    ap.add_argument("--dry", action="store_true", help="compile for sm_90 and count MMA instructions; no GPU")
    args = ap.parse_args()
    from inferx.autotune.database import Database
    from inferx.autotune.extract import extract_tasks, fused_module
    from inferx.autotune.runner import LocalRunner, bench_env
    from inferx.autotune.space import HARDWARE
    from inferx.benchmark.shapes import make_config
    from inferx.compiler.codegen import generate

    db = Database.load(args.db, "h200")
    with tempfile.TemporaryDirectory() as d:
        make_config(args.shape).save_pretrained(d)
        module = fused_module(d, "bf16")
    rows = args.rows
    ex = extract_tasks(module, max_seq_len=4096, batches=(rows,) if rows <= 64 else (1,))
    vocab = make_config(args.shape).vocab_size
    for tt in (t for t in ex.tasks if t.task.template == "gemm" and t.task.rows == rows and t.task.n != vocab):
        best = db.best(tt.task)
        sched = best[0] if best else None
        if sched is None or sched.gemv:
            print(f"{tt.task}: no dot-path record", flush=True)
            continue
        base = generate(tt.kernel, "k", "sm_90", sched, grid_dependency=False)
        swapped = swap(base.source)
        variants = {"as built": (base, base.source), "swap-AB": (base, swapped)}
        for st in (sched.num_stages + 2, sched.num_stages + 4):
            variants[f"swap-AB, {st} stages"] = (dataclasses.replace(base, num_stages=st), swapped)
        for w in (4, 8):
            if sched.bm == 16 and w != sched.num_warps:
                variants[f"swap-AB, {w} warps"] = (dataclasses.replace(base, num_warps=w), swapped)
        runner = None if args.dry else LocalRunner({tt.task.key: tt.kernel}, hw=HARDWARE["h200"], repeats=25)
        env = bench_env(tt.task)
        print(f"{tt.task}  schedule {sched.to_dict()}", flush=True)
        for name, (ks0, src) in variants.items():
            if src is None:
                print(f"  {name}: the edit does not apply", flush=True)
                continue
            ks = dataclasses.replace(ks0, source=src)
            try:
                if runner is None:
                    print(f"  {name:32s} {compile_sm90(ks)}", flush=True)
                    continue
                wrong = runner.wrong_results(tt.task, tt.kernel, ks, env)
                times = runner.time_kernel(tt.kernel, ks, env)
                print(f"  {name:32s} {statistics.median(times) * 1e3:8.2f} us  {wrong or 'right'}", flush=True)
            except Exception as e:  # out of shared memory, a failed build: reported, the sweep goes on
                print(f"  {name}: {type(e).__name__}: {str(e)[:200]}", flush=True)


if __name__ == "__main__":
    main()
