"""The precision planner (quant "auto"): each linear's precision among float, fp8 and int4, chosen
so that the predicted decode step is fastest while the model's perplexity on calibration text
stays within the accuracy budget.

1. Units: linears that read one value (q|k|v, gate|up) share a precision, so that they still merge
   into one GEMM; every other linear is a unit alone (``precision.units``). The LM head is a unit
   only with ``quant_head``; else it stays float.
2. Choices of a unit: float, fp8, and int4 in groups of 128 (64 or 32 where 128 does not divide
   every K of the unit), asymmetric, by round-to-nearest.
3. Predicted time of a choice: a decode step at batch 1 reads every weight once, so a unit's time
   is the bytes its weights occupy (float: the program's dtype; fp8: a byte a weight and an fp32
   scale a row; int4: half a byte a weight, a scale and a minimum a group) over the target's
   DRAM bandwidth (``families.common.hardware``). The tuner's kernels run at 70-90% of that
   roofline (docs/performance.md); the plan compares choices, which that factor does not reorder.
4. Sensitivity: the float model's next-token distributions on ``WINDOWS`` short calibration
   windows are computed once by the reference interpreter; then each unit alone takes each
   quantized choice, and its sensitivity is the mean KL divergence of the model's distributions
   from the float ones. One forward pass of the windows per unit and choice.
5. Selection: sensitivities are taken as additive. For a price ``lam``, each unit takes the choice
   minimising ``time + lam * KL``; as ``lam`` rises the plan goes from the fastest (every unit
   int4) towards float. The planner measures the whole plan's perplexity on ``CHECK_WINDOWS``
   full calibration windows (a few hundred tokens are too few: a plan's increase on them is
   noise) and bisects over the prices at which a unit changes choice for the fastest plan whose
   perplexity increase is within the budget (the bisection takes measured perplexity as rising
   with ``lam``, which the additive model makes likely, not certain).
6. Margin: a plan's increase differs from one sample of text to another, and a plan chosen to sit
   just under the budget on the calibration windows sits as often just over it on other text. So
   the increase a plan is held to is an upper bound from the windows themselves: each window's
   mean log-likelihood loss over float, their mean plus ``CONFIDENCE_Z`` standard errors (a
   one-sided 95% bound on the increase over text like the windows), as a perplexity ratio.

The plan (``PrecisionPlan``) keeps what was measured: the budget, the float and planned
perplexities, the predicted times of the plan and of the uniform choices, and each unit's
sensitivities, which ``inferx inspect`` shows and a user may edit the map beside.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from inferx.compiler.ir.types import DType
from inferx.compiler.quant import precision as pr
from inferx.program import Program

WINDOWS = 2  # calibration windows each unit's sensitivity is measured on
WINDOW = 128  # tokens a sensitivity window holds
CHECK_WINDOWS = 8  # calibration windows (of the calibration's length) whole plans are measured on
CONFIDENCE_Z = 1.645  # standard errors above the windows' mean loss a plan is held to (one-sided 95%)
GROUPS = (128, 64, 32)
DTYPE_BYTES = {DType.f32: 4, DType.bf16: 2, DType.f16: 2}


class PlanError(pr.PrecisionError):
    """No plan quantizes any linear within the budget; the message says what the best reaches."""


@dataclass
class Unit:
    """Linears planned together: their weights' names and shapes, the choices, each choice's
    predicted time (us) and measured sensitivity (mean KL)."""

    names: list[str]
    shapes: list[tuple[int, int]]
    choices: list[str]
    us: dict[str, float]
    kl: dict[str, float]


def unit_choices(shapes: Sequence[tuple[int, int]]) -> list[str]:
    """float, fp8 and the int4 scheme of the largest group dividing every K."""
    out = [pr.FLOAT, pr.FP8]
    group = next((g for g in GROUPS if all(k % g == 0 for _, k in shapes)), None)
    return out + ([f"int4-g{group}"] if group else [])


def predicted_us(shapes: Sequence[tuple[int, int]], choice: str, float_bytes: int, bytes_per_s: float) -> float:
    """A decode step's time reading the weights of ``shapes`` [N, K] under ``choice`` (module
    docstring, 3.), in microseconds."""
    total = 0.0
    for n, k in shapes:
        if choice == pr.FLOAT:
            total += n * k * float_bytes
        elif choice == pr.FP8:
            total += n * k + 4 * n
        else:
            group = int(choice.split("-g")[1].split("-")[0])
            total += n * k / 2 + n * (k // group) * 2 * float_bytes
    return total / bytes_per_s * 1e6


class Evaluator:
    """The model's next-token log-probabilities on fixed windows, float and under plans."""

    def __init__(self, program: Program, windows: list[list[int]], options: Any):
        # plans are measured with FP8's per-token scales (static scales would observe the model
        # again for every plan)
        self.program, self.windows = program, windows
        self.options = replace(options, fp8_activations="dynamic", smoothquant=None)
        self.float_logp = [self._logp(program, ids) for ids in windows]
        self.float_nll = self.nll(self.float_logp)

    def _logp(self, program: Program, ids: list[int]) -> np.ndarray:
        session = program.reference_session(max_batch=1, max_context=len(ids))
        logits = np.asarray(session.prefill(np.asarray([ids])), dtype=np.float64)[0, :-1]
        logits -= logits.max(axis=-1, keepdims=True)
        return logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))

    def nll(self, logps: list[np.ndarray]) -> float:
        """Mean negative log-likelihood of each window's next tokens."""
        total = sum(-float(lp[np.arange(len(ids) - 1), ids[1:]].sum()) for lp, ids in zip(logps, self.windows,
                                                                                            strict=True))
        return total / sum(len(ids) - 1 for ids in self.windows)

    def run(self, layers: dict[str, str]) -> tuple[float, float, float]:
        """(mean KL from the float distributions, perplexity increase over float as a fraction, its
        upper bound over text like the windows: module docstring, 6.) of the model with each
        linear as ``layers`` says."""
        from inferx.compiler.pipeline import PrecisionPlan, apply_plan

        program = replace(self.program, module=self.program.module.clone())
        program = apply_plan(program, PrecisionPlan(layers, "planner"), self.options)
        _keep_all(program.weights)
        logps = [self._logp(program, ids) for ids in self.windows]
        kl = sum(float((np.exp(f) * (f - q)).sum()) for f, q in zip(self.float_logp, logps, strict=True))
        kl /= sum(len(lp) for lp in logps)
        return kl, math.exp(self.nll(logps) - self.float_nll) - 1, self.bound(logps)

    def bound(self, logps: list[np.ndarray]) -> float:
        """The windows' mean per-token loss over float plus ``CONFIDENCE_Z`` standard errors, as a
        perplexity increase (the mean alone with one window)."""
        loss = np.array([self._window_nll(q, ids) - self._window_nll(f, ids)
                         for f, q, ids in zip(self.float_logp, logps, self.windows, strict=True)])
        se = float(loss.std(ddof=1) / math.sqrt(len(loss))) if len(loss) > 1 else 0.0
        return math.exp(float(loss.mean()) + CONFIDENCE_Z * se) - 1

    @staticmethod
    def _window_nll(lp: np.ndarray, ids: list[int]) -> float:
        return -float(lp[np.arange(len(ids) - 1), ids[1:]].mean())


