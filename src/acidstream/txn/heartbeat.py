"""Keeps a transaction batch's txns alive while the client writes (as Hive's ``TransactionBatch`` does)."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

#: Fallback when the metastore's txn timeout is unknown or zero, as in Hive's DbTxnManager.
DEFAULT_INTERVAL = 60.0


def heartbeat_interval(txn_timeout: float | None) -> float:
    """Hive's ``getHeartbeatInterval``: half the txn timeout, 60 s when there is none."""
    if not txn_timeout or txn_timeout <= 0:
        return DEFAULT_INTERVAL
    return txn_timeout / 2


class Heartbeater:
    """A daemon thread calling ``beat`` every ``interval`` s after a random initial delay.

    The jitter (``interval * 0.75 * random()``) keeps many agents started together from beating in step.
    ``beat`` is responsible for its own locking; a failing beat is logged and retried at the next interval,
    because a transient metastore error must not kill a healthy batch.
    """

    def __init__(self, interval: float, beat: Callable[[], None], name: str) -> None:
        self.interval = interval
        self._beat = beat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        if self._stop.wait(self.interval * 0.75 * random.random()):
            return
        while not self._stop.is_set():
            try:
                self._beat()
            except Exception:
                log.exception("heartbeat failed; retrying in %.1f s", self.interval)
            if self._stop.wait(self.interval):
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)
