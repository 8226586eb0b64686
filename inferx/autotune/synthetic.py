"""A synthetic measured landscape: deterministic "times" for every valid schedule of a task, so
the search and the cost models are exercised on the CPU through ``ReplayRunner``.

The landscape is not the roofline model: it bends the roofline (its square root of the ratio to
the best roofline time, so the model's ranking is only partly right) and multiplies in structure
the roofline does not see (a preferred warp count, pipeline depth, tile area and tile order per
task, from a hash of the task), a few percent of out-of-resource failures, and noise. A search that only
trusts the roofline does not find the best; one that learns from measurements does.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence

from inferx.autotune.cost_model import roofline_ms
from inferx.autotune.space import Space, schedule_key, spaces_for
from inferx.compiler.database import Record
from inferx.compiler.families import family
from inferx.compiler.families.interface import AnyTask

TOOLCHAIN = {"triton": "synthetic", "torch": "synthetic", "device": "synthetic landscape"}


def _unit(*parts: str) -> float:
    """A deterministic number in [0, 1) from the parts."""
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:12], 16) / 16**12


def tile_area(s: Mapping[str, int]) -> int:
    """A program's tile as its schedule names it: BI x BK where a first loop's tile is BI wide
    (a fused MLP), BNO x TILES where a program holds output columns in tiles (a fused attention
    and projection), BN x SPLITS for split-context attention, BN x BM for tiles of queries by keys
    (no BK), else BN x BK."""
    if "bi" in s:
        return s["bi"] * s["bk"]
    if "bno" in s:
        return s["bno"] * s["tiles"]
    if "splits" in s:
        return s["bn"] * s["splits"]
    if "bk" not in s:
        return s["bn"] * s.get("bm", 1)
    return s["bn"] * s["bk"]


def synthetic_ms(task: AnyTask, s: Mapping[str, int], floor_ms: float) -> float:
    """The landscape's time of ``s`` (inf for a synthetic out-of-resource failure); ``floor_ms``
    is the best roofline time of the task. The "area" is a program's tile (``tile_area``)."""
    key = schedule_key(s)
    smem, area_of = family(task.template).smem_bytes(task, s), tile_area(s)
    if smem > 160 * 1024 and _unit(task.key, key, "fail") < 0.5:
        return math.inf
    warps = 1 + int(_unit(task.key, "warps") * 4)  # log2 of the preferred warp count: 1..4
    stages = 2 + int(_unit(task.key, "stages") * 3)
    area = 10 + int(_unit(task.key, "area") * 6)  # log2 of the preferred BN x BK
    shape = (1 + 0.12 * abs(math.log2(s["num_warps"]) - warps)) * (1 + 0.08 * abs(s["num_stages"] - stages))
    shape *= 1 + 0.06 * abs(math.log2(area_of) - area)
    if s.get("group_m", 0):  # grouped tile order: 4% faster than the plain order on half the tasks
        shape *= 0.96 if _unit(task.key, "order") < 0.5 else 1.04
    noise = math.exp(0.06 * (_unit(task.key, key, "noise") - 0.5))
    return floor_ms * math.sqrt(roofline_ms(task, s) / floor_ms) * shape * noise


def landscape(tasks: Sequence[AnyTask], space: Space | None = None) -> list[Record]:
    """A record of every valid schedule of every task (failures included, as infinite times)."""
    spaces = space or spaces_for("h200")
    out = []
    for task in tasks:
        space_ = spaces.of(task)
        valid = space_.all_valid(task)
        floor = min(roofline_ms(task, s) for s in valid)
        for s in valid:
            ms = synthetic_ms(task, s, floor)
            out.append(Record(task, space_.emit(s), (ms,), ms, dict(TOOLCHAIN), "2026-01-01", "synthetic",
                              "synthetic landscape" if math.isfinite(ms) else "synthetic out of resources"))
    return out
