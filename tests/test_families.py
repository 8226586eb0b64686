"""The kernel-family registry: every family implements the whole interface, and nothing outside a
family's folder and the registry names a family."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from inferx.compiler.families import families, family, tunable
from inferx.compiler.families.common.hardware import H200
from inferx.compiler.families.interface import KernelFamily, ScheduleError, TaskError
from inferx.passes.fuse import ANCHORS

ROOT = Path(__file__).resolve().parents[1] / "inferx"
FAMILIES = ROOT / "compiler" / "families"
TUNABLE_METHODS = ("heuristic", "parse_schedule", "task", "task_from_json", "space")
COST_MODEL = ("bound_ms", "roofline_ms", "features")  # a tunable family's cost_model module has these


def _overrides(f: KernelFamily, method: str) -> bool:
    return getattr(type(f), method) is not getattr(KernelFamily, method)


def test_names_are_unique_and_the_fallback_is_last() -> None:
    names = [f.name for f in families()]
    assert len(set(names)) == len(names) and all(names), names
    assert [f.fallback for f in families()] == [False] * (len(names) - 1) + [True]


@pytest.mark.parametrize("f", families(), ids=lambda f: f.name)
def test_every_family_implements_the_interface(f: KernelFamily) -> None:
    assert _overrides(f, "generate"), f"{f.name}: no generator"
    assert f.anchors or f.fallback or f.passes(), f"{f.name}: nothing binds a kernel to it"
    assert isinstance(f.launch_cost(), dict) and set(f.launch_cost()) == {"kv", "per_row", "flops"}
    if not f.tunable:
        with pytest.raises(TaskError):
            f.task_from_json({})
        with pytest.raises(ScheduleError):
            f.parse_schedule({})
        return
    missing = [m for m in TUNABLE_METHODS if not _overrides(f, m)]
    missing += [m for m in COST_MODEL if not _overrides(f, m) and not callable(getattr(f.cost_model, m, None))]
    assert not missing, f"{f.name}: a tunable family without {missing}"
    assert f.feature_names, f"{f.name}: no cost features"
    space = f.space(H200)
    assert space is not None and hasattr(space, "why_invalid")


def test_every_fusion_anchor_binds_to_exactly_one_family() -> None:
    claimed = [a for f in families() for a in f.anchors]
    assert sorted(a.__name__ for a in claimed) == sorted(a.__name__ for a in ANCHORS)


def test_unknown_family_is_refused_with_the_names() -> None:
    with pytest.raises(ValueError, match="the families are gemm"):
        family("no_such_family")


def test_tunable_families_are_the_scheduled_ones() -> None:
    """Every family with a schedule is tuned, except dequant, whose schedule only says whether its
    row bucket's launch runs, and fp8quant, whose kernels run their heuristic's schedule until
    it has a task, a space and a cost model."""
    scheduled = {f.name for f in families() if f.schedule_type is not None}
    assert {f.name for f in tunable()} == scheduled - {"dequant", "fp8quant"}


@pytest.mark.parametrize("name", [f.name for f in families()])
def test_only_its_folder_and_the_registry_name_a_family(name: str) -> None:
    quoted = re.compile(rf"([\"']){re.escape(name)}\1")
    own = FAMILIES / ("rowwise" if name in ("gather", "reduction", "pointwise") else name)
    found = sorted(str(p.relative_to(ROOT.parent)) for p in ROOT.rglob("*.py") if quoted.search(p.read_text()))
    registry = "inferx/compiler/families/__init__.py"
    outside = [p for p in found if not (ROOT.parent / p).is_relative_to(own) and p != registry]
    assert not outside, f"{name!r} is named outside its folder: {outside}"
