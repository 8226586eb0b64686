"""The floor under a decode step's kernels: the time per launch of a chain of plain streaming
kernels in one CUDA graph, by the bytes each reads and the bytes each program reads
(``inferx.benchmark.floor``: ``read_sum`` kernels over distinct buffers, so L2 never holds the
next launch's bytes). What a launch takes beyond bytes / read rate is the fixed cost any kernel
of the step pays: its launch in the graph, the ramp to full bandwidth, the last wave's tail. A
fit of ``t = t0 + bytes / BW`` over the sizes from 8 MB up gives both (Theil-Sen: one stray size
does not move it).

Sizes default to the Llama-3.2-1B and Llama-3-8B decode GEMMs' weights (qkv 12.6 and 50.3 MB, o
8.4 and 33.6, gate/up 67.1 and 234.9, down 33.6 and 117.4) and an empty kernel (0 MB).

    python benchmarks/launch_floor.py --chunks 8,16,32 --out floor.json

With ``--phases P``: whether a grid-wide barrier costs less than a kernel boundary. For each size
(and each chunk), P launches of the streaming kernel in one graph, against one persistent launch
(``--per-sm`` programs per SM, every one resident) that streams the same P regions one after
another, with a barrier between regions (arrivals counted on a global counter, polled with
acquire loads), without one, and with one where each program loads its first ``--ahead``
chunks of the next region before it waits (as a persistent decode layer could load its next
weights):

    python benchmarks/launch_floor.py --sizes 8.4,12.6,33.6 --chunks 16 --phases 16 --per-sm 1,2,4 --ahead 1,2,4
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIZES_MB = (0.0, 1.0, 4.0, 8.4, 12.6, 33.6, 50.3, 67.1, 117.4, 234.9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES_MB), help="MB each launch reads")
    ap.add_argument("--chunks", default="16,64", help="KB each program reads (multiples of 4)")
    ap.add_argument("--chain", type=int, default=16, help="launches (and buffers) per graph")
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--phases", type=int, default=0, help="also time P phases of a persistent grid (0: no)")
    ap.add_argument("--per-sm", default="1,2", help="programs per SM of the persistent grid (with --phases)")
    ap.add_argument("--ahead", default="1", help="chunks of the next region loaded before each wait (with --phases; "
                    "powers of 2, e.g. 1,2,4)")
    ap.add_argument("--out", default=None, help="write the measurements as JSON here")
    args = ap.parse_args()
    try:
        sizes = [float(s) for s in args.sizes.split(",")]
        chunks = [int(c) for c in args.chunks.split(",")]
        per_sm = [int(c) for c in args.per_sm.split(",")]
        aheads = [int(c) for c in args.ahead.split(",")]
    except ValueError:
        sys.exit(f"launch_floor: --sizes {args.sizes!r} / --chunks {args.chunks!r} / --per-sm {args.per_sm!r}: "
                 "expected numbers, e.g. 1,12.6 / 16 / 1,2")
    if args.phases < 0 or any(k < 1 for k in per_sm):
        sys.exit(f"launch_floor: --phases {args.phases} must be >= 0 and --per-sm {args.per_sm!r} each >= 1")
    if any(a < 1 or a & (a - 1) for a in aheads):
        sys.exit(f"launch_floor: --ahead {args.ahead!r}: each a power of 2 (chunks loaded before a wait)")
    if any(c <= 0 or c % 4 for c in chunks):
        sys.exit(f"launch_floor: --chunks {args.chunks!r}: each a multiple of 4 KB (one 2048-element bf16 block)")

    import torch

    if not torch.cuda.is_available():
        sys.exit("launch_floor: needs a CUDA GPU")
    import triton

    from inferx.benchmark.floor import fit, time_chain, time_phases
    from inferx.benchmark.roofline import measure_ceilings

    copy = measure_ceilings("cuda").copy_bytes_per_s
    rows: list[dict[str, Any]] = []
    fits = {}
    for chunk_kb in chunks:
        for mb in sizes:
            r = time_chain(mb, chunk_kb, args.chain, args.replays)
            t, nbytes = r["s_per_launch"], r["bytes"]
            rows.append({**r, "bytes_per_s": nbytes / t, "over_copy_s": t - nbytes / copy})
            print(f"chunk {chunk_kb:3d} KB  {mb:7.1f} MB  {r['programs']:6d} programs  {t * 1e6:8.2f} us  "
                  f"{nbytes / t / 1e12:5.2f} TB/s  {(t - nbytes / copy) * 1e6:6.2f} us over bytes/copy", flush=True)
        pts = [(r["bytes"], r["s_per_launch"]) for r in rows if r["chunk_kb"] == chunk_kb and r["mb"] >= 8]
        if len(pts) >= 2:
            f = fit(pts)
            fits[str(chunk_kb)] = {"t0_s": f.launch_s, "bytes_per_s": f.read_bytes_per_s}
            print(f"chunk {chunk_kb} KB: t = {f.launch_s * 1e6:.2f} us + bytes / {f.read_bytes_per_s / 1e12:.2f} TB/s "
                  "(sizes >= 8 MB)")
    phase_rows: list[dict[str, Any]] = []
    for chunk_kb in chunks if args.phases else ():
        for mb in (m for m in sizes if m > 0):
            chain = time_chain(mb, chunk_kb, args.phases, args.replays)["s_per_launch"]
            for k in per_sm:
                with_sync = time_phases(mb, args.phases, k, True, chunk_kb, args.replays)
                without = time_phases(mb, args.phases, k, False, chunk_kb, args.replays)
                ahead: dict[int, float | None] = {}
                for a in aheads:
                    try:
                        ahead[a] = time_phases(mb, args.phases, k, True, chunk_kb, args.replays, ahead=a)["s_per_phase"]
                    except RuntimeError as exc:  # chunks held ahead cost registers: fewer programs fit an SM
                        print(f"chunk {chunk_kb} KB, {mb} MB, {k} per SM, {a} ahead: {exc}", flush=True)
                        ahead[a] = None
                t, t0 = with_sync["s_per_phase"], without["s_per_phase"]
                phase_rows.append({"chunk_kb": chunk_kb, "mb": mb, "phases": args.phases, "per_sm": k,
                                   "programs": with_sync["programs"], "chain_s_per_launch": chain,
                                   "s_per_phase": t, "s_per_phase_no_barrier": t0, "barrier_s": t - t0,
                                   "s_per_phase_ahead": {str(a): v for a, v in ahead.items()}})
                loads = "; ".join(f"{a} chunk{'s' if a > 1 else ''} loaded before each wait: " + (
                    f"{v * 1e6:7.2f} us a phase, {(chain - v) * 1e6:+6.2f} against a launch" if v is not None
                    else "not all programs resident (a wait gave up)") for a, v in ahead.items())
                print(f"chunk {chunk_kb:3d} KB  {mb:7.1f} MB x {args.phases} phases: {args.phases} launches "
                      f"{chain * 1e6:7.2f} us each; persistent on {with_sync['programs']:4d} programs "
                      f"{t * 1e6:7.2f} us a phase with barriers, {t0 * 1e6:7.2f} without: "
                      f"{(t - t0) * 1e6:5.2f} us a barrier, "
                      f"{(chain - t) * 1e6:+6.2f} us a phase against a launch; {loads}", flush=True)
    print(f"copy {copy / 1e12:.2f} TB/s; {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"triton {triton.__version__}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "copy_bytes_per_s": copy,
                                              "torch": torch.__version__, "triton": triton.__version__,
                                              "chain": args.chain, "rows": rows, "fits": fits, "phases": phase_rows},
                                             indent=1))


if __name__ == "__main__":
    main()
