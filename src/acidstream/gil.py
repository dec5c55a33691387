"""A shorter interpreter switch interval while work that releases the GIL many times is running.

Every pyarrow/numpy kernel and SQLite statement releases the GIL, and taking it back from a thread that is running
Python can take the interpreter's whole switch interval (5 ms by default): a streaming commit makes a couple of
hundred such calls, so beside one CPU-busy Python thread it took a second instead of 11 ms (the "GIL convoy",
``bench/bench_streaming_contention.py``). While at least one :class:`ShortSwitchInterval` section runs anywhere
in the process, the interval is lowered, so other threads hand the GIL back sooner; the last section to leave
restores the interval it found, unless somebody else changed it meanwhile (theirs is then left alone).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import TypeVar

T = TypeVar("T")

#: 50 µs: beside a busy thread, streaming ran ~15× faster than with the default 5 ms (1e-4: ~14×, 2e-5: ~17×,
#: each halving costs the other threads more hand-overs); alone it changes nothing.
DEFAULT_SWITCH_INTERVAL = 5e-5

_lock = threading.Lock()
_depth = 0  # sections running now, all threads
_restore: float | None = None  # the interval found by the first section, if it was lowered
_ours: float | None = None  # the interval set then (as the interpreter reports it back)


class ShortSwitchInterval:
    """A reusable, re-entrant context manager; ``seconds=None`` makes it do nothing."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float | None = DEFAULT_SWITCH_INTERVAL) -> None:
        if seconds is not None and seconds <= 0:
            raise ValueError(f"switch interval must be positive, got {seconds}")
        self.seconds = seconds

    def __enter__(self) -> None:
        global _depth, _restore, _ours
        if self.seconds is None:
            return
        with _lock:
            _depth += 1
            current = sys.getswitchinterval()
            if current > self.seconds:  # never lengthen an interval somebody chose shorter
                if _restore is None:
                    _restore = current
                sys.setswitchinterval(self.seconds)
                _ours = sys.getswitchinterval()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        global _depth, _restore, _ours
        if self.seconds is None:
            return
        with _lock:
            if _depth == 0:  # entered before a fork, in a parent process
                return
            _depth -= 1
            if _depth == 0 and _restore is not None:
                if sys.getswitchinterval() == _ours:
                    sys.setswitchinterval(_restore)
                _restore = _ours = None


def _after_fork_in_child() -> None:
    """Only the forking thread lives on in a child: the sections of the parent's other threads never end here
    (and one of them may have held the lock), so the child starts afresh with the interval the parent found."""
    global _lock, _depth, _restore, _ours
    _lock = threading.Lock()
    if _restore is not None and sys.getswitchinterval() == _ours:
        sys.setswitchinterval(_restore)
    _depth, _restore, _ours = 0, None, None


os.register_at_fork(after_in_child=_after_fork_in_child)


def each_in(section: ShortSwitchInterval, items: Iterator[T]) -> Iterator[T]:
    """``items``, each one produced inside ``section``; the consumer's code between them runs outside it."""
    while True:
        with section:
            try:
                item = next(items)
            except StopIteration:
                return
        yield item
