"""Each tuning task's best records, measured again with other values of chosen knobs: the
neighbourhood a knob new to the schedule space (or a new row bucket) opens around schedules the search has already
found good (the evolutionary search reaches it too, a mutation at a time).

Measured with the tuner's own runner (``LocalRunner``: CUDA graphs of launches over rotated
operands, medians, each candidate's results checked against the heuristic schedule's); every
measurement is appended to the database as a record of this script, so the compiler takes the
fastest. Candidates the schedule space rejects are listed with the reason and not built.

    python benchmarks/knob_sweep.py --shape 8b --max-seq-len 4096 --only prefill --only gemm \\
        --knob tma=0,1 --knob persistent=0,1,2 --top 3 --db tuning_logs
    python benchmarks/knob_sweep.py --shape 8b --only prefill --only 'rows<=128' --bases-from-rows 256 \
        --knob split_k=1,2,4 --db tuning_logs    # a new row bucket, from its neighbour's records
    python benchmarks/knob_sweep.py --shape 8b --only N=6144 --only 'rows<=128' --top 8 --again \
        --db tuning_logs    # the best records measured again after a change to the template's code
    python benchmarks/knob_sweep.py --shape 8b --plain --bases-from-model --knob num_stages=3,4,5 --top 4 \
        --db tuning_logs    # the projections as bare GEMMs, from the model's (fused) records

A database takes each task's fastest record, so a change that makes a template faster needs only
its best records measured again (``--again``: the bases too, and schedules measured before).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def parse_knob(text: str) -> tuple[str, tuple[int, ...]]:
    """``name=v1,v2,...`` -> (name, (v1, v2, ...)); ValueError naming the text otherwise."""
    name, sep, values = text.partition("=")
    try:
        if not sep or not name:
            raise ValueError
        return name, tuple(int(v) for v in values.split(","))
    except ValueError:
        raise ValueError(f"--knob {text!r}: expected NAME=V1,V2,... with integer values") from None


def neighbours(base: dict[str, int], knobs: list[tuple[str, tuple[int, ...]]]) -> list[dict[str, int]]:
    """``base`` with every combination of the knob values (``base`` itself among them)."""
    names = [n for n, _ in knobs]
    return [{**base, **dict(zip(names, combo, strict=True))} for combo in itertools.product(*(v for _, v in knobs))]


def records_of(db: Any, key: str) -> list[Any]:
    """The task's measured records, fastest first."""
    return sorted((r for r in db.records if r.task.key == key and r.median_ms > 0), key=lambda r: r.median_ms)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="8b")
    ap.add_argument("--max-seq-len", type=int, default=4096)
    ap.add_argument("--batches", default="1", help="decode batch buckets whose tasks are swept, e.g. 1,4,16")
    ap.add_argument("--only", action="append", default=[], help="tasks whose line contains TEXT (repeat to narrow)")
    ap.add_argument("--skip", action="append", default=[], help="leave out tasks whose line contains TEXT")
    ap.add_argument("--knob", action="append", default=[], help="NAME=V1,V2,... (repeat)")
    ap.add_argument("--bases-from-rows", type=int, default=None, metavar="ROWS",
                    help="start from the best records of the same task at ROWS rows (a new row bucket)")
    ap.add_argument("--plain", action="store_true",
                    help="the shape's projections as bare GEMMs (shapes.plain_gemm_module), not the model's kernels")
    ap.add_argument("--bases-from-model", action="store_true",
                    help="with --plain: start from the best records of the model's GEMM task of the same rows, K and N")
    ap.add_argument("--top", type=int, default=3, help="best distinct records of each task to start from")
    ap.add_argument("--again", action="store_true",
                    help="measure the bases and every neighbour even where measured before (after a code change)")
    ap.add_argument("--db", default="tuning_logs")
    ap.add_argument("--target", default="h200")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--sustain-ms", type=float, default=0.0,
                    help="time each candidate after this long of back-to-back replays (power-capped clocks); its "
                         "records are then of the sustained regime, which alone ranks the task's schedules")
    args = ap.parse_args()
    try:
        knobs = [parse_knob(k) for k in args.knob]
    except ValueError as e:
        sys.exit(f"knob_sweep: {e}")
    if not knobs and not args.again:
        sys.exit("knob_sweep: name at least one --knob NAME=V1,V2,... (or --again)")
    try:
        batches = tuple(int(b) for b in args.batches.split(","))
    except ValueError:
        sys.exit(f"knob_sweep: --batches {args.batches!r}: expected positive integers, e.g. 1,4,16")

    from inferx.autotune.extract import heuristic_baseline
    from inferx.autotune.runner import LocalRunner
    from inferx.autotune.space import dedupe, schedule_key, space_for
    from inferx.benchmark.shapes import shape_tasks
    from inferx.compiler.database import Database, Record, regime_of

    if args.bases_from_model and (not args.plain or args.bases_from_rows):
        sys.exit("knob_sweep: --bases-from-model goes with --plain, and not with --bases-from-rows")
    tasks = shape_tasks(args.shape, args.max_seq_len, batches, tuple(args.only), tuple(args.skip), plain=args.plain)
    if not tasks:
        sys.exit(f"knob_sweep: no task of the {args.shape} shape matches {args.only}")
    # the model's GEMM task of each (shape, rows, K, N): where --bases-from-model starts
    model_keys = ({(t.task.shape, t.task.rows, t.task.k, t.task.n): t.task.key
                   for t in shape_tasks(args.shape, args.max_seq_len, batches) if t.task.template == "gemm"}
                  if args.bases_from_model else {})
    db = Database.load(args.db, args.target)
    runner = LocalRunner({t.task.key: t.kernel for t in tasks}, jobs=args.jobs, sustain_ms=args.sustain_ms)
    today = date.today().isoformat()
    skipped = 0
    try:
        for tt in tasks:
            task = tt.task
            space = space_for(task.template, "sm_90")
            names = [k.name for k in getattr(space, "knobs", None) or space.knobs_for(task)]
            unknown = sorted({n for n, _ in knobs} - set(names))
            if unknown:  # another template's task among the matches: said, and the sweep goes on
                print(f"{task}: not swept: the {task.template} space has no knob {unknown[0]!r}; its knobs: "
                      f"{', '.join(names)}", flush=True)
                skipped += 1
                continue
            recs = records_of(db, task.key)
            source = records_of(db, replace(task, rows=args.bases_from_rows).key) if args.bases_from_rows else recs
            if args.bases_from_model:
                twin = model_keys.get((task.shape, task.rows, task.k, task.n))
                source = [*recs, *(records_of(db, twin) if twin else [])]
            bases = dedupe([space.complete(r.schedule) for r in source])[: args.top]
            if not recs and (h := heuristic_baseline(tt)) is not None:  # what a record must beat
                bases.insert(0, space.complete(h))
            if not bases:
                print(f"{task}: no record to start from", flush=True)
                continue
            regime = regime_of(args.sustain_ms)  # measured before in this regime
            measured = set() if args.again else {schedule_key(space.complete(r.schedule)) for r in recs
                                                  if r.regime == regime}
            wanted: list[dict[str, Any]] = []
            for cand in dedupe([*([dict(b) for b in bases] if args.again else []),
                                *[n for b in bases for n in neighbours(dict(b), knobs)]]):
                why = space.why_invalid(task, cand)
                if why:
                    print(f"   skip {space.emit(cand)}: {why}")
                elif schedule_key(cand) not in measured:
                    wanted.append(cand)
            t0 = time.time()
            emitted = [space.emit(c) for c in wanted]
            results = runner.measure(task, emitted) if emitted else []
            so_far = f"best so far {recs[0].median_ms * 1e3:.1f} us {dict(recs[0].schedule)}" if recs else "no record"
            print(f"{task}: {so_far}; {len(emitted)} measured in {time.time() - t0:.0f} s", flush=True)
            for s, r in sorted(zip(emitted, results, strict=True), key=lambda p: p[1].median_ms):
                print(f"   {r.median_ms * 1e3:9.1f} us  {s} {r.error[:120] if not r.ok else ''}", flush=True)
                if r.ok:
                    db.append(Record.make(task, s, r.times_ms or (r.median_ms,), r.toolchain, today,
                                          f"benchmarks/knob_sweep.py ({runner.name})", r.note, r.regime))
            if runner.lost:  # a candidate left the CUDA context unusable: what was measured is kept
                sys.exit(f"knob_sweep: {runner.lost}; the records measured before it are kept")
    finally:
        runner.close()
    if skipped == len(tasks):
        sys.exit(f"knob_sweep: no matching task's space has the knobs {', '.join(n for n, _ in knobs)}")


if __name__ == "__main__":
    main()
