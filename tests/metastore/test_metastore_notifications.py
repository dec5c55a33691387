"""Notification ids: published in visibility order, so a polling consumer never misses or reorders an event."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from acidstream.metastore import MetastoreFacade, NotificationEvent
from acidstream.metastore.sql import notifications
from acidstream.metastore.sql.engine import Database

WRITERS = 4
CYCLES = 40


def test_event_of_a_slow_transaction_is_not_overtaken(ms: MetastoreFacade) -> None:
    """An event committed after a later-written one still gets the next id, after the ones already read."""
    if ms.backend.dialect != "postgresql":
        pytest.skip("SQLite has one writer at a time: no other commit can happen meanwhile")
    start = ms.current_notification_event_id()
    db = Database(ms.url)
    try:
        with db.engine.connect() as slow, slow.begin():
            notifications.emit(slow, "SLOW")
            ms.open_txns()  # writes and commits its event while SLOW's transaction is still open
            seen = ms.notifications(start)
            assert [(e.event_id, e.event_type) for e in seen] == [(start + 1, "OPEN_TXN")]
        late = ms.notifications(start + 1)
        assert [(e.event_id, e.event_type) for e in late] == [(start + 2, "SLOW")]
        assert ms.current_notification_event_id() == start + 2
    finally:
        db.dispose()


def test_rolled_back_events_leave_no_gap(ms: MetastoreFacade) -> None:
    start = ms.current_notification_event_id()
    db = Database(ms.url)
    try:
        with db.engine.connect() as conn, conn.begin() as txn:
            notifications.emit(conn, "ROLLED_BACK")
            txn.rollback()
    finally:
        db.dispose()
    ms.open_txns()
    assert [(e.event_id, e.event_type) for e in ms.notifications(start)] == [(start + 1, "OPEN_TXN")]


def _writer(url: str, warehouse: str) -> None:
    with MetastoreFacade.connect(url, warehouse=warehouse) as m:
        for _ in range(CYCLES):
            txns = m.open_txns(2)
            m.allocate_table_write_ids(txns, "db.t")
            m.commit_txn(txns[0])
            m.abort_txn(txns[1])


def _drain(ms: MetastoreFacade, after: int, out: list[NotificationEvent]) -> int:
    """Poll until nothing new (small pages, so several publishers and readers interleave); the new position."""
    while True:
        page = ms.notifications(after, limit=7)
        if not page:
            return after
        ids = [e.event_id for e in page]
        assert ids == list(range(after + 1, after + 1 + len(page))), f"after {after}: got {ids}"
        out.extend(page)
        after = ids[-1]


@pytest.mark.slow
def test_consumer_sees_every_event_once_in_order_under_concurrent_writers(
    ms: MetastoreFacade, warehouse: Path
) -> None:
    start = ms.current_notification_event_id()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(ms.url, str(warehouse))) for _ in range(WRITERS)]
    for p in procs:
        p.start()
    seen: list[NotificationEvent] = []
    after = start
    while any(p.is_alive() for p in procs):
        after = _drain(ms, after, seen)
        time.sleep(0.005)
    for p in procs:
        p.join()
        assert p.exitcode == 0
    _drain(ms, after, seen)
    expected = {"OPEN_TXN": 1, "ALLOC_WRITE_ID": 1, "COMMIT_TXN": 1, "ABORT_TXN": 1}
    assert len(seen) == WRITERS * CYCLES * len(expected)
    for kind, per_cycle in expected.items():
        assert sum(e.event_type == kind for e in seen) == WRITERS * CYCLES * per_cycle
    opened = {e.txn_id: i for i, e in enumerate(seen) if e.event_type == "OPEN_TXN"}
    for i, e in enumerate(seen):  # a txn's later events never come before the event that opened it
        if e.event_type in ("ALLOC_WRITE_ID", "COMMIT_TXN"):
            assert opened[e.txn_id] < i
