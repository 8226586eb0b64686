"""Decode attention over a paged KV cache beside the same kernel over a contiguous one, on the
Llama-3-8B shape (32 query heads, 8 KV heads, head_dim 128), for each block size.

The paged kernel reads each key's block from a block table whose entries are scattered over the
pool (as a pool in use holds them); the contiguous kernel reads one row per sequence. Each kernel
(the attention family's split-KV decode kernel, the heuristic schedule and a small sweep of BN,
SPLITS, warps and stages) is timed as the tuner times it: a CUDA graph of launches that cycle
through copies of the operands exceeding the L2, replayed after warm-up, CUDA events around each
replay, the median. Each is first checked against torch on the same operands (the paged cache
gathered through its table). The summary gives, per block size, the best paged time over the
best contiguous one (target: within 10% at batch 64, context 2048) and the byte floor (K and V
read once at ``--copy-rate``).

    python benchmarks/paged_attention.py --json benchmarks/results/paged_attention_h200_DATE.json
    python benchmarks/paged_attention.py --device cpu --dtype f16 --batches 2 --contexts 64 --heads 4,2,16 \\
        --blocks 8,16  # a check
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace
from pathlib import Path

import torch

from inferx.autotune.runner import cycled_launch_ms, operand_sets
from inferx.compiler.families.attention import codegen
from inferx.compiler.families.attention.codegen import AttentionSchedule
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.textio import parse_module
from inferx.runtime.plan import Launch, run
from inferx.runtime.triton_kernels import grid, load_kernel

L2_BYTES = 50 * 2**20
SWEEP = [(64, 16, 4, 2), (64, 8, 4, 2), (128, 8, 4, 2), (64, 4, 4, 2), (32, 16, 4, 2), (64, 1, 4, 2),
         (128, 16, 4, 3), (128, 4, 8, 2)]


def kernel_op(b: int, hq: int, hkv: int, d: int, ctx: int, block: int, dt: str = "bf16") -> KernelOp:
    """A decode attention kernel (one query per sequence, causal, kv_lens) over a contiguous cache
    (``block`` 0) or a pool of ``b * ctx / block`` blocks read through a block table."""
    q, pos, lens = f"!ix.tensor<[{b}, {hq}, 1, {d}], {dt}>", f"!ix.tensor<[{b}, 1], i32>", f"!ix.tensor<[{b}], i32>"
    if block:
        kv = f"!ix.tensor<[{b * ctx // block}, {hkv}, {block}, {d}], {dt}>"
        table = f"!ix.tensor<[{b}, {ctx // block}], i32>"
    else:
        kv, table = f"!ix.tensor<[{b}, {hkv}, {ctx}, {d}], {dt}>", ""
    ins = [q, kv, kv, pos, lens] + ([table] if block else [])
    args = ", ".join(f"%x{i}: {t}" for i, t in enumerate(ins))
    bargs = ", ".join(f"%a{i}: {t}" for i, t in enumerate(ins))
    paged, ptype = (" block_table %a5", f" block_table {table}") if block else ("", "")
    xs, types = ", ".join(f"%x{i}" for i in range(len(ins))), ", ".join(ins)
    attrs = f"{{causal, scale = {d ** -0.5} : f64}}"
    text = f"""
    func.func @f({args}) -> {q} {{
      %y = ix.kernel "attention"({xs}) {{name = "k0"}} : ({types}) -> {q} {{
      ^bb0({bargs}):
        %o = ix.attention %a0, %a1, %a2 positions %a3 kv_lens %a4{paged} {attrs} : {q}, {kv}, {kv} positions {pos}
          kv_lens {lens}{ptype} -> {q}
        ix.yield %o : {q}
      }}
      func.return %y : {q}
    }}
    """
    module, _ = parse_module(text)
    return next(o for o in module.walk() if isinstance(o, KernelOp))


def reference(args: tuple, ks, hq: int, hkv: int, block: int) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """softmax(q k^T / sqrt(d)) v in fp32 over the whole context (kv_lens = ctx, the query last),
    a paged cache's blocks gathered through its table first."""
    ins = {p.index: a for p, a in zip(ks.params, args, strict=True) if p.kind == "in"}
    q, k, v = ins[0].float(), ins[1].float(), ins[2].float()
    if block:
        table = ins[5].long()
        b, mb = table.shape

        def gather(pool: torch.Tensor) -> torch.Tensor:
            return pool[table].permute(0, 2, 1, 3, 4).reshape(b, pool.shape[1], mb * block, pool.shape[3])

        k, v = gather(k), gather(v)
    k, v = k.repeat_interleave(hq // hkv, 1), v.repeat_interleave(hq // hkv, 1)
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
    return p @ v


def measure(b: int, hq: int, hkv: int, d: int, ctx: int, block: int, sched: AttentionSchedule,
            a: argparse.Namespace) -> dict:
    kop = kernel_op(b, hq, hkv, d, ctx, block, a.dtype)
    ks = codegen.generate(kop, "attn", "cpu" if a.device == "cpu" else "sm_90", sched)
    env = {"seq": 1, "ctx": ctx}  # the shapes are static: this says the query is last, the context full
    fn = load_kernel(ks, interpret=a.device == "cpu")
    kwargs = dict(ks.constexprs, num_warps=ks.num_warps, num_stages=ks.num_stages)
    gr = grid(ks, env)
    torch.manual_seed(0)
    sets = operand_sets(kop, ks, env, L2_BYTES, a.device, count=None if a.device != "cpu" else 1)
    run([Launch(fn, gr, sets[0], kwargs)])
    out = next(x for p, x in zip(ks.params, sets[0], strict=True) if p.kind == "out").float()
    want = reference(sets[0], ks, hq, hkv, block)
    err = float((out - want).abs().max() / want.abs().max().clamp_min(1e-30))
    row = {"batch": b, "ctx": ctx, "block": block, "schedule": sched.to_dict(), "rel_err": round(err, 5)}
    if err > 2e-2:
        row["error"] = f"rel err {err:.3g} against torch"
        return row
    if a.device == "cpu":
        return row
    ms = cycled_launch_ms([Launch(fn, gr, args, kwargs) for args in sets], a.warmup, a.iters)
    row["us"] = round(ms * 1e3, 2)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", default="1,16,64")
    p.add_argument("--contexts", default="2048")
    p.add_argument("--blocks", default="8,16,32,64", help="block sizes of the paged cache")
    p.add_argument("--heads", default="32,8,128", help="query heads, KV heads, head_dim")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bf16", help="q, output and the cache (f16 on the cpu: Triton's "
                   "interpreter gets bf16 wrong)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--copy-rate", type=float, default=4.28e12, help="bytes/s for the floor")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    if a.device != "cpu" and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA device: run with --device cpu --dtype f16 (a check, not a timing)")
    hq, hkv, d = (int(x) for x in a.heads.split(","))
    elem = 1 if a.dtype == "f8e4m3" else (4 if a.dtype == "f32" else 2)
    rows: list[dict] = []
    summary: list[dict] = []
    start = time.perf_counter()
    for b in (int(x) for x in a.batches.split(",")):
        for ctx in (int(x) for x in a.contexts.split(",")):
            best: dict[int, float] = {}
            for block in [0, *(int(x) for x in a.blocks.split(","))]:
                if block and ctx % block:
                    continue
                kop = kernel_op(b, hq, hkv, d, ctx, block, a.dtype)
                heur = codegen.heuristic_schedule(kop, "cpu" if a.device == "cpu" else "sm_90", b)
                scheds = [heur] + ([] if a.device == "cpu" else
                                   [replace(heur, bn=bn, splits=sp, num_warps=w, num_stages=st)
                                    for bn, sp, w, st in SWEEP])
                for i, sched in enumerate(scheds):
                    row = measure(b, hq, hkv, d, ctx, block, sched, a) | {"heuristic": i == 0}
                    rows.append(row)
                    print(json.dumps(row), f"({time.perf_counter() - start:.0f} s)", flush=True)
                    if "us" in row:
                        best[block] = min(best.get(block, math.inf), row["us"])
            floor_us = 2 * b * hkv * ctx * d * elem / a.copy_rate * 1e6
            s = {"batch": b, "ctx": ctx, "floor_us": round(floor_us, 2), "best_us": best}
            if 0 in best:
                s["paged_over_contiguous"] = {k: round(v / best[0], 3) for k, v in best.items() if k}
            summary.append(s)
            print("summary", json.dumps(s), flush=True)
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
