"""How the attention_o family reads a stored schedule dict, and the rules it must keep: the one
statement of validity that code generation, the tuning database and the search space share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferx.compiler.families.attention_o.codegen import AttentionOSchedule
from inferx.compiler.families.interface import ScheduleError, pow2


def attention_o_schedule(d: Mapping[str, Any]) -> AttentionOSchedule:
    """The AttentionOSchedule a record's schedule dict names; ScheduleError if the template would
    not accept it: exactly the fields bn, bno, tiles, num_warps, num_stages; BN (keys a step) a
    power of two from 16 (tl.dot's minimum) to 256; BNO a power of two from 8 to 512; TILES a
    power of two up to 64; 1, 2, 4, 8 or 16 warps; 1 to 8 stages."""
    want = {"bn", "bno", "tiles", "num_warps", "num_stages"}
    if set(d) != want:
        raise ScheduleError(f"attention_o schedule fields must be {sorted(want)}, got {sorted(d)}")
    s = AttentionOSchedule(**{k: d[k] for k in want})
    for knob, lo, hi in (("bn", 16, 256), ("bno", 8, 512), ("tiles", 1, 64)):
        v = getattr(s, knob)
        if not (pow2(v) and lo <= v <= hi):
            raise ScheduleError(f"{knob.upper()} must be a power of two from {lo} to {hi}: {s}")
    if s.num_warps not in (1, 2, 4, 8, 16):
        raise ScheduleError(f"num_warps must be 1, 2, 4, 8 or 16: {s}")
    if not (isinstance(s.num_stages, int) and not isinstance(s.num_stages, bool) and 1 <= s.num_stages <= 8):
        raise ScheduleError(f"num_stages must be 1..8: {s}")
    return s
