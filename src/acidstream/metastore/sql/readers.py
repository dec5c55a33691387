"""Snapshot readers registered for the duration of a scan (Hive 3's MIN_HISTORY_LEVEL idea, for readers
that hold no txn): the compaction cleaner deletes nothing a registered reader may still be reading.

A registration's id comes from the same counter (``NEXT_READER_ID``) that numbers compactions' publications, so
"registered before the output moved into place" is a comparison of two ids, never of two clocks. A reader that
stops heartbeating (a crashed process) is no longer waited for after the reader timeout.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, Connection, delete, func, insert, select, update

from acidstream.metastore.sql import catalog
from acidstream.metastore.sql import schema as s
from acidstream.metastore.sql.counters import now_ms, take_ids

SR = s.snapshot_readers.c


def register(
    conn: Connection,
    db: str,
    table: str,
    *,
    user: str | None,
    host: str | None,
    agent_info: str | None,
    lease_ms: int | None = None,
) -> int:
    """Register a reader of ``db.table``; ``lease_ms``: how long it may go without a heartbeat before it is no
    longer waited for (None: the timeout of whoever asks)."""
    catalog.require_table_id(conn, db, table)
    reader_id = take_ids(conn, s.next_reader_id)
    now = now_ms()
    conn.execute(
        insert(s.snapshot_readers).values(
            sr_id=reader_id,
            sr_database=db,
            sr_table=table,
            sr_started=now,
            sr_last_heartbeat=now,
            sr_user=user,
            sr_host=host,
            sr_agent_info=agent_info,
            sr_lease_ms=lease_ms,
        )
    )
    return reader_id


def heartbeat(conn: Connection, reader_ids: Sequence[int], lease_ms: int | None = None) -> list[int]:
    """Refresh registrations (giving them lease ``lease_ms`` from now on, if not None); returns the ids that no
    longer exist (expired and purged, or unregistered)."""
    ids = sorted(set(reader_ids))
    if not ids:
        return []
    values: dict[str, int] = {"sr_last_heartbeat": now_ms()}
    if lease_ms is not None:
        values["sr_lease_ms"] = lease_ms
    conn.execute(update(s.snapshot_readers).where(SR.sr_id.in_(ids)).values(values))
    alive = set(conn.execute(select(SR.sr_id).where(SR.sr_id.in_(ids))).scalars())
    return [i for i in ids if i not in alive]


def unregister_by_agent(conn: Connection, agent_info: str) -> int:
    """End every registration made with ``agent_info`` (a reader that knows its reads are over)."""
    return int(conn.execute(delete(s.snapshot_readers).where(SR.sr_agent_info == agent_info)).rowcount)


def unregister(conn: Connection, reader_ids: Sequence[int]) -> None:
    if reader_ids:
        conn.execute(delete(s.snapshot_readers).where(SR.sr_id.in_(list(reader_ids))))


def alive(now: int, timeout_ms: int) -> ColumnElement[bool]:
    """A registration heartbeated within its own lease (``timeout_ms`` for those that recorded none)."""
    return SR.sr_last_heartbeat + func.coalesce(SR.sr_lease_ms, timeout_ms) >= now


def purge(conn: Connection, timeout_ms: int) -> int:
    """Forget registrations silent for longer than their lease (their process is gone)."""
    return int(conn.execute(delete(s.snapshot_readers).where(~alive(now_ms(), timeout_ms))).rowcount)


def active(conn: Connection, db: str | None = None, table: str | None = None) -> list[tuple[int, str, str]]:
    """(id, db, table) of the registrations, oldest first (optionally of one table)."""
    query = select(SR.sr_id, SR.sr_database, SR.sr_table).order_by(SR.sr_id)
    if db is not None:
        query = query.where(SR.sr_database == db)
    if table is not None:
        query = query.where(SR.sr_table == table)
    return [(r.sr_id, r.sr_database, r.sr_table) for r in conn.execute(query)]
