"""Row-locked counters (Hive's NEXT_TXN_ID style): gap-free, ordered ids on SQLite and PostgreSQL alike."""

from __future__ import annotations

import functools
import time

from sqlalchemy import Connection, Table, bindparam, select, update

from acidstream.metastore.sql.prepared import Prepared


@functools.cache
def _take(counter: Table) -> Prepared:
    """The counter's ``UPDATE ... RETURNING``, built once: building statements costs more than SQLite runs them."""
    col = next(iter(counter.c))
    return Prepared(update(counter).values({col.name: col + bindparam("p_n")}).returning(col))


def take_ids(conn: Connection, counter: Table, n: int = 1) -> int:
    """Reserve ``n`` consecutive ids from a single-row counter table; returns the first one.

    One ``UPDATE ... RETURNING``: the row lock it takes (SQLite's write lock is already held) lasts until the
    caller's transaction ends, so a rolled-back caller leaves no gap and concurrent callers are served in commit order.
    """
    after = _take(counter).run(conn, {"p_n": n}).scalar_one()
    return int(after) - n


def peek_next(conn: Connection, counter: Table, *, lock: bool = False) -> int:
    """The id the counter would hand out next, without reserving it. ``lock`` holds the counter's row lock until
    the caller's transaction ends: takers (and other lockers) wait for it (SQLite's write lock is already held)."""
    query = select(next(iter(counter.c)))
    return int(conn.execute(query.with_for_update() if lock else query).scalar_one())


def now_ms() -> int:
    """Wall-clock milliseconds: hosts sharing a PostgreSQL metastore must keep their clocks in sync."""
    return int(time.time() * 1000)
