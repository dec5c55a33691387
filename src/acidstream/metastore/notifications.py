"""The notification log: every catalog/txn/write event, written in the same DB transaction as the change.

Event ids come from a row-locked counter so they are gap-free and in commit order: a replication reader that
polls ``after_event_id`` can never skip an event committed late.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, insert, select

from acidstream.metastore import schema as s
from acidstream.metastore.counters import now_ms, peek_next, take_ids
from acidstream.metastore.models import NotificationEvent


def emit(
    conn: Connection,
    event_type: str,
    *,
    db: str | None = None,
    table: str | None = None,
    partition: str | None = None,
    txn_id: int | None = None,
    write_id: int | None = None,
    message: dict[str, Any] | None = None,
) -> int:
    event_id = take_ids(conn, s.notification_sequence)
    conn.execute(
        insert(s.notification_log).values(
            nl_id=event_id,
            event_time=now_ms(),
            event_type=event_type,
            db_name=db,
            tbl_name=table,
            partition=partition,
            txn_id=txn_id,
            write_id=write_id,
            message=json.dumps(message or {}, sort_keys=True),
        )
    )
    return event_id


def events(conn: Connection, after_event_id: int, limit: int) -> list[NotificationEvent]:
    n = s.notification_log.c
    rows = conn.execute(
        select(s.notification_log).where(n.nl_id > after_event_id).order_by(n.nl_id).limit(limit)
    ).all()
    return [
        NotificationEvent(
            event_id=r.nl_id,
            event_time=r.event_time,
            event_type=r.event_type,
            db=r.db_name,
            table=r.tbl_name,
            partition=r.partition,
            txn_id=r.txn_id,
            write_id=r.write_id,
            message=json.loads(r.message),
        )
        for r in rows
    ]


def current_event_id(conn: Connection) -> int:
    return peek_next(conn, s.notification_sequence) - 1