def _keep_all(store: object) -> None:
    """Quantized weights kept for the whole evaluation (each window's prefill reads them all again),
    in every layer of stores: the planner measures small models on the CPU."""
    while store is not None:
        if hasattr(store, "keep"):
            store.keep = 1 << 30  # type: ignore[attr-defined]
        store = getattr(store, "base", None)


def _select(units: list[Unit], lam: float) -> list[str]:
    """Each unit's choice minimising time + lam * KL (ties: the fewer bytes, the earlier choice)."""
    return [min(u.choices, key=lambda c: (u.us[c] + lam * u.kl[c], u.us[c])) for u in units]


def _prices(units: list[Unit]) -> list[float]:
    """The prices at which some unit's choice changes, ascending, with 0 first: between two of
    them every plan is the same."""
    out = {0.0}
    for u in units:
        for a in u.choices:
            for b in u.choices:
                dk = u.kl[a] - u.kl[b]
                if dk > 0 and u.us[b] > u.us[a]:
                    out.add((u.us[b] - u.us[a]) / dk * (1 + 1e-9))
    return sorted(out)


@dataclass
class Measured:
    """What the planner measured of a program: its units (choices, times, sensitivities), the
    evaluator of whole plans, and every linear's precision outside the units (float)."""

    units: list[Unit]
    evaluator: Evaluator  # the sensitivities' windows
    checker: Evaluator  # whole plans' windows
    layers: dict[str, str]
    calibration: str
    seconds: float
    # price: a measured plan's (KL, increase, its bound)
    plans: dict[float, tuple[float, float, float]] = field(default_factory=dict)

    def layers_of(self, choice: Sequence[str]) -> dict[str, str]:
        out = dict(self.layers)
        for u, c in zip(self.units, choice, strict=True):
            out.update(dict.fromkeys(u.names, c))
        return out


