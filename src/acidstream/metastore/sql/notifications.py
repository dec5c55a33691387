"""The notification log: every catalog/txn/write event, written in the same DB transaction as the change.

Writers only insert their event rows (ordered by an auto-increment ``nl_seq``) with no id: taking ids from a
row-locked counter would hold that row through every writer's commit and serialise them all. Ids are
*published* by readers instead: under the counter's row lock, the committed unpublished events get the next
consecutive ids in ``nl_seq`` order. Only committed rows are ever published and publishers are serialised, so
ids become visible in increasing order with no gaps: a replication reader polling ``after_event_id`` never
skips an event, whatever order concurrent writers commit in.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select, update

from acidstream.metastore.models import NotificationEvent, TxnStatus
from acidstream.metastore.sql import schema as s
from acidstream.metastore.sql.counters import now_ms
from acidstream.metastore.sql.prepared import Prepared

N = s.notification_log.c
SEQ = s.notification_sequence.c

_INSERT = Prepared(insert(s.notification_log))
_PUBLISH = update(s.notification_log).where(N.nl_seq == bindparam("seq")).values(nl_id=bindparam("event_id"))


def event(
    event_type: str,
    *,
    db: str | None = None,
    table: str | None = None,
    partition: str | None = None,
    txn_id: int | None = None,
    write_id: int | None = None,
    message: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The row of one event, for ``emit_many``."""
    return {
        "event_time": now_ms(),
        "event_type": event_type,
        "db_name": db,
        "tbl_name": table,
        "partition": partition,
        "txn_id": txn_id,
        "write_id": write_id,
        "message": json.dumps(message or {}, sort_keys=True),
    }


def emit_many(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Insert events in list order, in one statement."""
    _INSERT.run(conn, rows)


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
) -> None:
    emit_many(
        conn,
        [
            event(
                event_type,
                db=db,
                table=table,
                partition=partition,
                txn_id=txn_id,
                write_id=write_id,
                message=message,
            )
        ],
    )


def has_unpublished(conn: Connection) -> bool:
    """Whether committed events wait for ids (a cheap read, so idle polls need no write transaction)."""
    return conn.execute(select(N.nl_seq).where(N.nl_id.is_(None)).limit(1)).first() is not None


def publish(conn: Connection, limit: int | None = None) -> int:
    """Give the next ids to (up to ``limit``) committed unpublished events in write order; returns how many.

    The counter's row lock serialises publishers; on PostgreSQL the statements after it see every event
    committed before it was granted, including the previous publisher's ids.
    """
    next_id = int(conn.execute(select(SEQ.next_event_id).with_for_update()).scalar_one())
    query = select(N.nl_seq).where(N.nl_id.is_(None)).order_by(N.nl_seq)
    if limit is not None:
        query = query.limit(limit)
    seqs = list(conn.execute(query).scalars())
    if seqs:
        conn.execute(_PUBLISH, [{"seq": q, "event_id": next_id + i} for i, q in enumerate(seqs)])
        conn.execute(update(s.notification_sequence).values(next_event_id=next_id + len(seqs)))
    return len(seqs)


def events(conn: Connection, after_event_id: int, limit: int) -> list[NotificationEvent]:
    rows = conn.execute(
        select(s.notification_log).where(N.nl_id > after_event_id).order_by(N.nl_id).limit(limit)
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


def recorded_lengths(
    conn: Connection, db: str, table: str, partition: str | None, low: int, high: int
) -> dict[str, int]:
    """The lengths the commits of write ids ``low..high`` recorded for the files they wrote in ``partition``
    (None: an unpartitioned table), in their ACID_WRITE events: per file, named by its directory and its own
    name (``delta_x_y/bucket_n``), the longest one. A file keeps at least that many bytes: a batch's later
    commits only add to it. Through the write ids' txns, so the log is read by its txn index."""
    t2w, txns = s.txn_to_write_id.c, s.txns.c
    messages = conn.execute(
        select(N.message)
        .join(s.txn_to_write_id, t2w.t2w_txnid == N.txn_id)
        .join(s.txns, txns.txn_id == N.txn_id)
        .where(
            t2w.t2w_database == db,
            t2w.t2w_table == table,
            t2w.t2w_writeid.between(low, high),
            txns.txn_state == TxnStatus.COMMITTED.value,
            N.event_type == "ACID_WRITE",
            N.db_name == db,
            N.tbl_name == table,
            N.partition.is_(None) if partition is None else N.partition == partition,
        )
    ).scalars()
    lengths: dict[str, int] = {}
    for message in messages:
        for written in json.loads(message).get("written", ()):
            name = "/".join(str(written["path"]).rsplit("/", 2)[-2:])
            lengths[name] = max(lengths.get(name, 0), int(written["length"]))
    return lengths


def current_event_id(conn: Connection) -> int:
    """The last published id (callers publish first)."""
    return int(conn.execute(select(SEQ.next_event_id)).scalar_one()) - 1
