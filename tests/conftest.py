"""Test-wide settings and shared fixtures, read in this one place.

CPU sessions run the artifact's kernels in Triton's interpreter, which Triton decides when it is
first imported: the tests enable it before anything imports Triton. (Compiling cubins happens in
worker processes, which set their own mode.) No test reaches the network.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from inferx.compiler.database import Record
    from inferx.compiler.families.interface import AnyTask

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def landscape_of() -> Callable[[Sequence[AnyTask]], list[Record]]:
    """``landscape(tasks)`` (inferx.autotune.synthetic), each task's records computed once for the
    whole run: enumerating a task's valid schedules takes seconds, and the autotune tests replay the
    same few tasks. Records come task after task, as ``landscape`` lists them, in a new list on
    each call (the records themselves are frozen)."""
    from inferx.autotune.synthetic import landscape

    done: dict[AnyTask, list[Record]] = {}

    def of(tasks: Sequence[AnyTask]) -> list[Record]:
        for t in tasks:
            if t not in done:
                done[t] = landscape([t])
        return [r for t in tasks for r in done[t]]

    return of
