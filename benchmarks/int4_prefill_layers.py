"""The 8B shape's prompt kernels, bf16 beside int4, on a slice of the model: LAYERS decoder layers
(random weights), each artifact's prefill kernels timed as ``inferx bench`` times them (each
kernel's launches in a graph of their own), and the whole model's prefill estimated as the
embedding, the LM head and 32 times one layer's kernels. Quicker than the bench on the whole model
(its int4 compile quantizes 8B weights), for a prompt kernel change.

    python3 benchmarks/int4_prefill_layers.py --layers 2 --seq 128,2048 --out r.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

import inferx
from inferx.benchmark.shapes import SHAPES, make_model, save_checkpoint


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", default="128,2048")
    ap.add_argument("--quant", default="int4-g128")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    seqs = [int(s) for s in args.seq.split(",")]
    full = SHAPES["8b"]["num_hidden_layers"]
    work = Path(tempfile.mkdtemp(prefix="inferx-int4-layers-"))
    model = make_model("8b", "cuda", torch.bfloat16, layers=args.layers)
    ckpt = save_checkpoint(model, work / "ckpt")
    del model
    torch.cuda.empty_cache()
    out: dict = {"layers": args.layers, "quant": args.quant, "device": torch.cuda.get_device_name(), "runs": {}}
    for name, quant in (("bf16", None), ("int4", args.quant)):
        t = time.perf_counter()
        art = inferx.compile(str(ckpt), target="h200", output=work / name, dtype="bf16", max_seq_len=max(seqs),
                             max_batch=1, jobs=os.cpu_count() or 4, quant=quant, quant_head=quant is not None)
        print(f"{name}: compiled in {time.perf_counter() - t:.1f} s", flush=True)
        session = inferx.load(str(art), device="cuda")
        for seq in seqs:
            rows = session.time_kernels("prefill", 1, seq, seq)
            total = sum(r["ms_per_launch"] * r["launches"] for r in rows)
            # outside the layers: the embedding gather (first), the LM head (last) and its dequantize
            outside = [rows[0], rows[-1]] + ([rows[-2]] if rows[-2]["template"] == "dequant" else [])
            once = sum(r["ms_per_launch"] * r["launches"] for r in outside)
            layer = (total - once) / args.layers
            est = once + full * layer
            out["runs"][f"{name}/{seq}"] = {"kernels": rows, "layer_ms": layer, "outside_ms": once,
                                            f"estimate_{full}_layers_ms": est}
            print(f"{name} prefill {seq}: one layer {layer:.3f} ms, outside the layers {once:.3f} ms, "
                  f"{full} layers {est:.3f} ms", flush=True)
            for r in rows:
                us = 1e3 * r["ms_per_launch"]
                print(f"    {r['kernel']:<34} {r['template']:<10} {r['launches']:>3} x {us:9.1f} us", flush=True)
        close = getattr(session, "close", None)
        if callable(close):
            close()
        del session
    for seq in seqs:
        b, q = (out["runs"][f"{k}/{seq}"][f"estimate_{full}_layers_ms"] for k in ("bf16", "int4"))
        print(f"prefill {seq}: bf16 {b:.3f} ms, int4 {q:.3f} ms, int4 vs bf16 {b / q:.2f}x ({full} layers, estimated)")
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
