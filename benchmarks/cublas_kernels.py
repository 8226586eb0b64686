"""Which cuBLAS kernels ``torch.nn.functional.linear`` runs for a Llama-shaped model's projections
at a few row counts, and how long each took (torch's profiler, one call after three): the kernel
names carry cuBLAS's tile shapes, stages, cluster shapes and split-K, the peer's choices beside
ours in ``gemm_vs_cublas.py``.

    python benchmarks/cublas_kernels.py --shape 8b --rows 16,128
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="8b")
    ap.add_argument("--rows", default="16,128")
    args = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    from inferx.benchmark.shapes import make_config

    if not torch.cuda.is_available():
        sys.exit("cublas_kernels: needs a CUDA GPU")
    cfg = make_config(args.shape)
    h, i = cfg.hidden_size, cfg.intermediate_size
    q = cfg.num_attention_heads * (h // cfg.num_attention_heads) + 2 * cfg.num_key_value_heads * (
        h // cfg.num_attention_heads)
    for name, k, n in (("qkv", h, q), ("o", h, h), ("gate_up", h, 2 * i), ("down", i, h)):
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        for m in (int(r) for r in args.rows.split(",")):
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            for _ in range(3):
                torch.nn.functional.linear(x, w)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
                torch.nn.functional.linear(x, w)
                torch.cuda.synchronize()
            ks = [(e.name, e.device_time) for e in prof.events() if e.device_type.name == "CUDA"]
            print(f"{name:8s} M={m:5d} K={k:6d} N={n:6d}: " + " | ".join(f"{nm[:120]} {t:.1f} us" for nm, t in ks),
                  flush=True)


if __name__ == "__main__":
    main()
