"""Named fault points: the places inside the library where tests inject failures for real.

A fault point is a call such as ``fault_point("metastore.commit")`` at a spot where a crash, an I/O error or
a delay matters (inside the commit's DB transaction, between an ORC footer and its side-file entry...).
Nothing is armed in production, and then a point costs one test of an empty dict.

Tests arm points in-process::

    with armed("orc.flush.tail", raise_error(OSError(errno.EIO, "injected"))):
        ...

A subprocess (a writer to ``kill -9``) takes its faults from the environment variable ``ACIDSTREAM_FAULTS``,
read once when this module is imported: ``name=action[@N][;name=action[@N]...]`` where ``action`` is
``sleep:SECONDS``, ``kill`` (SIGKILL of the process itself) or ``oserror:ERRNO`` (``ENOSPC``, ``EIO``...), and
``@N`` fires it at the N-th time the point is reached only (default: every time).

:func:`substitute` is the other kind of point: where the library takes an object a test may replace, such as
the filesystem of a table location (``storage.filesystem``), which a test wraps in one that fails after so
many bytes.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

#: The environment variable a subprocess reads its faults from (see the module docstring).
FAULTS_ENV = "ACIDSTREAM_FAULTS"

#: What a fault does when it fires: it gets the point's subject (None for :func:`fault_point`) and returns
#: the subject to use instead (ignored for :func:`fault_point`); it may also raise, sleep or kill.
Action = Callable[[Any], Any]


class Fault:
    """An action armed at one point, firing from its ``at``-th hit on, ``times`` times (None: every time)."""

    def __init__(self, action: Action, *, at: int = 1, times: int | None = None) -> None:
        if at < 1 or (times is not None and times < 1):
            raise ValueError(f"a fault fires from hit at >= 1, times >= 1 (got at={at}, times={times})")
        self.action, self.at, self.times = action, at, times
        self.hits = 0  # how often the point was reached while armed
        self.fired = 0  # how often the action ran
        self._lock = threading.Lock()

    def __call__(self, subject: Any) -> Any:
        with self._lock:
            self.hits += 1
            due = self.hits >= self.at and (self.times is None or self.fired < self.times)
            if due:
                self.fired += 1
        return self.action(subject) if due else subject


_ARMED: dict[str, Fault] = {}


def fault_point(name: str) -> None:
    """Run the fault armed at ``name``, if any: it may raise, sleep or kill this process."""
    if _ARMED:
        fault = _ARMED.get(name)
        if fault is not None:
            fault(None)


def substitute(name: str, value: T) -> T:
    """``value``, or what the fault armed at ``name`` makes of it (a failing filesystem, say)."""
    if _ARMED:
        fault = _ARMED.get(name)
        if fault is not None:
            replaced: T = fault(value)
            return replaced
    return value


def arm(name: str, action: Action, *, at: int = 1, times: int | None = None) -> Fault:
    """Arm ``action`` at the point ``name`` (replacing what was armed there); returns the fault (its counts)."""
    fault = Fault(action, at=at, times=times)
    _ARMED[name] = fault
    return fault


def disarm(name: str | None = None) -> None:
    """Disarm one point, or every point."""
    if name is None:
        _ARMED.clear()
    else:
        _ARMED.pop(name, None)


@contextmanager
def armed(name: str, action: Action, *, at: int = 1, times: int | None = None) -> Iterator[Fault]:
    """:func:`arm` for the duration of a ``with`` block."""
    fault = arm(name, action, at=at, times=times)
    try:
        yield fault
    finally:
        if _ARMED.get(name) is fault:
            del _ARMED[name]


# --- actions ----------------------------------------------------------------------------------------------


def raise_error(error: BaseException) -> Action:
    """Raise ``error`` at the point."""

    def action(_subject: Any) -> Any:
        raise error

    return action


def sleep(seconds: float) -> Action:
    """Wait at the point (a window for another process to act, such as a kill mid-commit)."""

    def action(subject: Any) -> Any:
        time.sleep(seconds)
        return subject

    return action


def kill() -> Action:
    """SIGKILL this process at the point: no cleanup, no ``finally``, as a machine or OOM kill."""

    def action(_subject: Any) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # the signal is delivered asynchronously: never run past the point
        return None

    return action


def os_error(code: int) -> Action:
    """Raise the OSError of ``code`` (errno.ENOSPC, errno.EIO...), as a failing disk would."""
    return raise_error(OSError(code, f"{os.strerror(code)} (injected)"))


# --- faults from the environment ---------------------------------------------------------------------------


def parse_faults(spec: str) -> dict[str, Fault]:
    """Faults from the ``ACIDSTREAM_FAULTS`` syntax (see the module docstring); ValueError names a bad entry."""
    faults: dict[str, Fault] = {}
    for entry in filter(None, (e.strip() for e in spec.split(";"))):
        name, sep, what = entry.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{FAULTS_ENV}: {entry!r} is not name=action")
        what, _, nth = what.partition("@")
        kind, _, arg = what.strip().partition(":")
        try:
            at = int(nth) if nth else 1
            if kind == "sleep":
                action = sleep(float(arg))
            elif kind == "kill" and not arg:
                action = kill()
            elif kind == "oserror":
                action = os_error(getattr(errno, arg) if not arg.isdigit() else int(arg))
            else:
                raise ValueError("actions are sleep:SECONDS, kill, oserror:ERRNO")
            faults[name.strip()] = Fault(action, at=at, times=1 if nth else None)
        except (ValueError, AttributeError) as exc:
            raise ValueError(f"{FAULTS_ENV}: bad fault {entry!r}: {exc}") from None
    return faults


_ARMED.update(parse_faults(os.environ.get(FAULTS_ENV, "")))
