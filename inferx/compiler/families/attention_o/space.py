"""The fused decode attention and o projection's schedule space (``attention_o.codegen``): keys a
step, output tile width, tiles per program, warps, stages; the geometry its constraints and cost
model share, and ``AttentionOSpace``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from inferx.compiler.families.attention_o.schedule import attention_o_schedule
from inferx.compiler.families.attention_o.task import AttentionOTask
from inferx.compiler.families.common.hardware import H200, HOPPER_SMS, Hopper
from inferx.compiler.families.common.space import Knob, WholeSchedule, p2
from inferx.compiler.families.interface import AnyTask, ScheduleError

ATTENTION_O_KNOBS: tuple[Knob, ...] = (
    Knob("bn", (64, 16, 32, 128)),
    Knob("bno", (64, 16, 32, 128, 256)),
    Knob("tiles", (1, 2, 4, 8, 16)),
    Knob("num_warps", (4, 2, 8)),
    Knob("num_stages", (2, 1, 3)),
)

# Values per thread of the largest tile before it spills (set at what ptxas held without spills
# for the fused MLP's tiles before prefetch).
ATTENTION_O_VALUES_PER_THREAD = 64
# Programs past which the partial sums' atomics (one per output per KV head) outweigh the
# bandwidth more programs add: two waves of 132.
ATTENTION_O_MAX_PROGRAMS = 2 * HOPPER_SMS


def attention_o_tiles(task: AttentionOTask, s: Mapping[str, int]) -> int:
    """Output tiles of the projection."""
    return math.ceil(task.n / s["bno"])


def attention_o_programs(task: AttentionOTask, s: Mapping[str, int]) -> int:
    return task.rows * task.kv_heads * math.ceil(attention_o_tiles(task, s) / s["tiles"])


def attention_o_values_per_thread(task: AttentionOTask, s: Mapping[str, int]) -> float:
    """Values each thread holds of the larger of a key step's K and V tiles and a W_o tile."""
    bd, bdv = p2(max(16, task.head_dim)), p2(max(16, task.head_dim_v))
    return max((bd + bdv) * s["bn"] / 2, s["bno"] * bdv) / (32 * s["num_warps"])


@dataclass(frozen=True)
class AttentionOSpace(WholeSchedule):
    """The schedules of the fused decode attention and o projection (``attention_o.codegen``):
    keys a step, output tile width, tiles per program, warps, stages. Every schedule it returns is
    accepted by ``attention_o_schedule``, holds at most ``ATTENTION_O_VALUES_PER_THREAD`` values per thread
    in its largest tile, leaves at most ``ATTENTION_O_MAX_PROGRAMS`` programs and no tile wider than the
    problem."""

    hw: Hopper = H200
    knobs: tuple[Knob, ...] = ATTENTION_O_KNOBS
    _sorted: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False, compare=False)

    template = "attention_o"

    def knobs_for(self, task: AnyTask) -> tuple[Knob, ...]:
        return self.knobs

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None:
        """The first rule ``s`` breaks for ``task`` (the template's own check first), or None."""
        if not isinstance(task, AttentionOTask):
            return f"the attention_o space does not schedule {task.template} tasks"
        try:
            attention_o_schedule(self.emit(s))
        except (ScheduleError, TypeError, KeyError) as e:
            return str(e)
        if s["bn"] > max(16, p2(task.ctx)) or s["bno"] > max(16, p2(task.n)):
            return f"BN={s['bn']} or BNO={s['bno']} is wider than the problem (ctx {task.ctx}, N {task.n})"
        if s["tiles"] > p2(attention_o_tiles(task, s)):
            return f"TILES={s['tiles']} is more than the {attention_o_tiles(task, s)} output tiles"
        if attention_o_values_per_thread(task, s) > ATTENTION_O_VALUES_PER_THREAD:
            return (f"{attention_o_values_per_thread(task, s):.0f} values per thread (more than "
                    f"{ATTENTION_O_VALUES_PER_THREAD}: the tiles spill)")
        n_programs = attention_o_programs(task, s)
        if n_programs > ATTENTION_O_MAX_PROGRAMS:
            return f"{n_programs} programs (more than {ATTENTION_O_MAX_PROGRAMS}: atomics outweigh bandwidth)"
        return None
