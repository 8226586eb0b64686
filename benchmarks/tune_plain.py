"""The tuner (``inferx.autotune.tune``, what ``inferx tune`` runs) on a bench shape's projections
as bare GEMMs (``shapes.plain_gemm_module``): records for the like-for-like comparison with cuBLAS
(``gemm_vs_cublas.py --plain``). The tasks are listed first; ``--only``/``--skip`` narrow them as
``inferx tune``'s options of those names do.

    python benchmarks/tune_plain.py --shape 8b --budget 4m --max-batch 16 --max-seq-len 4096 \\
        --skip 'decode rows<=4' --skip 'rows<=512'
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="8b")
    ap.add_argument("--budget", default="4m")
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--max-seq-len", type=int, default=4096)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--skip", action="append", default=[])
    ap.add_argument("--db", default="tuning_logs")
    ap.add_argument("--target", default="h200")
    ap.add_argument("--jobs", type=int, default=16)
    args = ap.parse_args()

    from inferx.autotune.tune import TuneError, TuneOptions, parse_budget, tune
    from inferx.benchmark.shapes import plain_gemm_module

    try:
        options = TuneOptions(target=args.target, budget_s=parse_budget(args.budget), max_batch=args.max_batch,
                              max_seq_len=args.max_seq_len, dtype="bf16", jobs=args.jobs, out=Path(args.db),
                              only=tuple(args.only), skip=tuple(args.skip))
        tune(plain_gemm_module(args.shape), options, say=lambda line: print(line, flush=True))
    except (TuneError, ValueError) as e:
        sys.exit(f"tune_plain: {e}")


if __name__ == "__main__":
    main()
