"""What every schedule space shares: a knob, the Space interface the search asks of a space, the
sampling, mutation, crossover and enumeration over knobs (``KnobSearch``), and a schedule's
canonical key.

A schedule is a plain dict of knob values (the form the tuning database stores). A space emits
only schedules its template accepts (its family's schedule parser) and that pass every
constraint. A constraint is a cheap check returning the reason a schedule cannot work on Hopper,
or None; they run in order and the first reason is reported (``why_invalid``). Wave quantization
is not a constraint: a schedule that leaves SMs idle in the last wave works, it is only slower,
so it is a score the cost models use. New knobs are added as ``Knob``s with the value that means
"off" listed first.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from inferx.compiler.families.common.hardware import Hopper
from inferx.compiler.families.interface import AnyTask, Schedule, ScheduleError


@dataclass(frozen=True)
class Knob:
    """One tunable: its name and the values it may take (the first is the default)."""

    name: str
    values: tuple[int, ...]


# Knob values that mean "off" and are left out of a schedule's key, so a record written before the
# knob existed and the same schedule with the knob spelled out are one schedule: the optional
# knobs of every family (each family's schedule reader names its own).
OFF_VALUES = {"split_k": 1, "tma": 0, "persistent": 0, "group_m": 0, "unroll": 0, "defer": 0, "prefetch": 0,
              "kv_f16": 0}


def schedule_key(s: Mapping[str, int]) -> str:
    """Canonical text of a schedule (sorted keys, knobs that are off left out): equal keys if and
    only if equal schedules."""
    return json.dumps({k: v for k, v in s.items() if OFF_VALUES.get(k) != v}, sort_keys=True,
                      separators=(",", ":"))


def p2(v: int) -> int:
    """The least power of two >= ``v`` (1 for v <= 1)."""
    return 1 << max(0, (v - 1).bit_length())


class Space(Protocol):
    """What the search asks of a schedule space; ``of(task)`` is the space that owns ``task``
    (itself for a one-template space)."""

    def of(self, task: AnyTask) -> Space: ...

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None: ...

    def emit(self, s: Mapping[str, int]) -> Schedule: ...

    def complete(self, s: Mapping[str, int]) -> Schedule: ...

    def all_valid(self, task: AnyTask) -> list[Schedule]: ...

    def sample(self, task: AnyTask, rng: random.Random, n: int, tries: int = 50) -> list[Schedule]: ...

    def mutate(self, task: AnyTask, s: Mapping[str, int], rng: random.Random, tries: int = 20) -> Schedule | None: ...

    def crossover(self, task: AnyTask, a: Mapping[str, int], b: Mapping[str, int], rng: random.Random,
                  tries: int = 10) -> Schedule | None: ...


class KnobSearch:
    """Sampling, mutation, crossover and enumeration over a space's knobs for a task (the knobs
    may depend on the task: ``knobs_for``); validity is the space's ``why_invalid``."""

    _sorted: dict[str, tuple[int, ...]]

    def knobs_for(self, task: AnyTask) -> tuple[Knob, ...]:
        raise NotImplementedError

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None:
        raise NotImplementedError

    def all_valid(self, task: AnyTask) -> list[Schedule]:
        """Every valid schedule of ``task`` (a few thousand points at most)."""
        return [s for s in self._product(self.knobs_for(task)) if self.why_invalid(task, s) is None]

    def sample(self, task: AnyTask, rng: random.Random, n: int, tries: int = 50) -> list[Schedule]:
        """Up to ``n`` distinct valid schedules drawn uniformly from the knob product, rejecting
        invalid ones (``tries`` draws per wanted schedule)."""
        knobs = self.knobs_for(task)
        seen: dict[str, Schedule] = {}
        for _ in range(n * tries):
            if len(seen) >= n:
                break
            s = {k.name: rng.choice(k.values) for k in knobs}
            if self.why_invalid(task, s) is None:
                seen.setdefault(schedule_key(s), s)
        return list(seen.values())

    def mutate(self, task: AnyTask, s: Mapping[str, int], rng: random.Random, tries: int = 20) -> Schedule | None:
        """A valid neighbour of ``s``: one knob moved one step along its sorted values (or, one time
        in four, to any value); None if ``tries`` attempts all break a rule."""
        knobs = self.knobs_for(task)
        for _ in range(tries):
            knob = rng.choice(knobs)
            values = self._ordered(knob)
            i = values.index(s[knob.name]) if s[knob.name] in values else 0
            if rng.random() < 0.25:
                j = rng.randrange(len(values))
            else:
                j = min(len(values) - 1, max(0, i + rng.choice((-1, 1))))
            child = {**s, knob.name: values[j]}
            if child != dict(s) and self.why_invalid(task, child) is None:
                return child
        return None

    def crossover(self, task: AnyTask, a: Mapping[str, int], b: Mapping[str, int], rng: random.Random,
                  tries: int = 10) -> Schedule | None:
        """A valid child taking each knob from one parent at random; None if none of ``tries`` is."""
        for _ in range(tries):
            child = {k.name: (a if rng.random() < 0.5 else b)[k.name] for k in self.knobs_for(task)}
            if self.why_invalid(task, child) is None:
                return child
        return None

    def _ordered(self, knob: Knob) -> tuple[int, ...]:
        if knob.name not in self._sorted:
            self._sorted[knob.name] = tuple(sorted(knob.values))
        return self._sorted[knob.name]

    @staticmethod
    def _product(knobs: tuple[Knob, ...]) -> Iterator[Schedule]:
        def rec(i: int, acc: Schedule) -> Iterator[Schedule]:
            if i == len(knobs):
                yield dict(acc)
                return
            for v in knobs[i].values:
                acc[knobs[i].name] = v
                yield from rec(i + 1, acc)

        yield from rec(0, {})


