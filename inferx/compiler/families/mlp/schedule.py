"""How the mlp family reads a stored schedule dict, and the rules it must keep: the one
statement of validity that code generation, the tuning database and the search space share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferx.compiler.families.common.rows import GEMV_MAX_ROWS
from inferx.compiler.families.interface import ScheduleError, pow2
from inferx.compiler.families.mlp.codegen import MlpSchedule


def mlp_schedule(d: Mapping[str, Any]) -> MlpSchedule:
    """The MlpSchedule a record's schedule dict names; ScheduleError if the template would not
    accept it: exactly the fields bm, bi, bk, bn, num_warps, num_stages, prefetch, dot, defer; BM
    a power of two up to 8 (all of a bucket's rows in a program); BI, BK, BN powers of two from 16
    to 1024; 1, 2, 4, 8 or 16 warps; 1 to 8 stages; prefetch, dot and defer 0 or 1; not prefetch
    with dot (the dot form's loads are pipelined by its stages); defer only at BM 1 without dot."""
    want = {"bm", "bi", "bk", "bn", "num_warps", "num_stages", "prefetch", "dot", "defer"}
    if set(d) != want:
        raise ScheduleError(f"mlp schedule fields must be {sorted(want)}, got {sorted(d)}")
    s = MlpSchedule(**{k: d[k] for k in want})
    if not (pow2(s.bm) and s.bm <= GEMV_MAX_ROWS):
        raise ScheduleError(f"BM must be a power of two up to {GEMV_MAX_ROWS}: {s}")
    for knob in ("bi", "bk", "bn"):
        v = getattr(s, knob)
        if not (pow2(v) and 16 <= v <= 1024):
            raise ScheduleError(f"{knob.upper()} must be a power of two from 16 to 1024: {s}")
    if s.num_warps not in (1, 2, 4, 8, 16):
        raise ScheduleError(f"num_warps must be 1, 2, 4, 8 or 16: {s}")
    if not (isinstance(s.num_stages, int) and not isinstance(s.num_stages, bool) and 1 <= s.num_stages <= 8):
        raise ScheduleError(f"num_stages must be 1..8: {s}")
    for knob in ("prefetch", "dot", "defer"):
        v = getattr(s, knob)
        if v not in (0, 1) or isinstance(v, bool):
            raise ScheduleError(f"{knob} must be 0 or 1: {s}")
    if s.prefetch and s.dot:
        raise ScheduleError(f"prefetch and dot exclude each other (the dot form pipelines its loads): {s}")
    if s.defer and (s.bm != 1 or s.dot):
        raise ScheduleError(f"deferred reductions are generated at BM 1 without dot: {s}")
    return s

