"""How well the learned cost model ranks measured schedules it has not seen.

Reads tuning records (a tuning-database folder such as ``tuning_logs/h200`` or jsonl files),
keeps the finite measurements, and for each template splits them at random (seeded) into
training and held-out records. The model is fitted on the training part only; on the held-out
part it reports Spearman's rank correlation between predicted and measured time: over all
held-out records of the template ("pooled": across tasks too, which separates a 1 GB GEMV from a
32 MB one easily) and within each task with at least ``--min-task`` held-out records ("within
task": only the schedules differ, the ranking a search needs), with their median.

    python benchmarks/cost_model_eval.py tuning_logs/h200 [--holdout 0.2] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--holdout", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-task", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from inferx.autotune.cost_model import held_out_ranking
    from inferx.autotune.runner import ReplayRunner

    records = ReplayRunner.from_files(args.paths).records
    res = held_out_ranking(records, args.holdout, args.seed, args.min_task)
    for template, r in res.items():
        med = r["spearman_within_task_median"]
        print(f"{template}: {r['records']} records of {r['tasks']} tasks; trained on {r['train']}, "
              f"held out {r['held_out']}: Spearman pooled {r['spearman_pooled']:.3f}, within task "
              f"median {'n/a' if med is None else f'{med:.3f}'} over {len(r['spearman_within_task'])} tasks")
        for name, rho in sorted(r["spearman_within_task"].items()):
            print(f"    {rho:6.3f}  {name}")
    if args.out:
        args.out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