class WholeSchedule(KnobSearch):
    """A one-template space whose every knob is a field of its template's schedule."""

    def of(self, task: AnyTask) -> WholeSchedule:
        return self

    def emit(self, s: Mapping[str, int]) -> Schedule:
        """The template's schedule dict (every knob is a field of the template)."""
        return {k: int(v) for k, v in s.items()}

    def complete(self, s: Mapping[str, int]) -> Schedule:
        """A stored schedule as a point of the space: records name all their knobs."""
        return self.emit(s)


class DecodePrefillKnobs(WholeSchedule):
    """A one-template space whose decode tasks draw from ``decode_knobs`` and prefill tasks from
    ``prefill_knobs`` (a knob of one name may take other values in each), and whose optional
    knobs (``optional``: name to the value meaning off) are left out of a schedule where off, so
    a schedule and the same one with its knobs off spelled out are one."""

    decode_knobs: tuple[Knob, ...]
    prefill_knobs: tuple[Knob, ...]
    optional: ClassVar[Mapping[str, int]] = {}

    def knobs_for(self, task: AnyTask) -> tuple[Knob, ...]:
        return self.decode_knobs if task.shape == "decode" else self.prefill_knobs

    def emit(self, s: Mapping[str, int]) -> Schedule:
        return {k: int(v) for k, v in s.items() if self.optional.get(k) != v}

    def complete(self, s: Mapping[str, int]) -> Schedule:
        """A stored schedule as a point of the space: optional knobs it leaves out are off."""
        return {**self.optional, **self.emit(s)}

    def _ordered(self, knob: Knob) -> tuple[int, ...]:
        """The knob's values in order, not cached by name (decode and prefill knobs of one name
        take different values)."""
        return tuple(sorted(knob.values))


def complete(space: Space, s: Mapping[str, int]) -> Schedule:
    """A stored schedule as a point of the space: knobs it does not name take their default."""
    return space.complete(s)


def dedupe(schedules: Sequence[Mapping[str, int]]) -> list[Schedule]:
    """``schedules`` in order with repeats dropped."""
    seen: dict[str, Schedule] = {}
    for s in schedules:
        seen.setdefault(schedule_key(s), dict(s))
    return list(seen.values())


def resident_programs(hw: Hopper, num_warps: int, smem: int, values_per_thread: float) -> int:
    """Programs of ``num_warps`` warps resident per SM, limited by shared memory (``smem`` bytes a
    program; 0 for none), threads, registers (about 32 a thread plus two per value it holds) and
    the block cap."""
    threads = 32 * num_warps
    by_smem = hw.smem_per_sm // smem if smem else hw.max_blocks_per_sm
    regs = min(255, 32 + int(values_per_thread) * 2)
    return max(0, min(by_smem, hw.max_threads_per_sm // threads, hw.regs_per_sm // (regs * threads),
                      hw.max_blocks_per_sm))


def wave_fraction(hw: Hopper, programs: int, per_sm: int) -> float:
    """The fraction of SM slots busy over all waves of ``programs`` at ``per_sm`` a SM:
    programs / (waves * slots), 1.0 when the last wave is full (a score, never a filter)."""
    slots = hw.sms * max(1, per_sm)
    return programs / (math.ceil(programs / slots) * slots)


def first_broken_rule(task: AnyTask, s: Mapping[str, int], emit: Callable[[Mapping[str, int]], Schedule],
                      parse: Callable[[Schedule], object], constraints: Sequence[Callable[..., str | None]],
                      hw: Hopper) -> str | None:
    """The space's own form (``emit``) and the template's rules (``parse``, its family's schedule
    parser), then each constraint in order: the first reason ``s`` breaks for ``task``, or None."""
    try:
        parse(emit(s))
    except (ScheduleError, TypeError, KeyError) as e:
        return str(e)
    for check in constraints:
        reason = check(task, s, hw)
        if reason is not None:
            return reason
    return None
