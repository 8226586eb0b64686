"""Does a decode step gain when each kernel asks L2 for the next kernel's weights?

Stand-in kernels for the Llama-3.2-1B decode layer at batch 1 (``--layer``: MB each streaming
kernel reads, 0 for a latency-bound stand-in of decode attention), ``--layers`` of them and a
final stream for the lm_head, all over one buffer laid out in launch order, in one CUDA graph.
Each variant has every kernel ask L2 for the window of the weight stream right after its own
bytes (``cp.async.bulk.prefetch.L2``, one bulk request per thread, no registers held) from the
grid's first programs as they start or from its last ones as they end: DRAM is idle in every
kernel's tail, in each launch's ramp and through the attention stand-in, and those requests can
fill it. Timed per step (median of graph replays) beside the same chain without requests.

    python benchmarks/l2_prefetch_probe.py --windows 0,4,8,16,32 --out probe.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inferx.benchmark.floor import add_chain_args, chain_sizes, replay_times, write_probe  # noqa: E402

# One bulk request for L2 of $2 bytes at $1, none where $2 is 0.
PREFETCH_ASM = "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }"


def kernels() -> Any:
    import triton
    import triton.language as tl

    from inferx.benchmark.floor_kernel import dependent_loads

    PREFETCH = tl.constexpr(PREFETCH_ASM)

    @triton.jit
    def l2_window(w, w_bytes, AT: tl.constexpr, NT: tl.constexpr, REQ: tl.constexpr):  # type: ignore[no-untyped-def]
        """Ask L2 for ``w_bytes`` bytes at ``w`` in bulk requests of REQ bytes, one per thread, from
        the grid's first programs (AT 1: they start first) or its last (AT 2: they end last)."""
        pid = tl.program_id(0)
        g = tl.num_programs(0)
        reqs = tl.cdiv(w_bytes, REQ)
        first = 0 if AT == 1 else tl.maximum(g - tl.cdiv(reqs, NT), 0)
        idx = (pid - first) * NT + tl.arange(0, NT)
        live = (idx >= 0) & (idx < reqs)
        if tl.sum(live.to(tl.int32), 0) > 0:
            size = tl.where(live, REQ, 0).to(tl.int32)
            tl.inline_asm_elementwise(PREFETCH, "=r,l,r",
                                      [w + tl.where(live, idx, 0).to(tl.int64) * (REQ // 2), size], dtype=tl.int32,
                                      is_pure=False, pack=1)

    @triton.jit
    def stream(x, out, n, w, w_bytes, CHUNK: tl.constexpr, BLOCK: tl.constexpr, AT: tl.constexpr,  # type: ignore[no-untyped-def]
               NT: tl.constexpr, EVICT: tl.constexpr, REQ: tl.constexpr):
        pid = tl.program_id(0)
        if AT == 1:
            l2_window(w, w_bytes, AT, NT, REQ)
        base = pid.to(tl.int64) * CHUNK
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(0, CHUNK, BLOCK):
            offs = base + i + tl.arange(0, BLOCK)
            if EVICT:
                v = tl.load(x + offs, mask=offs < n, other=0, eviction_policy="evict_first")
            else:
                v = tl.load(x + offs, mask=offs < n, other=0)
            acc += v.to(tl.float32)
        tl.store(out + pid, tl.sum(acc))
        if AT == 2:
            l2_window(w, w_bytes, AT, NT, REQ)

    @triton.jit
    def latency(x, out, w, w_bytes, STEPS: tl.constexpr, AT: tl.constexpr, NT: tl.constexpr, REQ: tl.constexpr):  # type: ignore[no-untyped-def]
        """STEPS dependent 8 KB loads per program (each address waits on the last load's sum), then
        an arrival on a counter: a stand-in for split-KV decode attention's round trips."""
        pid = tl.program_id(0)
        if AT == 1:
            l2_window(w, w_bytes, AT, NT, REQ)
        dependent_loads(x, out, pid, STEPS)
        if AT == 2:
            l2_window(w, w_bytes, AT, NT, REQ)

    return stream, latency


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_chain_args(ap)
    ap.add_argument("--windows", default="0,4,8,16,32", help="MB each kernel asks L2 for past its own bytes")
    ap.add_argument("--at", default="start,end", help="where in each program the requests go")
    ap.add_argument("--evict", default="0,1", help="streams load with evict_first (1) or not (0)")
    ap.add_argument("--req", type=int, default=4096, help="bytes per bulk request (a multiple of 16)")
    ap.add_argument("--chunk-kb", type=int, default=16)
    args = ap.parse_args()
    if any(a not in ("start", "end") for a in args.at.split(",")) or args.req <= 0 or args.req % 16:
        sys.exit(f"l2_prefetch_probe: --at {args.at!r} / --req {args.req}: each of start, end / a positive "
                 "multiple of 16 bytes")
    import torch
    import triton

    if not torch.cuda.is_available():
        sys.exit("l2_prefetch_probe: needs a CUDA GPU")
    stream, latency = kernels()
    sizes = chain_sizes(args)
    chunk = args.chunk_kb * 512  # bf16 elements a program
    lat_programs = 128
    lat_elems = lat_programs * args.steps * 4096 + 4096
    elems = [int(mb * 1e6) // 2 // chunk * chunk if mb > 0 else lat_elems for mb in sizes]
    starts = [sum(elems[:i]) for i in range(len(elems))]
    total = sum(elems)
    buf = torch.randn(total + (64 << 20), dtype=torch.bfloat16, device="cuda")  # tail: windows past the end
    out = torch.empty(max(e // chunk for e in elems) + lat_programs, dtype=torch.float32, device="cuda")
    weight_bytes = 2 * total

    def chain(window_mb: float, at: int, evict: int) -> None:
        wb = int(window_mb * 1e6) if at else 0
        for mb, e, s in zip(sizes, elems, starts, strict=True):
            w = buf[s + e:]
            x = buf[s:]
            if mb > 0:
                stream[(e // chunk,)](x, out, e, w, wb, CHUNK=chunk, BLOCK=2048, AT=at, NT=256, EVICT=evict,
                                      REQ=args.req, num_warps=8)
            else:
                latency[(lat_programs,)](x, out, w, wb, STEPS=args.steps, AT=at, NT=128, REQ=args.req,
                                         num_warps=4)

    def timed(window_mb: float, at: int, evict: int) -> float:
        chain(window_mb, at, evict)
        torch.cuda.synchronize()
        return statistics.median(replay_times(lambda: chain(window_mb, at, evict), args.replays, 1))

    rows = []
    ats = {"start": 1, "end": 2}
    for evict in (int(e) for e in args.evict.split(",")):
        base = timed(0, 0, evict)
        rows.append({"window_mb": 0, "at": "none", "evict_first": evict, "s": base})
        print(f"evict_first {evict}: no requests {base * 1e3:.4f} ms ({weight_bytes / base / 1e12:.2f} TB/s over "
              f"{weight_bytes / 1e9:.3f} GB, {len(sizes)} launches)", flush=True)
        for name in args.at.split(","):
            for wmb in (float(w) for w in args.windows.split(",") if float(w) > 0):
                t = timed(wmb, ats[name], evict)
                rows.append({"window_mb": wmb, "at": name, "evict_first": evict, "s": t})
                print(f"evict_first {evict}: window {wmb:5.1f} MB at {name:5s} {t * 1e3:.4f} ms "
                      f"({(t - base) * 1e6:+7.1f} us, {(t - base) / len(sizes) * 1e6:+5.2f} a launch)", flush=True)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    write_probe(args.out, args, weight_bytes, rows)


if __name__ == "__main__":
    main()
