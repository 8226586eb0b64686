"""The floor under a decode step's kernels: the time per launch of a chain of plain streaming
kernels in one CUDA graph, by the bytes each reads. Each kernel only reads its buffer (bf16,
16-byte loads) and writes one sum per program, so what it takes beyond bytes / copy rate is the
fixed cost any kernel of the step pays: launch in the graph, ramp-up to full bandwidth, the last
wave's tail. A fit of ``t = t0 + bytes / BW`` over the sizes from 8 MB up gives both.

The chain reads a different buffer at each launch (``--chain`` of them), so L2 never holds the
next launch's bytes, as in a decode step where each kernel streams its own weights. Times are
medians over graph replays after warm-up, CUDA events. Sizes default to the Llama-3.2-1B and
Llama-3-8B decode GEMMs' weights (qkv 12.6 and 50.3 MB, o 8.4 and 33.6, gate/up 67.1 and 234.9,
down 33.6 and 117.4) and an empty kernel (0 MB).

    python benchmarks/launch_floor.py --out floor.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIZES_MB = (0.0, 1.0, 4.0, 8.4, 12.6, 33.6, 50.3, 67.1, 117.4, 234.9)
# Bytes one program reads: 16 KB (many programs, as the compiler's GEMVs of BN 4 rows x K 2048)
# and 64 KB (fewer, longer programs)
CHUNKS_KB = (16, 64)


@triton.jit
def read_sum(x, out, n, CHUNK: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    """Program i sums elements [i * CHUNK, (i + 1) * CHUNK) of x (n of them in all) into out[i]."""
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * CHUNK
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, CHUNK, BLOCK):
        offs = base + i + tl.arange(0, BLOCK)
        acc += tl.load(x + offs, mask=offs < n, other=0).to(tl.float32)
    tl.store(out + pid, tl.sum(acc))


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """``t = t0 + b / bw`` over (bytes, seconds), robust to a stray size (Theil-Sen: the median of
    the pairwise slopes, then the median intercept): (t0 seconds, bw bytes/s)."""
    slope = statistics.median((t2 - t1) / (b2 - b1) for i, (b1, t1) in enumerate(points)
                              for b2, t2 in points[i + 1:] if b2 != b1)
    return statistics.median(t - slope * b for b, t in points), 1.0 / slope


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES_MB), help="MB each launch reads")
    ap.add_argument("--chunks", default=",".join(str(c) for c in CHUNKS_KB), help="KB each program reads")
    ap.add_argument("--chain", type=int, default=16, help="launches (and buffers) per graph")
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--out", default=None, help="write the measurements as JSON here")
    args = ap.parse_args()
    try:
        sizes = [float(s) for s in args.sizes.split(",")]
        chunks = [int(c) for c in args.chunks.split(",")]
    except ValueError:
        sys.exit(f"launch_floor: --sizes {args.sizes!r} / --chunks {args.chunks!r}: expected numbers, e.g. 1,12.6 / 16")
    if any(c <= 0 or c % 4 for c in chunks):
        sys.exit(f"launch_floor: --chunks {args.chunks!r}: each a multiple of 4 KB (one 2048-element bf16 block)")

    import torch

    if not torch.cuda.is_available():
        sys.exit("launch_floor: needs a CUDA GPU")

    from inferx.benchmark.roofline import measure_ceilings

    copy = measure_ceilings("cuda").copy_bytes_per_s
    rows: list[dict[str, Any]] = []
    for chunk_kb in chunks:
        chunk = chunk_kb * 1024 // 2  # bf16 elements
        for mb in sizes:
            n = int(mb * 1e6) // 2
            programs = max(1, -(-n // chunk)) if n else 132
            bufs = [torch.ones(max(n, 1), dtype=torch.bfloat16, device="cuda") for _ in range(args.chain)]
            out = torch.empty(programs, dtype=torch.float32, device="cuda")

            def chain(bufs: list[Any] = bufs, out: Any = out, n: int = n, chunk: int = chunk,
                      programs: int = programs) -> None:
                for b in bufs:
                    read_sum[(programs,)](b, out, n, CHUNK=chunk if n else 0, BLOCK=2048, num_warps=8)

            chain()  # compiles
            torch.cuda.synchronize()
            if n and abs(out.sum().item() - n) > 1e-3 * n:
                sys.exit(f"launch_floor: the read kernel summed {out.sum().item()} for {n} ones")
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                chain()
            for _ in range(3):
                graph.replay()
            times = []
            for _ in range(args.replays):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                graph.replay()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3 / args.chain)
            t = statistics.median(times)
            rows.append({"chunk_kb": chunk_kb, "mb": mb, "bytes": 2 * n, "programs": programs, "s_per_launch": t,
                         "bytes_per_s": 2 * n / t, "over_copy_s": t - 2 * n / copy})
            print(f"chunk {chunk_kb:3d} KB  {mb:7.1f} MB  {programs:6d} programs  {t * 1e6:8.2f} us  "
                  f"{2 * n / t / 1e12:5.2f} TB/s  {(t - 2 * n / copy) * 1e6:6.2f} us over bytes/copy", flush=True)
            del bufs, out, graph
            torch.cuda.empty_cache()
    fits = {}
    for chunk_kb in chunks:
        pts = [(r["bytes"], r["s_per_launch"]) for r in rows if r["chunk_kb"] == chunk_kb and r["mb"] >= 8]
        if len(pts) >= 2:
            t0, bw = fit(pts)
            fits[str(chunk_kb)] = {"t0_s": t0, "bytes_per_s": bw}
            print(f"chunk {chunk_kb} KB: t = {t0 * 1e6:.2f} us + bytes / {bw / 1e12:.2f} TB/s (sizes >= 8 MB)")
    print(f"copy {copy / 1e12:.2f} TB/s; {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"triton {triton.__version__}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "copy_bytes_per_s": copy,
                                              "torch": torch.__version__, "triton": triton.__version__,
                                              "chain": args.chain, "rows": rows, "fits": fits}, indent=1))


if __name__ == "__main__":
    main()