def plan(program: Program, options: Any, say: Callable[[str], None] | None = None):  # type: ignore[no-untyped-def]
    """The plan (``pipeline.PrecisionPlan``) for ``program`` under ``options`` (quant "auto",
    accuracy_budget, quant_head, calibration, target); PlanError where no plan quantizes a linear
    within the budget."""
    say = say or options.progress or (lambda line: None)
    return choose(measure(program, options, say), float(options.accuracy_budget), say)


def measure(program: Program, options: Any, say: Callable[[str], None] | None = None,
            known: Mapping[str, Mapping[str, float]] | None = None) -> Measured:
    """The units of ``program`` with their choices' predicted times and measured sensitivities
    (module docstring, 1.-4.); ``known``: {first weight of a unit: {choice: KL}} measured before
    (on the same windows), not measured again."""
    from inferx.compiler.families.common.hardware import H200, HARDWARE
    from inferx.compiler.options import TARGETS, CompileError
    from inferx.compiler.pipeline import calibration_windows
    from inferx.passes.quantize import candidates, embedding_tables, is_kn, selects

    say = say or (lambda line: None)
    clock = time.perf_counter()
    module = program.module
    assert program.info is not None
    # the GPU's kernels run bf16 or f16 (a program planned in f32 for accuracy runs in bf16 there)
    gpu = TARGETS.get(options.target, "cpu") != "cpu"
    float_bytes = 2 if gpu else DTYPE_BYTES.get(DType(program.info.dtype), 2)
    bps = HARDWARE.get(options.target, H200).dram_bytes_per_s
    shapes = {lin.weight.owner.attributes["name"].data: tuple(lin.weight.type.shape)  # type: ignore[union-attr,attr-defined]
              for lin in candidates(module)}
    kn = {lin.weight.owner.attributes["name"].data for lin in candidates(module) if is_kn(lin)}  # type: ignore[union-attr]
    tables = embedding_tables(module)
    layers = dict.fromkeys(pr.linear_weights(module), pr.FLOAT)
    units = []
    for names in pr.units(module):
        if not all(selects(n, tables, "*", "", options.quant_head) for n in names):
            continue
        sh = [shapes[n][::-1] if n in kn else shapes[n] for n in names]
        choices = unit_choices(sh)
        units.append(Unit(names, sh, choices, {c: predicted_us(sh, c, float_bytes, bps) for c in choices},
                          {pr.FLOAT: 0.0}))
    try:
        full = calibration_windows(program, options)
    except CompileError as e:
        raise PlanError(f"quant auto measures the model on text: {e}") from None
    windows = [w[:WINDOW] for w in full[:WINDOWS]]
    text = str(options.calibration or "pydoc_data.topics")
    say(f"        planning {len(units)} units of linears: sensitivities on {len(windows)} windows of "
        f"{len(windows[0])} tokens of {text}, plans on {min(len(full), CHECK_WINDOWS)} of {len(full[0])}")
    ev = Evaluator(program, windows, options)
    total = sum(len(u.choices) - 1 for u in units)
    done = 0
    for u in units:
        for c in u.choices[1:]:
            before = (known or {}).get(u.names[0], {}).get(c)
            u.kl[c] = before if before is not None else ev.run({**layers, **dict.fromkeys(u.names, c)})[0]
            done += 1
            if done % 10 == 0 or done == total:
                say(f"        sensitivity {done}/{total} ({time.perf_counter() - clock:.0f} s)")
    checker = Evaluator(program, full[:CHECK_WINDOWS], options)
    return Measured(units, ev, checker, layers, text, time.perf_counter() - clock)


