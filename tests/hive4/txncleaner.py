"""Waiting for Hive's txn cleaner (``AcidTxnCleanerService``), which deletes aborted and committed txns that
recorded no write: a test that wrote under aborted txns reads again after a pass, when a txn that lost its
record would show its rows as committed."""

from __future__ import annotations

import time

from acidstream import Metastore
from acidstream.errors import MetastoreUnavailable

#: Seconds a wait for Hive's housekeeping is given before the test fails (the harness runs it every 10 s).
PATIENCE = 300


def cleaner_pass(ms: Metastore) -> None:
    """Returns once Hive's txn cleaner has run since the call: a txn aborted now without a write (which the
    cleaner deletes; a later committed one keeps it from being the highest) is gone."""
    sentinel, later = ms.open_txns(2)
    ms.abort_txn(sentinel)
    ms.commit_txn(later)
    deadline = time.monotonic() + PATIENCE
    while True:
        try:
            if not any(t.txn_id == sentinel for t in ms.show_txns()):
                return
        except MetastoreUnavailable:  # retryable: a call the metastore dropped is asked again
            pass
        assert time.monotonic() < deadline, f"Hive's txn cleaner left txnid:{sentinel} for {PATIENCE}s"
        time.sleep(1)
