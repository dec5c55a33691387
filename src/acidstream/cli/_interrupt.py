"""SIGINT and SIGTERM end a command the same way: what is open is aborted, what was committed is said.

Python turns SIGINT into ``KeyboardInterrupt``; :func:`raise_on_sigterm` makes SIGTERM (``timeout``, ``kill``,
a supervisor stopping a service) take that same path, as :class:`Interrupted`, so every ``with`` that aborts
an open transaction on an exception aborts it on SIGTERM too. Only the ``acidstream`` command installs it: the
library leaves process-wide signal handling to its user. The command then exits with ``128 + signal``
(130 for SIGINT, 143 for SIGTERM), as a shell reports a process the signal ended.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


def raise_on_sigterm() -> None:
    """SIGTERM raises :class:`Interrupted` in the main thread, as SIGINT raises ``KeyboardInterrupt``."""
    signal.signal(signal.SIGTERM, _raise)


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
