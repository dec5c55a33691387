"""Waiting for a lock the metastore queued: what ``DbLockManager`` does on every backend.

Poll with a growing pause until the lock is granted or the wait's limit passes; then withdraw the request, unless
it was granted in the meantime, and raise :class:`LockTimeoutException` naming what it waited for.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from acidstream.errors import LockTimeoutException
from acidstream.metastore.models import LockResponse, LockState

#: A check returns the lock's state and, while it waits, what blocks it (or None if the backend does not say).
Check = Callable[[], tuple[LockState, str | None]]


def wait_for_lock(
    lock_id: int,
    check: Check,
    withdraw: Callable[[], bool],
    limit: float,
    *,
    first_pause: float,
    max_pause: float,
    where: str = "",
    blocker: Callable[[], str | None] | None = None,
) -> LockResponse:
    """Poll ``check`` until the lock leaves WAITING (its response) or ``limit`` seconds pass; then ``withdraw``
    the request, which says whether it turned out granted after all (the response), else raise, naming what
    blocks it: what ``check`` said, else what ``blocker`` says (asked once, before the request is withdrawn)."""
    deadline = time.monotonic() + limit
    pause, waiting_for = first_pause, None
    while time.monotonic() < deadline:
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, max_pause)
        state, waiting_for = check()
        if state is not LockState.WAITING:
            return LockResponse(lock_id, state)
    if blocker is not None and not waiting_for:
        waiting_for = blocker()
    if withdraw():
        return LockResponse(lock_id, LockState.ACQUIRED)
    waiting = f": waiting for {waiting_for}" if waiting_for else ""
    raise LockTimeoutException(f"lock {lock_id} not acquired within {limit:g}s{where}{waiting}")
