"""The qgemm schedule, how the family reads a schedule dict, and the rules it must keep: the one
statement of validity. ``qgemm_schedule`` holds the rules of any qgemm kernel, ``check_fits``
those that depend on the kernel's quantization group."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inferx.compiler.families.common.rows import GEMV_MAX_ROWS
from inferx.compiler.families.interface import ScheduleError, check_warps_stages, pow2
from inferx.compiler.ir.quant import GROUPS

FIELDS = ("bm", "bn", "bk", "num_warps", "num_stages")
MAX_BM = 256
MAX_BN = 256
MIN_BK = 16  # a K step unpacks BK / 2 bytes per W row; tl.dot takes K >= 16
MAX_STAGES = 8


@dataclass(frozen=True)
class QGemmSchedule:
    """A BM x BN output tile per program, K in steps of BK (within one group); BM <= 8 is GEMV
    mode, else the dot path."""

    bm: int
    bn: int
    bk: int
    num_warps: int = 4
    num_stages: int = 2

    @property
    def gemv(self) -> bool:
        return self.bm <= GEMV_MAX_ROWS

    def to_dict(self) -> dict[str, int]:
        return {"bm": self.bm, "bn": self.bn, "bk": self.bk, "num_warps": self.num_warps,
                "num_stages": self.num_stages}


def qgemm_schedule(d: Mapping[str, Any]) -> QGemmSchedule:
    """The QGemmSchedule a schedule dict names; ScheduleError naming the rule it breaks: exactly the
    fields bm, bn, bk, num_warps, num_stages; bm, bn, bk powers of two; bm <= GEMV_MAX_ROWS (GEMV
    mode) or bm >= 16 (tl.dot's least M), bm at most MAX_BM; bn at least 16 on the dot path, at
    most MAX_BN; bk from MIN_BK up to the largest group (a K step stays within one group, so
    one scale per W row per step); 1, 2, 4, 8 or 16 warps; 1 to MAX_STAGES stages."""
    if set(d) != set(FIELDS):
        raise ScheduleError(f"qgemm schedule fields must be {list(FIELDS)}, got {sorted(d)}")
    s = QGemmSchedule(**{k: d[k] for k in FIELDS})
    if not all(pow2(v) for v in (s.bm, s.bn, s.bk)):
        raise ScheduleError(f"bm, bn and bk must be powers of two: {s}")
    if GEMV_MAX_ROWS < s.bm < 16 or s.bm > MAX_BM:
        raise ScheduleError(f"bm must be at most {GEMV_MAX_ROWS} (GEMV mode) or 16..{MAX_BM} (the dot path): {s}")
    if s.bn > MAX_BN or (not s.gemv and s.bn < 16):
        raise ScheduleError(f"bn must be at most {MAX_BN}, and at least 16 on the dot path: {s}")
    if not MIN_BK <= s.bk <= max(GROUPS):
        raise ScheduleError(f"bk must be {MIN_BK}..{max(GROUPS)} (a K step within one group): {s}")
    check_warps_stages(s, MAX_STAGES)
    return s


def check_fits(s: QGemmSchedule, group: int) -> str | None:
    """Why ``s`` cannot run a kernel whose quantization group is ``group``, or None: BK must
    divide the group (or equal it), so that each K step reads one scale per W row."""
    if group % s.bk:
        return f"BK {s.bk} must divide the quantization group {group}"
    return None
