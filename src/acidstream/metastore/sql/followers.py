"""A replication source's followers: how far each replica has applied the source's events, so the source's
cleaner keeps a compaction's inputs until every live follower has applied it (replication and compaction
both read this; neither imports the other)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from acidstream.metastore.sql import schema as s
from acidstream.metastore.sql.counters import now_ms

RFL = s.repl_followers.c


def follower_progress(conn: Connection, name: str, event_id: int, lease_ms: int) -> None:
    """Follower ``name`` has applied every event up to ``event_id``; it holds the cleaner back for ``lease_ms``
    after this call (a follower gone longer no longer does: it must bootstrap again)."""
    values = {"rfl_last_event_id": event_id, "rfl_last_heartbeat": now_ms(), "rfl_lease_ms": lease_ms}
    if not conn.execute(update(s.repl_followers).where(RFL.rfl_name == name).values(values)).rowcount:
        conn.execute(insert(s.repl_followers).values(rfl_name=name, **values))


def drop_follower(conn: Connection, name: str) -> bool:
    return bool(conn.execute(delete(s.repl_followers).where(RFL.rfl_name == name)).rowcount)


def followers(conn: Connection) -> list[tuple[str, int, int, int]]:
    """(name, last event applied, last heartbeat ms, lease ms) of every follower."""
    return [
        (r.rfl_name, r.rfl_last_event_id, r.rfl_last_heartbeat, r.rfl_lease_ms)
        for r in conn.execute(select(s.repl_followers).order_by(RFL.rfl_name))
    ]


def follower_behind(event_id: Any) -> Any:
    """A clause true while some live follower has not applied event ``event_id`` (a column or NULL: not yet
    published, so nobody has)."""
    live = RFL.rfl_last_heartbeat + RFL.rfl_lease_ms >= now_ms()
    return select(RFL.rfl_name).where(live, event_id.is_(None) | (RFL.rfl_last_event_id < event_id)).exists()
