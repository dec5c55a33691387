"""The compaction queue's state machine (Hive's COMPACTION_QUEUE codes, §9.4).

initiated → working (a worker claims it) → ready for cleaning → succeeded; any step may go to failed.
Finished entries move to COMPLETED_COMPACTIONS. Cleaning also forgets the aborted txns' components the
compaction made obsolete, so their write ids stop being exceptions once their data is gone.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, delete, insert, select, true, update

from acidstream.errors import InvalidObjectException, NoSuchObjectException
from acidstream.metastore import catalog
from acidstream.metastore import schema as s
from acidstream.metastore.counters import now_ms, take_ids
from acidstream.metastore.models import CompactionInfo, TxnState

CQ = s.compaction_queue.c
STATES = {
    "i": "initiated",
    "w": "working",
    "r": "ready for cleaning",
    "f": "failed",
    "s": "succeeded",
    "a": "did not initiate",
}
KINDS = {"major": "a", "minor": "i"}
_KIND_NAMES = {v: k for k, v in KINDS.items()}


def _info(row: Any, prefix: str) -> CompactionInfo:
    def col(name: str) -> Any:
        return getattr(row, f"{prefix}_{name}")

    return CompactionInfo(
        id=col("id"),
        db=col("database"),
        table=col("table"),
        partition=col("partition"),
        kind=_KIND_NAMES[col("type")],
        state=STATES[col("state")],
        worker_id=col("worker_id"),
        enqueue_time=col("enqueue_time"),
        start=col("start"),
        end=col("end"),
        highest_write_id=col("highest_write_id"),
        error_message=col("error_message"),
    )


def enqueue(conn: Connection, db: str, table: str, partition: str | None, kind: str) -> int:
    """Queue a compaction; an entry already initiated or working for the same target is returned instead."""
    if kind not in KINDS:
        raise InvalidObjectException(f"compaction kind must be 'major' or 'minor', not {kind!r}")
    catalog.require_table_id(conn, db, table)
    if not catalog.is_transactional_table(conn, db, table):
        raise InvalidObjectException(f"Table {db}.{table} is not transactional: nothing to compact")
    target = and_(
        CQ.cq_database == db,
        CQ.cq_table == table,
        CQ.cq_partition.is_(None) if partition is None else CQ.cq_partition == partition,
        CQ.cq_state.in_(["i", "w"]),
    )
    existing = conn.execute(select(CQ.cq_id).where(target)).scalar()
    if existing is not None:
        return int(existing)
    cq_id = take_ids(conn, s.next_compaction_queue_id)
    conn.execute(
        insert(s.compaction_queue).values(
            cq_id=cq_id,
            cq_database=db,
            cq_table=table,
            cq_partition=partition,
            cq_state="i",
            cq_type=KINDS[kind],
            cq_enqueue_time=now_ms(),
        )
    )
    return cq_id


def claim_next(conn: Connection, worker_id: str) -> CompactionInfo | None:
    """Claim the oldest initiated entry for ``worker_id`` (initiated → working)."""
    row = conn.execute(
        select(s.compaction_queue).where(CQ.cq_state == "i").order_by(CQ.cq_id).limit(1).with_for_update()
    ).first()
    if row is None:
        return None
    conn.execute(
        update(s.compaction_queue)
        .where(CQ.cq_id == row.cq_id)
        .values(cq_state="w", cq_worker_id=worker_id, cq_start=now_ms())
    )
    return _info(conn.execute(select(s.compaction_queue).where(CQ.cq_id == row.cq_id)).one(), "cq")


def _require(conn: Connection, cq_id: int, states: tuple[str, ...]) -> Any:
    row = conn.execute(select(s.compaction_queue).where(CQ.cq_id == cq_id).with_for_update()).first()
    if row is None:
        raise NoSuchObjectException(f"No compaction queue entry {cq_id}")
    if row.cq_state not in states:
        expected = " or ".join(STATES[x] for x in states)
        raise InvalidObjectException(f"compaction {cq_id} is {STATES[row.cq_state]}, not {expected}")
    return row


def mark_compacted(conn: Connection, cq_id: int, highest_write_id: int | None) -> None:
    _require(conn, cq_id, ("w",))
    conn.execute(
        update(s.compaction_queue)
        .where(CQ.cq_id == cq_id)
        .values(cq_state="r", cq_highest_write_id=highest_write_id)
    )


def _finish(conn: Connection, row: Any, state: str, message: str | None) -> None:
    values = {c.name.replace("cq_", "cc_", 1): getattr(row, c.name) for c in s.compaction_queue.c}
    values.update(cc_state=state, cc_end=now_ms(), cc_error_message=message)
    conn.execute(insert(s.completed_compactions).values(values))
    conn.execute(delete(s.compaction_queue).where(CQ.cq_id == row.cq_id))


def mark_cleaned(conn: Connection, cq_id: int) -> None:
    """Succeeded: forget aborted components at or below the compaction's highest write id."""
    row = _require(conn, cq_id, ("r",))
    tc, t2w, t = s.txn_components.c, s.txn_to_write_id.c, s.txns.c
    aborted = select(t.txn_id).where(t.txn_state == TxnState.ABORTED.value)
    target = and_(
        tc.tc_database == row.cq_database,
        tc.tc_table == row.cq_table,
        tc.tc_txnid.in_(aborted),
        true() if row.cq_partition is None else tc.tc_partition == row.cq_partition,
        true() if row.cq_highest_write_id is None else tc.tc_writeid <= row.cq_highest_write_id,
    )
    conn.execute(delete(s.txn_components).where(target))
    still_written = (
        select(tc.tc_txnid)
        .where(tc.tc_txnid == t2w.t2w_txnid, tc.tc_database == t2w.t2w_database, tc.tc_table == t2w.t2w_table)
        .exists()
    )
    conn.execute(
        delete(s.txn_to_write_id).where(
            t2w.t2w_database == row.cq_database,
            t2w.t2w_table == row.cq_table,
            t2w.t2w_txnid.in_(aborted),
            true() if row.cq_highest_write_id is None else t2w.t2w_writeid <= row.cq_highest_write_id,
            ~still_written,
        )
    )
    _finish(conn, row, "s", None)


def mark_failed(conn: Connection, cq_id: int, message: str) -> None:
    row = _require(conn, cq_id, ("i", "w", "r"))
    _finish(conn, row, "f", message)


def show(conn: Connection) -> list[CompactionInfo]:
    queued = [_info(r, "cq") for r in conn.execute(select(s.compaction_queue).order_by(CQ.cq_id))]
    done = [
        _info(r, "cc")
        for r in conn.execute(select(s.completed_compactions).order_by(s.completed_compactions.c.cc_id))
    ]
    return sorted(done + queued, key=lambda c: c.id)
