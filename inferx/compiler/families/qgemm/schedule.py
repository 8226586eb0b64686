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
OPTIONAL = {"split_k": 1, "prefetch": 0}  # optional knobs of a record, and the value that means off
MAX_SPLIT_K = 16
MAX_BM = 256
MAX_BN = 256
MIN_BK = 16  # a K step unpacks BK / 2 bytes per W row; tl.dot takes K >= 16
MAX_BK = 2048  # GEMV mode at BM 1: a K step may span several groups (see codegen)
MAX_STAGES = 8


@dataclass(frozen=True)
class QGemmSchedule:
    """A BM x BN output tile per program, K in steps of BK; BM <= 8 is GEMV mode, else the dot
    path. A step stays within one quantization group, except in GEMV mode at BM 1, where it may
    span whole groups (``spans_groups``)."""

    bm: int
    bn: int
    bk: int
    num_warps: int = 4
    num_stages: int = 2
    # A prompt's tile reads W from the dense weight the dequant kernel wrote (``ix.qlinear``'s
    # ``dense``) rather than unpacking codes, through TMA descriptors with ``tma``. Set by the
    # heuristic for the row buckets from the dense weight's ``min_rows``, where the dequant kernel
    # runs; never by a record (a record names FIELDS alone), as the two must agree.
    dense: bool = False
    tma: bool = False
    # Optional knobs a record may state (``OPTIONAL``; left out when off): the K range cut into
    # ``split_k`` slices, one program each, the last to arrive summing their partials (the dot
    # path without dense weights: decode batches whose tiles leave SMs idle); ``prefetch`` at BM
    # 1: each K step's loads issued one step ahead, so a program's loads overlap its arithmetic.
    split_k: int = 1
    prefetch: int = 0

    @property
    def gemv(self) -> bool:
        return self.bm <= GEMV_MAX_ROWS

    @property
    def deferred(self) -> bool:
        """GEMV mode at one row: [BN, BK] products summed over K once, after the loop."""
        return self.bm == 1

    def to_dict(self) -> dict[str, int]:
        """The schedule as records state it (optional knobs where on), and dense and tma where on
        (which no record sets)."""
        d = {"bm": self.bm, "bn": self.bn, "bk": self.bk, "num_warps": self.num_warps, "num_stages": self.num_stages}
        d.update({k: getattr(self, k) for k, off in OPTIONAL.items() if getattr(self, k) != off})
        d.update({k: 1 for k in ("dense", "tma") if getattr(self, k)})
        return d


def qgemm_schedule(d: Mapping[str, Any]) -> QGemmSchedule:
    """The QGemmSchedule a schedule dict names; ScheduleError naming the rule it breaks: the
    fields bm, bn, bk, num_warps, num_stages, and optionally split_k and prefetch; bm, bn, bk
    powers of two; bm <= GEMV_MAX_ROWS (GEMV mode) or bm >= 16 (tl.dot's least M), bm at most
    MAX_BM; bn at least 16 on the dot path, at most MAX_BN; bk from MIN_BK up to the largest
    group (a K step stays within one group, so one scale per W row per step), up to MAX_BK at
    BM 1; 1, 2, 4, 8 or 16 warps; 1 to MAX_STAGES stages; split_k a power of two up to
    MAX_SPLIT_K, above 1 only on the dot path; prefetch 0 or 1, 1 only at BM 1."""
    if not set(FIELDS) <= set(d) or set(d) - set(FIELDS) - set(OPTIONAL):
        raise ScheduleError(f"qgemm schedule fields must be {list(FIELDS)} (and optionally "
                            f"{', '.join(OPTIONAL)}), got {sorted(d)}")
    s = QGemmSchedule(**{k: d[k] for k in FIELDS}, **{k: d.get(k, off) for k, off in OPTIONAL.items()})
    if not all(pow2(v) for v in (s.bm, s.bn, s.bk)):
        raise ScheduleError(f"bm, bn and bk must be powers of two: {s}")
    if GEMV_MAX_ROWS < s.bm < 16 or s.bm > MAX_BM:
        raise ScheduleError(f"bm must be at most {GEMV_MAX_ROWS} (GEMV mode) or 16..{MAX_BM} (the dot path): {s}")
    if s.bn > MAX_BN or (not s.gemv and s.bn < 16):
        raise ScheduleError(f"bn must be at most {MAX_BN}, and at least 16 on the dot path: {s}")
    most = MAX_BK if s.deferred else max(GROUPS)
    if not MIN_BK <= s.bk <= most:
        raise ScheduleError(f"bk must be {MIN_BK}..{max(GROUPS)} (a K step within one group), or up to {MAX_BK} "
                            f"at bm 1: {s}")
    check_warps_stages(s, MAX_STAGES)
    if not (isinstance(s.split_k, int) and pow2(s.split_k) and s.split_k <= MAX_SPLIT_K):
        raise ScheduleError(f"split_k must be a power of two up to {MAX_SPLIT_K}: {s}")
    if s.split_k > 1 and s.gemv:
        raise ScheduleError(f"split-K runs on the dot path (bm >= 16), not in GEMV mode: {s}")
    if s.prefetch not in (0, 1) or (s.prefetch and not s.deferred):
        raise ScheduleError(f"prefetch must be 0 or 1, and 1 only at bm 1: {s}")
    return s


def check_fits(s: QGemmSchedule, group: int, k: int | None = None) -> str | None:
    """Why ``s`` cannot run a kernel whose quantization group is ``group`` (and K ``k``), or None:
    BK must divide the group, so that each K step reads one scale per W row; at BM 1 it may
    instead be a multiple of the group that divides K (each step whole groups, no K mask). Under
    split-K each slice of K is whole steps."""
    if s.split_k > 1 and k is not None and k % (s.split_k * s.bk):
        return f"split-K {s.split_k} x BK {s.bk} must divide K = {k}"
    if group % s.bk == 0:
        return None
    if not s.deferred:
        return f"BK {s.bk} must divide the quantization group {group}"
    if s.bk % group:
        return f"BK {s.bk} must divide the quantization group {group} or be a multiple of it"
    if k is not None and k % s.bk:
        return f"BK {s.bk} spans groups, so it must divide K = {k}"
    return None
