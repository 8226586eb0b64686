"""Per-linear precision: precision maps (from options, from a file; their errors), a program of
float, fp8 and int4 linears compiled against its reference session, the precision planner on a
tiny model (within its budget, faster as the budget grows, the map it writes read back), and what
`inferx inspect` shows of a plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from test_fp8_kernels import _agree, _model

import inferx
from inferx.cli import main
from inferx.compiler.options import CompileError, CompileOptions
from inferx.compiler.pipeline import PrecisionPlan, apply_plan
from inferx.compiler.quant import precision as pr
from inferx.compiler.quant.planner import PlanError, _prices, _select, plan
from inferx.program import Program

L0, L1 = "model.layers.0.", "model.layers.1."
MIXED = {  # every kind of unit in each precision somewhere; q|k|v of layer 0 split fp8 | float
    f"{L0}self_attn.q_proj.weight": "fp8", f"{L0}self_attn.k_proj.weight": "float",
    f"{L0}self_attn.v_proj.weight": "float", f"{L0}self_attn.o_proj.weight": "int4-g32",
    f"{L0}mlp.gate_proj.weight": "float", f"{L0}mlp.up_proj.weight": "float", f"{L0}mlp.down_proj.weight": "fp8",
    f"{L1}self_attn.q_proj.weight": "int4-g64", f"{L1}self_attn.k_proj.weight": "int4-g64",
    f"{L1}self_attn.v_proj.weight": "int4-g64", f"{L1}self_attn.o_proj.weight": "float",
    f"{L1}mlp.gate_proj.weight": "fp8", f"{L1}mlp.up_proj.weight": "fp8", f"{L1}mlp.down_proj.weight": "int4-g32",
    "lm_head.weight": "fp8",
}


class ByteTokenizer:
    """Token ids of text, one a byte (modulo the tiny vocabulary): the planner's calibration text
    needs a tokenizer."""

    def __call__(self, text: str) -> dict[str, list[int]]:
        return {"input_ids": [b % 97 for b in text.encode()]}

    def save_pretrained(self, path: str) -> None:
        """Nothing to save: the artifact takes token ids."""


def _program() -> Program:
    return inferx.import_model(_model("llama"), dtype="f32")


def _write(path: Path, layers: dict[str, str], **extra: Any) -> Path:
    path.write_text(json.dumps(pr.document(layers, **extra)))
    return path


def test_maps_from_options_take_the_first_matching_override() -> None:
    module = _program().module
    layers = pr.from_options(module, "fp8", False, ("*down_proj*=float", "*layers.1.*=int4-g32", "*mlp*=float"))
    assert layers["lm_head.weight"] == "float"
    assert layers[f"{L0}mlp.down_proj.weight"] == "float"
    assert layers[f"{L1}mlp.down_proj.weight"] == "float"  # the first rule matches first
    assert layers[f"{L1}self_attn.q_proj.weight"] == "int4-g32"
    assert layers[f"{L0}mlp.gate_proj.weight"] == "float" and layers[f"{L0}self_attn.o_proj.weight"] == "fp8"
    assert pr.units(module)[0] == [f"{L0}self_attn.q_proj.weight", f"{L0}self_attn.k_proj.weight",
                                   f"{L0}self_attn.v_proj.weight"]
    assert len(pr.units(module)) == 9  # q|k|v, o, gate|up, down a layer, and the LM head


@pytest.mark.parametrize("change, names", [
    ({"model.layers.9.mlp.down_proj.weight": "fp8"}, ["1 name(s)", "model.layers.9.mlp.down_proj.weight"]),
    ({"lm_head.weight": None}, ["1 of the model's 15 linears not named", "lm_head.weight"]),
    ({"lm_head.weight": "int8"}, ["lm_head.weight", "'int8'", "float, fp8"]),
    ({f"{L0}mlp.up_proj.weight": "int4-g128"}, ["up_proj", "K = 64", "int4-g128"]),
])
def test_a_bad_precision_map_is_one_error_line(change: dict[str, Any], names: list[str], tmp_path: Path) -> None:
    """Unknown and missing linears, unknown precisions and an int4 group that does not divide K:
    `inferx compile --precision-map` exits 1 with one `error:` line naming them, writes nothing."""
    model = tmp_path / "m"
    _model("llama").save_pretrained(model)
    layers = {k: v for k, v in {**MIXED, **change}.items() if v is not None}
    path = _write(tmp_path / "map.json", layers)
    args = ["compile", str(model), "-o", str(tmp_path / "a.ixa"), "--target", "cpu", "--dtype", "fp32",
            "--max-seq-len", "32", "--max-batch", "2", "--precision-map", str(path)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "Traceback" not in result.output
    for name in names:
        assert name in last, (name, last)
    assert not (tmp_path / "a.ixa").exists()


@pytest.mark.parametrize("text, names", [
    ("{", ["not a JSON precision map"]),
    ('{"format": "x", "layers": {}}', ["not a precision map", "inferx-precision-map"]),
    ('{"format": "inferx-precision-map", "version": 2, "layers": {}}', ["version 2"]),
    ('{"format": "inferx-precision-map", "version": 1, "layers": {"a": 1}}', ["\"layers\" must be"]),
])
def test_a_file_that_is_not_a_precision_map_is_refused(text: str, names: list[str], tmp_path: Path) -> None:
    path = tmp_path / "map.json"
    path.write_text(text)
    with pytest.raises(pr.PrecisionError) as e:
        pr.read_map(path)
    assert str(path) in str(e.value) and all(n in str(e.value) for n in names), str(e.value)


def test_option_errors_name_what_is_asked() -> None:
    for kwargs, words in [
        ({"quant": "auto"}, ["accuracy_budget"]),
        ({"quant": "auto", "accuracy_budget": 2.0}, ["accuracy_budget", "2.0"]),
        ({"quant": "fp8", "accuracy_budget": 0.01}, ["quant auto"]),
        ({"quant": "fp8", "precision_map": Path("m.json")}, ["precision_map", "no quant"]),
        ({"quant": "int4-g32", "quant_overrides": ("*q*=int8",)}, ["'int8'"]),
    ]:
        with pytest.raises(CompileError) as e:
            CompileOptions(target="cpu", **kwargs)
        assert all(w in str(e.value) for w in words), (kwargs, str(e.value))


def test_a_program_of_float_fp8_and_int4_linears_matches_the_reference(tmp_path: Path) -> None:
    """A precision map of all three (q of layer 0 in fp8 beside k|v float; the LM head fp8):
    the compiled cpu artifact against the reference session of the same program (f32, within
    1e-4 of the largest logit), the map stored in the artifact and written back as given."""
    path = inferx.compile(_program(), target="cpu", output=tmp_path / "a", max_seq_len=32, max_batch=2,
                          precision_map=_write(tmp_path / "map.json", MIXED),
                          write_precision_map=tmp_path / "out" / "used.json")
    weights = json.loads((path / "manifest.json").read_text())["weights"]
    kinds = [w["dtype"] for w in weights.values()]
    # fp8: q and down of layer 0, gate|up (merged) of layer 1, the head; int4: o, q|k|v (merged), down
    assert kinds.count("f8e4m3") == 4 and kinds.count("i4") == 3, kinds
    assert json.loads((path / "manifest.json").read_text())["precision"]["layers"] == MIXED
    assert pr.read_map(tmp_path / "out" / "used.json")["layers"] == MIXED
    ref = apply_plan(_program(), PrecisionPlan(dict(MIXED), "test"),
                     CompileOptions(target="cpu")).reference_session(max_batch=2, max_context=32)
    cpu = inferx.load(path, device="cpu")
    _agree(cpu, ref, "f32", "repro: pytest tests/test_precision.py -k float_fp8_and_int4")


@pytest.fixture(scope="module")
def plans() -> dict[float, PrecisionPlan]:
    program = _program()
    program.tokenizer = ByteTokenizer()
    return {b: plan(program, CompileOptions(target="h200", quant="auto", accuracy_budget=b, quant_head=True))
            for b in (1e-4, 0.05)}


def test_the_planner_meets_its_budget_and_spends_a_larger_one(plans: dict[float, PrecisionPlan]) -> None:
    """At each budget the plan's measured calibration perplexity increase, and the upper bound it
    is held to (above the increase), are within it; the larger budget's plan reads fewer predicted
    bytes; every unit's linears share a choice."""
    def us(p: dict) -> float:  # the predicted weight reads of the plan, unrounded
        return sum(u["us"][u["choice"]] for u in p["units"])

    tight, loose = plans[1e-4].extra["planner"], plans[0.05].extra["planner"]
    for b, p in plans.items():
        info = p.extra["planner"]
        assert info["perplexity_increase"] <= info["perplexity_increase_bound"] <= b, info
        for u in p.extra["planner"]["units"]:
            assert {p.layers[n] for n in u["linears"]} == {u["choice"]}
        assert any(c != "float" for c in p.layers.values())
    assert us(loose) < us(tight)
    assert us(loose) < sum(u["us"]["float"] for u in loose["units"])


