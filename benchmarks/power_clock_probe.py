"""Does sustained tensor-core load lower the GPU's clocks enough to slow a prefill GEMM?

The Llama-3.2-1B prefill down GEMM's shape (x 2048 x 8192 times W^T, W 2048 x 8192, bf16) through
cuBLAS (``torch.mm``), its operands rotated over 4 copies so L2 does not flatter; time per launch
(median of bursts of 8 launches, as the tuner's runner measures) after 3 s idle, after 3 s of
continuous matmuls, over a long burst, and after idle again; the SM clock, power, temperature and
active throttle reasons (nvidia-smi) beside each.

    python3 benchmarks/power_clock_probe.py --out benchmarks/results/power_clock_probe.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

import torch


def clocks() -> str:
    """SM clock, power draw, temperature and active throttle reasons, as nvidia-smi reports them."""
    query = "clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"
    return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                          text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="Write the figures as JSON here too.")
    args = ap.parse_args()
    xs = [torch.randn(2048, 8192, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(4)]
    ws = [torch.randn(2048, 8192, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(4)]
    out = torch.empty(2048, 2048, device="cuda", dtype=torch.bfloat16)

    def burst(reps: int = 18, per: int = 8) -> float:
        """Microseconds per launch: the median over ``reps`` bursts of ``per`` launches."""
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for a, b in events:
            a.record()
            for i in range(per):
                torch.mm(xs[i % 4], ws[i % 4].T, out=out)
            b.record()
        torch.cuda.synchronize()
        return statistics.median(a.elapsed_time(b) * 1e3 / per for a, b in events)

    burst(3)  # cuBLAS picks its kernel
    torch.cuda.synchronize()
    time.sleep(3)
    res: dict[str, object] = {"idle_clock": clocks(), "after_idle_us": burst(), "after_idle_clock": clocks()}
    start = time.time()
    while time.time() - start < 3:
        for _ in range(100):
            torch.mm(xs[0], ws[0].T, out=out)
        torch.cuda.synchronize()
    res.update(hot_clock=clocks(), after_3s_load_us=burst(), long_burst_us=burst(reps=400), long_clock=clocks())
    torch.cuda.synchronize()
    time.sleep(3)
    res["again_after_idle_us"] = burst()
    text = json.dumps(res, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
