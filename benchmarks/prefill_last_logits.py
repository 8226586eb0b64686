"""What a caller of ``Session.prefill`` waits for, host copy included: every position's logits
against the last token's (``logits="last"``, what ``generate`` asks for), through a CUDA session
on a Llama-shaped model with random bf16 weights made on the GPU. Wall-clock milliseconds per
call (the session synchronizes before returning), medians; also the last-token row's relative
difference from the full logits' last row (the prefill_last entry's LM head is a GEMV where the
full prefill's is a GEMM: bf16 rounding apart, the same numbers).

    python benchmarks/prefill_last_logits.py --shape 1b --prompt 2048 --out r.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="1b")
    ap.add_argument("--prompt", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:  # the checkpoint and artifact go with it
        run(args, Path(tmp))


def run(args: argparse.Namespace, work: Path) -> None:
    import torch

    import inferx
    from inferx.benchmark.shapes import SHAPES, make_model, save_checkpoint

    model = make_model(args.shape, "cuda", torch.bfloat16, seed=0)
    ckpt = save_checkpoint(model, work / "ckpt")
    del model
    torch.cuda.empty_cache()
    art = inferx.compile(str(ckpt), target="h200", output=str(work / "a.ixa"), dtype="bf16",
                         max_seq_len=args.prompt, max_batch=1, jobs=16)
    session = inferx.load(str(art), device="cuda")
    ids = np.random.default_rng(0).integers(0, SHAPES[args.shape]["vocab_size"], (1, args.prompt))
    samples: dict[str, list[float]] = {}
    for mode in ("all", "last", "all", "last"):
        for _ in range(args.repeats):
            session.reset()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            session.prefill(ids, logits=mode)
            samples.setdefault(mode, []).append((time.perf_counter() - t0) * 1e3)
        print(mode, [round(t, 2) for t in samples[mode][-args.repeats:]], flush=True)
    session.reset()
    full = session.prefill(ids)
    session.reset()
    want = full[:, -1]
    rel = float(np.linalg.norm(session.prefill(ids, logits="last")[:, 0] - want) / np.linalg.norm(want))
    medians = {m: statistics.median(v) for m, v in samples.items()}
    print(f"median wall ms {medians}; last row against the full logits' last row: rel diff {rel:.2e}")
    args.out.write_text(json.dumps({"shape": args.shape, "prompt": args.prompt, "samples_ms": samples,
                                    "median_ms": medians, "last_rel_diff_vs_full_row": rel}, indent=1))


if __name__ == "__main__":
    main()
