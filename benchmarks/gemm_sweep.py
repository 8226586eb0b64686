"""Times the decode GEMM kernels of a Llama-3-8B-shaped model under a grid of schedules on the GPU:
the data behind the heuristic schedule until the tuner exists.

    python benchmarks/gemm_sweep.py --out sweep.json [--shape llama-3-8b] [--batch 1]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_preview import SHAPES, GpuWeights, build, copy_bandwidth, time_calls  # noqa: E402

from inferx.compiler.codegen.gemm import GemmSchedule, applies, generate  # noqa: E402
from inferx.compiler.codegen.tile import dim_code  # noqa: E402
from inferx.compiler.ir.ops_kernel import KernelOp  # noqa: E402
from inferx.compiler.ir.ops_tensor import WeightOp  # noqa: E402
from inferx.compiler.ir.types import TensorType  # noqa: E402
from inferx.runtime.triton_kernels import grid, load_kernel  # noqa: E402

TORCH = {"f32": torch.float32, "bf16": torch.bfloat16, "i32": torch.int32}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="sweep.json")
    ap.add_argument("--shape", default="llama-3-8b")
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args()
    raw = dict(SHAPES[args.shape], model_type="llama", architectures=["LlamaForCausalLM"], num_hidden_layers=1)
    cfg, module = build(raw, "bf16")
    func = next(f for f in module.ops if f.sym_name.data == "decode")
    g = torch.Generator(device="cuda").manual_seed(0)
    leaves = {}
    for op in module.walk():
        if isinstance(op, WeightOp) and op.attributes["name"].data not in leaves:
            t = op.result.type
            assert isinstance(t, TensorType)
            leaves[op.attributes["name"].data] = (torch.randn(tuple(t.shape), generator=g, device="cuda") * 0.02).to(
                torch.bfloat16)
    weights = GpuWeights(leaves)
    bw = copy_bandwidth()
    B, CTX = args.batch, 576
    env = {"batch": B, "seq": 1, "ctx": CTX}
    names = {f"S_{k}": v for k, v in env.items()}
    results = []
    kernels = [k for k in func.body.block.ops if isinstance(k, KernelOp) and applies(k) is None]
    for n, kop in enumerate(kernels):
        ins = []
        weight_bytes = 0
        for v in kop.operands:
            owner = v.owner
            if getattr(owner, "name", "") in ("ix.weight", "ix.concat", "ix.constant"):
                ins.append(weights.stored[weights.name_of(v)])
                weight_bytes += ins[-1].numel() * ins[-1].element_size()
                continue
            t = v.type
            shape = [int(eval(dim_code(d), {}, names)) for d in t.shape]  # noqa: S307
            if t.dtype.value == "i32":
                ins.append(torch.full(shape, 300, device="cuda", dtype=torch.int32))
            else:
                ins.append(torch.randn(shape, device="cuda").to(TORCH[t.dtype.value]))
        outs = []
        for r in kop.results:
            t = r.type
            shape = [int(eval(dim_code(d), {}, names)) for d in t.shape]  # noqa: S307
            outs.append(torch.empty(shape, device="cuda", dtype=TORCH[t.dtype.value]))
        candidates = [GemmSchedule(1, bn, bk, w, st) for bn, bk, w, st in
                      itertools.product((4, 8, 16, 32), (256, 512, 1024), (4,), (2, 3))]
        candidates += [GemmSchedule(16, bn, 128, 4, 3) for bn in (64, 128)]
        for sched in candidates:
            bm, bn, bk, warps, stages = sched.bm, sched.bn, sched.bk, sched.num_warps, sched.num_stages
            ks = generate(kop, f"k{n}_{bm}_{bn}_{bk}_{warps}_{stages}", sched)
            try:
                fn = load_kernel(ks, interpret=False)
                a = [ins[p.index] if p.kind == "in" else outs[p.index] if p.kind == "out" else env[p.symbol]
                     for p in ks.params]
                gr = grid(ks, env)
                kw = dict(ks.constexprs, num_warps=warps, num_stages=stages)
                ms = time_calls(lambda fn=fn, gr=gr, a=a, kw=kw: fn[gr](*a, **kw), reps=30)
            except Exception as e:  # a failing candidate is timed as infinity, never a crash
                ms = float("inf")
                print(f"kernel {n} {sched}: {type(e).__name__}: {str(e)[:200]}", flush=True)
            frac = weight_bytes / bw / (ms / 1e3) if ms != float("inf") else 0.0
            results.append({"kernel": n, "bm": bm, "bn": bn, "bk": bk, "warps": warps, "stages": stages, "ms": ms,
                            "weight_bytes": weight_bytes, "fraction_of_copy": frac})
            print(json.dumps(results[-1]), flush=True)
    Path(args.out).write_text(json.dumps({"copy_bytes_per_s": bw, "results": results}, indent=1))
    best = {}
    for r in results:
        if r["kernel"] not in best or r["ms"] < best[r["kernel"]]["ms"]:
            best[r["kernel"]] = r
    for k, r in sorted(best.items()):
        print(f"kernel {k}: best {r['ms']:.4f} ms at bm={r['bm']} bn={r['bn']} bk={r['bk']} warps={r['warps']} "
              f"stages={r['stages']} ({r['fraction_of_copy']:.0%} of copy rate)")


if __name__ == "__main__":
    main()
