"""Changes that happen once even when the answer to their commit is lost.

A connection can drop after the server committed a DB transaction and before its answer arrived (a network
fault, a proxy, a failover). The engine then runs the transaction again on a new connection. For a commit or
an abort that is harmless (the second run finds the txn ended), but opening txns, claiming a compaction or
registering a reader would happen twice, leaving an orphan behind until it times out. Such a change records a
random token with its result in the same DB transaction; a later attempt that finds the token returns the
recorded result instead of changing anything. SQLite answers in-process, so nothing is lost there.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, delete, insert, select

from acidstream.metastore.sql import schema as s
from acidstream.metastore.sql.counters import now_ms

T = TypeVar("T")
RR = s.request_results.c

#: How long a token is kept: far longer than any retry of its call (the engine's wait timeout, at most 30 s).
KEEP_MS = 3600_000


def once(
    fn: Callable[[Connection], T],
    encode: Callable[[T], Any],
    decode: Callable[[Connection, Any], T],
) -> Callable[[Connection], T]:
    """``fn`` as a DB transaction body that takes effect once over all of the engine's attempts; ``encode``
    turns its result into a JSON value, ``decode`` gives it back (in a later attempt's transaction)."""
    token = uuid.uuid4().hex
    attempts = 0

    def run(conn: Connection) -> T:
        nonlocal attempts
        attempts += 1
        if attempts > 1:  # an earlier attempt may have committed before its answer was lost
            done = conn.execute(select(RR.rq_result).where(RR.rq_id == token)).scalar()
            if done is not None:
                return decode(conn, json.loads(done))
        value = fn(conn)
        conn.execute(
            insert(s.request_results).values(
                rq_id=token, rq_result=json.dumps(encode(value)), rq_time=now_ms()
            )
        )
        return value

    return run


def purge(conn: Connection) -> None:
    """Forget tokens no retry can ask for any more."""
    conn.execute(delete(s.request_results).where(RR.rq_time < now_ms() - KEEP_MS))
