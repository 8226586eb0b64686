"""Each tuning task's best records measured twice by the tuner's own runner: in short bursts, as
the tuner measures (boost clocks), and after ``--sustain-ms`` of back-to-back replays of the same
kernel (the clocks its power cap allows, as in a model's prefill). Prints both times and ranks
per task, and whether the fastest schedule changes; writes nothing to the database.

    python benchmarks/sustained_ranking.py --shape 1b --max-seq-len 2048 --only prefill \\
        --skip 'rows<=128' --skip 'rows<=512' --top 6 --out sustained_1b.json

A compute-bound GEMM that draws less power may clock higher under the cap: if the sustained
ranking differs, a tune should rank such tasks in the sustained regime.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def ranks(values: list[float]) -> list[int]:
    """Rank of each value, 0 for the smallest."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0] * len(values)
    for r, i in enumerate(order):
        out[i] = r
    return out


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation of two equally long lists (no ties expected in times)."""
    n = len(a)
    if n < 2:
        return float("nan")
    ra, rb = ranks(a), ranks(b)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb, strict=True)) / (n * (n * n - 1))


def sm_clock_mhz() -> float | None:
    """The GPU's current SM clock, where torch can read it (NVML)."""
    try:
        import torch

        return float(torch.cuda.clock_rate())
    except Exception:  # noqa: BLE001 - a reading, not a requirement
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="1b")
    ap.add_argument("--max-seq-len", type=int, default=2048)
    ap.add_argument("--batches", default="1")
    ap.add_argument("--only", action="append", default=[], help="tasks whose line contains TEXT (repeat to narrow)")
    ap.add_argument("--skip", action="append", default=[], help="leave out tasks whose line contains TEXT")
    ap.add_argument("--top", type=int, default=6, help="best distinct records of each task to measure")
    ap.add_argument("--sustain-ms", type=float, default=400.0)
    ap.add_argument("--db", default="tuning_logs")
    ap.add_argument("--target", default="h200")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from inferx.autotune.runner import LocalRunner
    from inferx.autotune.space import dedupe, space_for
    from inferx.benchmark.shapes import shape_tasks
    from inferx.compiler.database import Database

    batches = tuple(int(b) for b in args.batches.split(","))
    tasks = shape_tasks(args.shape, args.max_seq_len, batches, tuple(args.only), tuple(args.skip))
    if not tasks:
        sys.exit(f"sustained_ranking: no task of the {args.shape} shape matches {args.only}")
    db = Database.load(args.db, args.target)
    kernels = {t.task.key: t.kernel for t in tasks}
    burst = LocalRunner(kernels, jobs=16)
    sustained = LocalRunner(kernels, jobs=16, sustain_ms=args.sustain_ms, check=False)
    report: list[dict[str, Any]] = []
    try:
        for tt in tasks:
            task = tt.task
            space = space_for(task.template, "sm_90")
            recs = sorted((r for r in db.records if r.task.key == task.key and r.median_ms > 0),
                          key=lambda r: r.median_ms)
            schedules = dedupe([space.emit(space.complete(r.schedule)) for r in recs])[: args.top]
            if len(schedules) < 2:
                print(f"{task}: fewer than two records, not ranked", flush=True)
                continue
            recorded = {json.dumps(space.emit(space.complete(r.schedule)), sort_keys=True): r.median_ms
                        for r in reversed(recs)}
            time.sleep(2.0)  # idle first: the bursts start from the clocks a tuner's builds leave
            b = burst.measure(task, schedules)
            clock_burst = sm_clock_mhz()
            s = sustained.measure(task, schedules)
            clock_sustained = sm_clock_mhz()
            rows = [(sc, rb, rs) for sc, rb, rs in zip(schedules, b, s, strict=True) if rb.ok and rs.ok]
            if len(rows) < 2:
                print(f"{task}: fewer than two schedules measured both ways", flush=True)
                continue
            tb = [r[1].median_ms * 1e3 for r in rows]
            ts = [r[2].median_ms * 1e3 for r in rows]
            best_b, best_s = min(range(len(rows)), key=tb.__getitem__), min(range(len(rows)), key=ts.__getitem__)
            rho = spearman(tb, ts)
            print(f"{task}: Spearman {rho:.2f}; fastest in bursts {tb[best_b]:.1f} us, sustained {ts[best_b]:.1f}; "
                  f"fastest sustained {ts[best_s]:.1f} us ({'the same schedule' if best_b == best_s else 'another'})"
                  f"; SM clock after bursts {clock_burst}, after sustained {clock_sustained} MHz", flush=True)
            print(f"   {'record us':>9} {'burst us':>9} {'sustained':>9}  schedule")
            for (sc, _, _), x, y in sorted(zip(rows, tb, ts, strict=True), key=lambda p: p[2]):
                rec = recorded.get(json.dumps(sc, sort_keys=True))
                print(f"   {rec * 1e3 if rec else float('nan'):9.1f} {x:9.1f} {y:9.1f}  {sc}", flush=True)
            report.append({"task": str(task), "key": task.key, "spearman": rho, "same_fastest": best_b == best_s,
                           "gain_sustained": ts[best_b] / ts[best_s], "clock_mhz": [clock_burst, clock_sustained],
                           "rows": [{"schedule": sc, "burst_us": x, "sustained_us": y,
                                     "record_us": (recorded.get(json.dumps(sc, sort_keys=True)) or 0) * 1e3}
                                    for (sc, _, _), x, y in zip(rows, tb, ts, strict=True)]})
    finally:
        burst.close()
        sustained.close()
    if report:
        print(f"median Spearman over {len(report)} tasks: {statistics.median(r['spearman'] for r in report):.2f}; "
              f"fastest schedule changes in {sum(not r['same_fastest'] for r in report)}; "
              f"largest gain of the sustained choice {max(r['gain_sustained'] for r in report):.3f}x")
    Path(args.out).write_text(json.dumps({"sustain_ms": args.sustain_ms, "shape": args.shape, "tasks": report},
                                         indent=1))


if __name__ == "__main__":
    main()