def choose(m: Measured, budget: float, say: Callable[[str], None] | None = None):  # type: ignore[no-untyped-def]
    """The fastest plan of ``m``'s units whose measured perplexity increase, as its upper bound
    over text like the calibration windows, is within ``budget`` (module docstring, 5. and 6.);
    PlanError where none quantizes a linear."""
    from inferx.compiler.pipeline import PrecisionPlan

    say = say or (lambda line: None)
    clock = time.perf_counter()
    units, ev = m.units, m.checker
    prices = _prices(units)

    def increase(i: int) -> float:
        if prices[i] not in m.plans:  # a plan is measured once for every budget chosen from ``m``
            layers = m.layers_of(_select(units, prices[i]))
            m.plans[prices[i]] = ev.run(layers)
            _, inc, bound = m.plans[prices[i]]
            say(f"        plan of {pr.summary(layers)} linears: calibration perplexity {inc:+.2%}, bound {bound:+.2%} "
                f"({m.seconds + time.perf_counter() - clock:.0f} s)")
        return m.plans[prices[i]][2]

    lo, hi = 0, len(prices) - 1  # the answer lies in [lo, hi]; prices[-1] and above: the safest plan
    if increase(hi) > budget:
        best = min((u.kl[c], c, u.names[0]) for u in units for c in u.choices[1:]) if units else None
        what = f"; the least sensitive choice alone ({best[1]} for {best[2]}) adds KL {best[0]:.4g}" if best else ""
        raise PlanError(f"accuracy budget +{budget:.2%}: the most accurate plan quantizing any linear raises the "
                        f"calibration perplexity {m.plans[prices[hi]][1]:+.2%} (bound {increase(hi):+.2%}){what}; "
                        "give a larger budget or keep the model float")
    while lo < hi:
        mid = (lo + hi) // 2
        if increase(mid) <= budget:
            hi = mid
        else:
            lo = mid + 1
    chosen = _select(units, prices[lo])
    if all(c == pr.FLOAT for c in chosen):
        raise PlanError(f"accuracy budget +{budget:.2%}: no plan quantizing a linear stays within it")
    kl, inc, bound = m.plans[prices[lo]]
    result = m.layers_of(chosen)
    step_us = sum(u.us[c] for u, c in zip(units, chosen, strict=True))
    uniform = {c: sum(u.us.get(c, u.us[pr.FLOAT]) for u in units) for c in {c for u in units for c in u.choices}}
    say(f"        plan: {pr.summary(result)} linears; calibration perplexity {inc:+.2%}, bound {bound:+.2%} "
        f"(budget +{budget:.2%}); "
        f"predicted weight reads {step_us:.1f} us a decode step (float {uniform[pr.FLOAT]:.1f} us) "
        f"({m.seconds + time.perf_counter() - clock:.0f} s)")
    extra = {
        "planner": {
            "budget": budget,
            "metric": (f"perplexity increase over float on the calibration text, its mean loss plus {CONFIDENCE_Z} "
                       "standard errors over the windows"),
            "calibration": m.calibration, "windows": len(ev.windows), "window_tokens": len(ev.windows[0]),
            "sensitivity_windows": len(m.evaluator.windows), "sensitivity_window_tokens": len(m.evaluator.windows[0]),
            "float_perplexity": round(math.exp(ev.float_nll), 4),
            "perplexity_increase": round(inc, 6), "perplexity_increase_bound": round(bound, 6),
            "mean_kl": round(kl, 6),
            "predicted_weight_us": {"plan": round(step_us, 2), **{k: round(v, 2) for k, v in sorted(uniform.items())}},
            "units": [{"linears": u.names, "choice": c, "us": {k: round(v, 3) for k, v in u.us.items()},
                       "kl": {k: float(f"{v:.4g}") for k, v in u.kl.items()}}
                      for u, c in zip(units, chosen, strict=True)],
        }
    }
    return PrecisionPlan(result, f"quant auto (budget +{budget:.2%})", extra)
