"""Schedule spaces for the tuner: one template's (``space_for``) or every tunable template's behind
one face (``spaces_for``, what the tuner uses when a model's tasks mix templates), each reached
through the family registry. A family's space, its knobs and the constraints that prune a
candidate live in its folder (``inferx.compiler.families.<family>.space``); what spaces share
(``Knob``, the ``Space`` interface, ``schedule_key``) in ``inferx.compiler.families.common.space``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from inferx.compiler.families import family, tunable
from inferx.compiler.families.common.hardware import H200, HARDWARE
from inferx.compiler.families.common.space import Knob, Schedule, Space, complete, dedupe, schedule_key
from inferx.compiler.families.interface import AnyTask

__all__ = ["Knob", "Schedule", "Space", "Spaces", "complete", "dedupe", "schedule_key", "space_for", "spaces_for"]


@dataclass(frozen=True)
class Spaces:
    """The spaces of several templates behind one face: each call goes to the space of the task's
    template (``of``)."""

    by_template: Mapping[str, Space]

    def of(self, task: AnyTask) -> Space:
        space = self.by_template.get(task.template)
        if space is None:
            raise ValueError(f"no schedule space for template {task.template!r}")
        return space

    def why_invalid(self, task: AnyTask, s: Mapping[str, int]) -> str | None:
        return self.of(task).why_invalid(task, s)

    def emit(self, s: Mapping[str, int]) -> Schedule:
        raise TypeError("Spaces.emit needs the task's template: call of(task).emit(s)")

    def complete(self, s: Mapping[str, int]) -> Schedule:
        raise TypeError("Spaces.complete needs the task's template: call of(task).complete(s)")

    def all_valid(self, task: AnyTask) -> list[Schedule]:
        return self.of(task).all_valid(task)

    def sample(self, task: AnyTask, rng: random.Random, n: int, tries: int = 50) -> list[Schedule]:
        return self.of(task).sample(task, rng, n, tries)

    def mutate(self, task: AnyTask, s: Mapping[str, int], rng: random.Random, tries: int = 20) -> Schedule | None:
        return self.of(task).mutate(task, s, rng, tries)

    def crossover(self, task: AnyTask, a: Mapping[str, int], b: Mapping[str, int], rng: random.Random,
                  tries: int = 10) -> Schedule | None:
        return self.of(task).crossover(task, a, b, rng, tries)


def space_for(template: str, target: str) -> Space:
    """The schedule space of ``template`` on ``target``; ValueError for a template with none."""
    try:
        fam = family(template)
    except ValueError as e:
        raise ValueError(f"no schedule space for template {template!r}: {e}") from e
    return fam.space(HARDWARE.get(target, H200))


def spaces_for(target: str) -> Spaces:
    """Every tunable template's space on ``target``, dispatching on each task's template."""
    return Spaces({f.name: f.space(HARDWARE.get(target, H200)) for f in tunable()})
