"""How the gemm family reads a stored schedule dict, and the rules it must keep: the one
statement of validity that code generation, the tuning database and the search space share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inferx.compiler.families.common.space import OFF_VALUES
from inferx.compiler.families.gemm.codegen import GEMV_MAX_ROWS, GemmSchedule
from inferx.compiler.families.interface import ScheduleError, pow2

# The optional knobs and the value that means "off".
OPTIONAL_KNOBS = {k: OFF_VALUES[k] for k in ("split_k", "tma", "persistent", "group_m", "unroll", "defer")}

# Bounds on a tile: a schedule past them would compile to a kernel that cannot launch (shared
# memory, registers) or would not compile at all; the space never draws past them (it stops at
# 256-wide tiles and K steps of 1024).
MAX_TILE_DIM = 1024
MAX_TILE_AREA = 1 << 17


def gemm_schedule(d: Mapping[str, Any]) -> GemmSchedule:
    """The GemmSchedule a record's schedule dict names; ScheduleError if the template would not
    accept it: the fields bm, bn, bk, num_warps, num_stages and optionally split_k, tma and
    persistent; tile sizes powers of two; BM <= 8 (GEMV mode) or every tile dim >= 16 (tl.dot's
    minimum); each dim at most MAX_TILE_DIM and each of the three tile products at most
    MAX_TILE_AREA; 1, 2, 4, 8 or 16 warps; 1 to 16 stages; split_k a power of two up to 16, above 1 only
    on the dot path; tma 0 or 1, 1 only on the dot path with tile dims up to 256 (a TMA box's
    limit); persistent 0, 1 or 2 (programs per SM), on the dot path without split-K; group_m 0 or
    a power of two up to 64 (row tiles per group), on the dot path; unroll 0 or 1, 1 only in GEMV
    mode (the dot path's loop is Triton's to pipeline); defer 0 or 1, 1 only in GEMV mode at BM 1."""
    want = {"bm", "bn", "bk", "num_warps", "num_stages"}
    optional = set(OPTIONAL_KNOBS)
    if not want <= set(d) or set(d) - want - optional:
        raise ScheduleError(
            f"gemm schedule fields must be {sorted(want)} (and optionally {', '.join(sorted(optional))}), "
            f"got {sorted(d)}")
    s = GemmSchedule(**{k: d[k] for k in want}, split_k=d.get("split_k", 1), tma=d.get("tma", 0),
                     persistent=d.get("persistent", 0), group_m=d.get("group_m", 0), unroll=d.get("unroll", 0),
                     defer=d.get("defer", 0))
    if not (pow2(s.split_k) and s.split_k <= 16):
        raise ScheduleError(f"split_k must be a power of two up to 16: {s}")
    if s.split_k > 1 and s.gemv:
        raise ScheduleError(f"split-K runs on the dot path (BM >= 16), not in GEMV mode: {s}")
    if s.tma not in (0, 1):
        raise ScheduleError(f"tma must be 0 or 1: {s}")
    if s.tma and (s.gemv or max(s.bm, s.bn, s.bk) > 256):
        raise ScheduleError(f"TMA loads run on the dot path with tile dims up to 256: {s}")
    if s.persistent not in (0, 1, 2):
        raise ScheduleError(f"persistent must be 0, 1 or 2 (programs per SM): {s}")
    if s.persistent and (s.gemv or s.split_k > 1):
        raise ScheduleError(f"a persistent grid runs on the dot path without split-K: {s}")
    if s.group_m and not (pow2(s.group_m) and s.group_m <= 64):
        raise ScheduleError(f"group_m must be 0 or a power of two up to 64: {s}")
    if s.group_m and s.gemv:
        raise ScheduleError(f"a grouped tile order runs on the dot path (BM >= 16), not in GEMV mode: {s}")
    if s.unroll not in (0, 1) or (s.unroll and not s.gemv):
        raise ScheduleError(f"unroll must be 0 or 1, and 1 only in GEMV mode (BM <= {GEMV_MAX_ROWS}): {s}")
    if s.defer not in (0, 1) or (s.defer and not (s.gemv and s.bm == 1)):
        raise ScheduleError(f"defer must be 0 or 1, and 1 only in GEMV mode at BM 1: {s}")
    if not all(pow2(v) for v in (s.bm, s.bn, s.bk)):
        raise ScheduleError(f"tile sizes must be powers of two: {s}")
    if max(s.bm, s.bn, s.bk) > MAX_TILE_DIM or max(s.bm * s.bk, s.bn * s.bk, s.bm * s.bn) > MAX_TILE_AREA:
        raise ScheduleError(f"tile dims must be at most {MAX_TILE_DIM} and each tile operand at most "
                            f"{MAX_TILE_AREA} elements: {s}")
    if not s.gemv and min(s.bm, s.bn, s.bk) < 16:
        raise ScheduleError(f"the dot path needs BM, BN, BK >= 16 (or BM <= {GEMV_MAX_ROWS} for GEMV mode): {s}")
    if s.num_warps not in (1, 2, 4, 8, 16):
        raise ScheduleError(f"num_warps must be 1, 2, 4, 8 or 16: {s}")
    if not (isinstance(s.num_stages, int) and 1 <= s.num_stages <= 16):
        raise ScheduleError(f"num_stages must be 1..16: {s}")
    return s

