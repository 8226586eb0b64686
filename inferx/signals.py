"""Signals that end long work (Ctrl-C, SIGTERM from ``timeout`` or a job scheduler) the way an
exception does, so that what the work leaves behind is cleaned up or written out."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def raising_on(signals: tuple[signal.Signals, ...], make: Callable[[signal.Signals], BaseException]) -> Iterator[None]:
    """Inside the block, each of ``signals`` raises ``make(signal)`` where the program is; the
    previous handlers come back after it. Outside the main thread (where Python allows no
    handlers) the block runs with signals as they were."""
    def handler(signum: int, frame: object) -> None:
        raise make(signal.Signals(signum))

    previous = {}
    try:
        for sig in signals:
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: leave signals alone
        for sig, old in previous.items():
            signal.signal(sig, old)
        yield
        return
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
