"""Signals that end long work (Ctrl-C, SIGTERM from ``timeout`` or a job scheduler, SIGHUP from a
closed terminal) the way an exception does, so that what the work leaves behind is cleaned up or
written out.

``terminating`` is for work that writes files (a compile, an artifact write): the signal unwinds
the stack, ``finally`` clauses remove temporaries, then the signal is delivered again so that the
process ends as it would have without the block. ``held`` keeps such a signal waiting over the few
steps that must not be cut in the middle (renaming an artifact into place, removing a temporary).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator

_TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised inside ``terminating`` where the program is. Like
    KeyboardInterrupt it is no ``Exception``: ``except Exception`` does not swallow it."""

    def __init__(self, sig: signal.Signals) -> None:
        super().__init__(f"interrupted by {sig.name}")
        self.signal = sig


class _Holds:
    """How many ``held`` blocks are open, and the first signal that arrived inside them."""

    depth = 0
    pending: BaseException | None = None


@contextlib.contextmanager
def raising_on(signals: tuple[signal.Signals, ...], make: Callable[[signal.Signals], BaseException]) -> Iterator[None]:
    """Inside the block, each of ``signals`` raises ``make(signal)`` where the program is (or, inside
    ``held``, where that ends); the previous handlers come back after it. Outside the main thread
    (where Python allows no handlers) the block runs with signals as they were."""

    def handler(signum: int, frame: object) -> None:
        exc = make(signal.Signals(signum))
        if _Holds.depth:
            _Holds.pending = _Holds.pending or exc
            return
        raise exc

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


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Inside the block, a signal that ``raising_on`` turns into an exception waits, and is raised
    when the outermost ``held`` block ends: a rename or a cleanup is never cut in the middle."""
    _Holds.depth += 1
    try:
        yield
    finally:
        _Holds.depth -= 1
        if not _Holds.depth and _Holds.pending is not None:
            exc, _Holds.pending = _Holds.pending, None
            raise exc


def _interruption(sig: signal.Signals) -> BaseException:
    return KeyboardInterrupt() if sig == signal.SIGINT else Terminated(sig)


@contextlib.contextmanager
def terminating() -> Iterator[None]:
    """Inside the block, SIGTERM and SIGHUP raise ``Terminated`` and SIGINT raises KeyboardInterrupt
    where the program is (inside ``held``, where that ends), so that ``finally`` clauses run. When a
    ``Terminated`` leaves the block, the signal is delivered again under the handlers from before
    it: with the default one, the process ends by the signal, after its cleanup. A signal that is
    ignored, or whose handler Python did not set, is left alone; so is SIGINT under a handler of
    the program's own."""
    sigs = [s for s in _TERMINATING if signal.getsignal(s) not in (signal.SIG_IGN, None)]
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        sigs.append(signal.SIGINT)
    try:
        with raising_on(tuple(sigs), _interruption):
            yield
    except Terminated as e:
        signal.raise_signal(e.signal)  # the handler from before: ends the process, or raises
        raise
