"""SIGINT and SIGTERM end a command the same way: what is open is aborted, what was committed is said.

Python turns SIGINT into ``KeyboardInterrupt``; :func:`raise_on_signals` makes SIGTERM (``timeout``, ``kill``,
a supervisor stopping a service) take that same path, both as :class:`Interrupted`, so every ``with`` that
aborts an open transaction on an exception aborts it on SIGTERM too. Only the ``acidstream`` command installs
it: the library leaves process-wide signal handling to its user. The command then exits with ``128 + signal``
(130 for SIGINT, 143 for SIGTERM), as a shell reports a process the signal ended.

An exception raised by a signal handler lands wherever the main thread happens to be, and code in between (a
pyarrow kernel, a pool's future) may turn it into another error or drop it. So long-running work runs inside
:func:`deferred_interrupts`: the signal is held there, and raised at the next :func:`checkpoint` the work
reaches (a place where it can stop cleanly) or at the block's end. A second signal is raised at once.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType


class Interrupted(KeyboardInterrupt):
    """A command ended by a signal; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signal_of(exc: KeyboardInterrupt) -> int:
    """The signal behind ``exc``: its own for :class:`Interrupted`, SIGINT for Python's own."""
    return exc.signum if isinstance(exc, Interrupted) else signal.SIGINT


def exit_code(exc: KeyboardInterrupt) -> int:
    return 128 + signal_of(exc)


@dataclass
class _Held:
    """Signals received inside :func:`deferred_interrupts`, raised when the outermost such block ends."""

    depth: int = 0
    signals: list[int] = field(default_factory=list)


_HELD = _Held()


def _raise(signum: int, _frame: FrameType | None) -> None:
    if _HELD.depth and not _HELD.signals:
        _HELD.signals.append(signum)
        return
    raise Interrupted(signum)


def raise_on_signals() -> None:
    """SIGINT and SIGTERM raise :class:`Interrupted` in the main thread (held inside
    :func:`deferred_interrupts`)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _raise)


def checkpoint() -> None:
    """A place where the work can stop cleanly: a signal held by :func:`deferred_interrupts` is raised here."""
    if _HELD.signals:
        signum = _HELD.signals[0]
        _HELD.signals.clear()
        raise Interrupted(signum)


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the work inside reaches a :func:`checkpoint` or the block ends, so that
    it is never cut at an arbitrary place (a commit and the count of what it committed stay together)."""
    _HELD.depth += 1
    try:
        yield
    finally:
        _HELD.depth -= 1
        held = [] if _HELD.depth else _HELD.signals[:1]
        if not _HELD.depth:
            _HELD.signals.clear()  # also when the block failed: its error ends the command
    if held:
        raise Interrupted(held[0])


@contextmanager
def stopping_gracefully(stop: Callable[[], None]) -> Iterator[None]:
    """For daemons that stop at a clean point: SIGINT and SIGTERM call ``stop()`` instead of raising at once.

    The body is expected to return soon after ``stop()``; then :class:`Interrupted` is raised, so that the
    command exits as any interrupted command does.
    """
    received: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        raise Interrupted(received[0])
