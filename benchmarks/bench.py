"""`inferx bench` as a script: the same options (see `inferx bench --help`).

    python3 benchmarks/bench.py --shape 8b --batch 1 --context 512 --prefill= --peers compile --out r.json

The figures it measured, with their commands and result files: docs/performance.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # kernels are built in spawned workers that import this module
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from inferx.cli import main

    main(["bench", *sys.argv[1:]], prog_name="inferx")
