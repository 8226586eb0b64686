"""The attention template's schedule space: its geometry (shared by the constraints and the cost
model), its constraints, its knobs and ``AttentionSpace``, which has one knob set per shape:
decode (SPLITS, BN, warps, stages) and prefill (BM, BN, warps, stages).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from inferx.compiler.families.attention.schedule import attention_schedule
from inferx.compiler.families.attention.task import AttentionTask
from inferx.compiler.families.common.hardware import DTYPE_BYTES, H200, Hopper
from inferx.compiler.families.common.space import (
    Knob,
    WholeSchedule,
    first_broken_rule,
    p2,
    resident_programs,
    wave_fraction,
)
from inferx.compiler.families.interface import AnyTask

# --- attention geometry, shared by constraints and cost models -----------------------------------


def attention_bm(task: AttentionTask, s: Mapping[str, int]) -> int:
    """Query rows of a program's tile: the schedule's BM in prefill; in decode the GQA group (query
    heads per KV head) padded to a power of two of at least 16."""
    if task.shape == "decode":
        return max(16, p2(task.q_heads // max(1, task.kv_heads)))
    return s["bm"]


def attention_head_tiles(task: AttentionTask) -> tuple[int, int]:
    """(BD, BDV): the head dims padded to powers of two of at least 16, as the template pads them."""
    return max(16, p2(task.head_dim)), max(16, p2(task.head_dim_v))


def attention_smem_bytes(task: AttentionTask, s: Mapping[str, int]) -> int:
    """Shared memory: a K tile [BD, BN] and a V tile [BN, BDV] per pipeline stage, and the Q tile."""
    bd, bdv = attention_head_tiles(task)
    kvb, qb = DTYPE_BYTES.get(task.kv_dtype, 4), DTYPE_BYTES.get(task.dtype, 4)
    return s["bn"] * (bd + bdv) * kvb * s["num_stages"] + attention_bm(task, s) * bd * qb


def attention_values_per_thread(task: AttentionTask, s: Mapping[str, int]) -> float:
    """fp32 values each thread holds live: the output accumulator [BM, BDV] and the scores [BM, BN]."""
    _, bdv = attention_head_tiles(task)
    return attention_bm(task, s) * (bdv + s["bn"]) / (32 * s["num_warps"])


def attention_programs(task: AttentionTask, s: Mapping[str, int]) -> int:
    """Programs of one launch: SPLITS x batch x KV heads in decode; query blocks x query heads for
    one prompt in prefill."""
    if task.shape == "decode":
        return s["splits"] * task.rows * task.kv_heads
    return math.ceil(task.rows / s["bm"]) * task.q_heads


def attention_blocks_per_sm(task: AttentionTask, s: Mapping[str, int], hw: Hopper = H200) -> int:
    """Programs resident per SM."""
    return resident_programs(hw, s["num_warps"], max(1, attention_smem_bytes(task, s)),
                             attention_values_per_thread(task, s))


def attention_wave_efficiency(task: AttentionTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
    """The fraction of SM slots busy over all waves (a score, never a filter)."""
    return wave_fraction(hw, attention_programs(task, s), attention_blocks_per_sm(task, s, hw))


AttentionConstraint = Callable[[AttentionTask, Mapping[str, int], Hopper], "str | None"]


def attention_tile_fits_problem(task: AttentionTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    """A slice must hold keys: SPLITS x BN <= the context (decode); a tile no wider than the prompt
    or the context rounded up to a power of two (prefill), else it only computes masked lanes."""
    if task.shape == "decode":
        if s["splits"] * s["bn"] > task.ctx:
            return (f"SPLITS={s['splits']} x BN={s['bn']} exceeds the context {task.ctx}: "
                    "some slices would hold no keys")
        return None
    if s["bm"] > max(16, p2(task.rows)):
        return f"BM={s['bm']} exceeds the task's rows ({task.rows}) rounded up to a power of two"
    if s["bn"] > max(16, task.ctx):
        return f"BN={s['bn']} exceeds the context {task.ctx}"
    return None


def attention_dot_shape(task: AttentionTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    """BM >= 64 runs on wgmma (whole warpgroups); a tile with fewer scores than threads idles some."""
    bm = attention_bm(task, s)
    if bm >= 64 and s["num_warps"] < 4:
        return f"BM={bm} runs on wgmma, which needs whole warpgroups (4, 8 or 16 warps), got {s['num_warps']}"
    if bm * s["bn"] < 32 * s["num_warps"]:
        return (f"a {bm}x{s['bn']} score tile has fewer values than the {32 * s['num_warps']} threads "
                f"of {s['num_warps']} warps")
    return None


def attention_shared_memory_fits(task: AttentionTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    need = attention_smem_bytes(task, s)
    if need > hw.smem_per_block:
        return (f"shared memory of the K/V tiles x {s['num_stages']} stages and the Q tile = {need} B "
                f"exceeds {hw.smem_per_block} B")
    return None


def attention_fits_registers(task: AttentionTask, s: Mapping[str, int], hw: Hopper) -> str | None:
    per_thread = attention_values_per_thread(task, s)
    if per_thread > hw.max_acc_regs:
        return (f"accumulator and scores need {per_thread:g} fp32 registers per thread (> {hw.max_acc_regs}) "
                f"with {s['num_warps']} warps")
    return None


ATTENTION_CONSTRAINTS: tuple[AttentionConstraint, ...] = (
    attention_tile_fits_problem,
    attention_dot_shape,
    attention_shared_memory_fits,
    attention_fits_registers,
)

# The first value of each knob fills a stored schedule that leaves the knob out. (The decode
# heuristic, attention.heuristic_schedule, picks its slices and key blocks by the batch bucket.)
ATTENTION_DECODE_KNOBS: tuple[Knob, ...] = (
    Knob("splits", (16, 1, 2, 4, 8, 32, 64, 128)),
    Knob("bn", (32, 16, 64, 128, 256)),
    Knob("num_warps", (4, 1, 2, 8)),
    Knob("num_stages", (2, 1, 3, 4)),
)
ATTENTION_PREFILL_KNOBS: tuple[Knob, ...] = (
    Knob("bm", (64, 16, 32, 128, 256)),
    Knob("bn", (32, 16, 64, 128, 256)),
    Knob("num_warps", (4, 1, 2, 8, 16)),
    Knob("num_stages", (2, 1, 3, 4)),
)


@dataclass(frozen=True)
class AttentionSpace(WholeSchedule):
    """The schedules of the attention template for one target: decode tasks draw from
    ``decode_knobs``, prefill tasks from ``prefill_knobs``. Every schedule it returns is accepted
    by ``attention_schedule`` and passes ``constraints``."""

    hw: Hopper = H200
    decode_knobs: tuple[Knob, ...] = ATTENTION_DECODE_KNOBS
    prefill_knobs: tuple[Knob, ...] = ATTENTION_PREFILL_KNOBS
    constraints: tuple[AttentionConstraint, ...] = ATTENTION_CONSTRAINTS
    _sorted: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False, compare=False)

    template = "attention"

    def knobs_for(self, task: AnyTask) -> tuple[Knob, ...]:
        return self.decode_knobs if task.shape == "decode" else self.prefill_knobs

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None:
        """The first rule ``s`` breaks for ``task`` (the template's own check first), or None."""
        if not isinstance(task, AttentionTask):
            return f"the attention space does not schedule {task.template} tasks"
        want = {k.name for k in self.knobs_for(task)}
        if set(s) != want:
            return f"a {task.shape} attention schedule has the knobs {sorted(want)}, got {sorted(s)}"
        return first_broken_rule(task, s, self.emit, attention_schedule, self.constraints, self.hw)