def test_the_selection_moves_towards_float_as_the_price_rises() -> None:
    from inferx.compiler.quant.planner import Unit

    units = [Unit(["a"], [(8, 64)], ["float", "fp8", "int4-g32"], {"float": 4.0, "fp8": 2.0, "int4-g32": 1.0},
                  {"float": 0.0, "fp8": 0.1, "int4-g32": 1.0}),
             Unit(["b"], [(8, 64)], ["float", "fp8"], {"float": 4.0, "fp8": 2.0}, {"float": 0.0, "fp8": 0.001})]
    prices = _prices(units)
    picks = [_select(units, p) for p in prices]
    assert picks[0] == ["int4-g32", "fp8"] and picks[-1] == ["float", "float"]
    bytes_ = [sum(u.us[c] for u, c in zip(units, pick, strict=True)) for pick in picks]
    assert bytes_ == sorted(bytes_)


def test_a_budget_no_plan_meets_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where even the most accurate quantizing plan exceeds the budget, the error says the budget
    and what that plan reaches."""
    from inferx.compiler.quant import planner

    program = _program()
    program.tokenizer = ByteTokenizer()
    monkeypatch.setattr(planner.Evaluator, "run", lambda self, layers: (0.5, 0.02, 0.025))
    with pytest.raises(PlanError) as e:
        plan(program, CompileOptions(target="cpu", quant="auto", accuracy_budget=0.01))
    assert "+1.00%" in str(e.value) and "+2.00% (bound +2.50%)" in str(e.value), str(e.value)


def test_the_bound_adds_the_windows_spread() -> None:
    """A plan's bound: the windows' mean loss over float plus CONFIDENCE_Z standard errors; equal
    losses in every window leave the increase itself."""
    import math

    from inferx.compiler.quant.planner import CONFIDENCE_Z, Evaluator

    ev = Evaluator.__new__(Evaluator)
    ev.windows = [[0, 1, 2], [0, 1, 2]]
    uniform = np.log(np.full((2, 3), 1 / 3))
    ev.float_logp = [uniform, uniform]
    worse = [uniform - 0.1, uniform - 0.3]  # per-token losses 0.1 and 0.3
    se = float(np.std([0.1, 0.3], ddof=1) / math.sqrt(2))
    assert ev.bound(worse) == pytest.approx(math.exp(0.2 + CONFIDENCE_Z * se) - 1)
    assert ev.bound([uniform - 0.2, uniform - 0.2]) == pytest.approx(math.exp(0.2) - 1)


def test_inspect_shows_the_plan(tmp_path: Path, plans: dict[float, PrecisionPlan]) -> None:
    """A compile from the planner's map file (as --write-precision-map writes it, the planner's
    measurements kept): inspect shows the counts, the budget and the predicted times."""
    p = plans[0.05]
    src = _write(tmp_path / "plan.json", p.layers, **p.extra)
    path = inferx.compile(_program(), target="cpu", output=tmp_path / "a", max_seq_len=32, max_batch=2,
                          precision_map=src)
    result = CliRunner().invoke(main, ["inspect", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"precision  {pr.summary(p.layers)} linears, planned for a budget of +5.00% perplexity" in result.stdout
    assert "predicted weight reads a decode step" in result.stdout
