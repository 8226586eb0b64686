"""How the attention family reads a stored schedule dict, and the rules it must keep: the one
statement of validity that code generation, the tuning database and the search space share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferx.compiler.families.attention.codegen import AttentionSchedule
from inferx.compiler.families.interface import ScheduleError, pow2


def attention_schedule(d: Mapping[str, Any]) -> AttentionSchedule:
    """The AttentionSchedule a record's schedule dict names; ScheduleError if the template would
    not accept it: exactly the fields splits, bn, num_warps, num_stages (decode, and optionally
    kv_f16, 0 or 1) or bm, bn, num_warps, num_stages (prefill); BN and BM powers of two from 16
    (tl.dot's minimum) to 256; SPLITS a power of two from 1 to 256 (the decode kernel's
    last-arrival test masks its ever-growing counter with SPLITS - 1, so any other count would
    merge at the wrong arrival); 1, 2, 4, 8 or 16 warps; 1 to 8 stages."""
    common = {"bn", "num_warps", "num_stages"}
    if set(d) - {"kv_f16"} not in (common | {"splits"}, common | {"bm"}) or ("kv_f16" in d and "splits" not in d):
        raise ScheduleError(f"attention schedule fields must be {sorted(common | {'splits'})} (decode, and "
                            f"optionally kv_f16) or {sorted(common | {'bm'})} (prefill), got {sorted(d)}")
    s = AttentionSchedule(**{k: d[k] for k in d})
    if s.kv_f16 not in (0, 1):
        raise ScheduleError(f"kv_f16 must be 0 or 1: {s}")
    for knob in ("bm", "bn") if "bm" in d else ("bn",):
        v = getattr(s, knob)
        if not (pow2(v) and 16 <= v <= 256):
            raise ScheduleError(f"{knob.upper()} must be a power of two from 16 to 256: {s}")
    if "splits" in d and not (pow2(s.splits) and s.splits <= 256):
        raise ScheduleError(f"SPLITS must be a power of two from 1 to 256 (the arrival test masks with "
                            f"SPLITS - 1): {s}")
    if s.num_warps not in (1, 2, 4, 8, 16):
        raise ScheduleError(f"num_warps must be 1, 2, 4, 8 or 16: {s}")
    if not (isinstance(s.num_stages, int) and not isinstance(s.num_stages, bool) and 1 <= s.num_stages <= 8):
        raise ScheduleError(f"num_stages must be 1..8: {s}")
    return s

