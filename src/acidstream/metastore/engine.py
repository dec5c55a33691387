"""Database access: one SQLAlchemy engine per metastore, each state change one retried DB transaction.

SQLite: WAL, a busy timeout, and ``BEGIN IMMEDIATE`` for writes so that two processes never both hold a read
snapshot and then deadlock upgrading it; reads use a deferred ``BEGIN`` and run beside writers.
PostgreSQL: READ COMMITTED with ``SELECT ... FOR UPDATE`` on the rows Hive's TxnHandler locks; serialization
failures, deadlocks and lost insert races are retried with the whole transaction.
"""

from __future__ import annotations

import os
import random
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from acidstream.errors import MetaException, MetastoreUnavailable
from acidstream.gil import ShortSwitchInterval
from acidstream.metastore.prepared import execute_driver_sql

T = TypeVar("T")

SQLITE_BUSY_TIMEOUT_MS = 30_000
MAX_ATTEMPTS = 50
MAX_INTEGRITY_ATTEMPTS = 5  # a lost insert race resolves on the first retry; more means a real violation
_PG_RETRY_SQLSTATES = {"40001", "40P01"}  # serialization_failure, deadlock_detected
#: each statement releases the GIL: beside a busy Python thread a 10-statement transaction could wait 50 ms
_SHORT_SWITCH = ShortSwitchInterval()


def make_engine(url: str) -> Engine:
    """Engine for ``sqlite:///path`` or ``postgresql://...`` (mapped onto the psycopg 3 driver)."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise MetaException(
                "the metastore needs a SQLite file (sqlite:///path/metastore.db), not :memory:"
            )
        os.makedirs(os.path.dirname(os.path.abspath(parsed.database)), exist_ok=True)
        engine = create_engine(
            parsed.set(drivername="sqlite+pysqlite"),
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        )
        _configure_sqlite(engine)
        return engine
    if backend in ("postgresql", "postgres"):
        return create_engine(
            parsed.set(drivername="postgresql+psycopg"), pool_size=8, max_overflow=16, pool_pre_ping=True
        )
    raise MetaException(f"unsupported metastore URL {url!r}: use sqlite:///path.db or postgresql://...")


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        readonly = conn.get_execution_options().get("acid_readonly", False)
        execute_driver_sql(conn, "BEGIN" if readonly else "BEGIN IMMEDIATE")


def _retryable(exc: DBAPIError) -> bool:
    if isinstance(exc, IntegrityError):
        return True  # an insert race lost (e.g. two first NEXT_WRITE_ID rows): the retry sees the winner
    orig = exc.orig
    sqlstate = getattr(orig, "sqlstate", None)
    if sqlstate in _PG_RETRY_SQLSTATES:
        return True
    return isinstance(exc, OperationalError) and "database is locked" in str(orig)


def _unavailable(exc: DBAPIError) -> bool:
    return isinstance(exc, OperationalError) and exc.connection_invalidated


def _forget_pool(ref: weakref.ref[Database]) -> None:
    """In a forked child, drop (without closing) the parent's pooled connections: they share its sockets."""
    db = ref()
    if db is not None:
        db.engine.dispose(close=False)


class Database:
    """The engine plus the one way to change state: ``write(fn)`` runs ``fn(conn)`` in one retried transaction."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.dialect = self.engine.dialect.name
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forget_pool(ref))

    def write(self, fn: Callable[[Connection], T]) -> T:
        return self._run(fn, readonly=False)

    def read(self, fn: Callable[[Connection], T]) -> T:
        return self._run(fn, readonly=True)

    def _run(self, fn: Callable[[Connection], T], *, readonly: bool) -> T:
        delay = 0.001
        for attempt in range(MAX_ATTEMPTS):
            try:
                with _SHORT_SWITCH, self.engine.connect() as conn:
                    if readonly:
                        conn = conn.execution_options(acid_readonly=True)
                    with conn.begin():
                        return fn(conn)
            except DBAPIError as exc:
                limit = MAX_INTEGRITY_ATTEMPTS if isinstance(exc, IntegrityError) else MAX_ATTEMPTS
                if attempt + 1 < limit and (_retryable(exc) or _unavailable(exc)):
                    time.sleep(delay * (1 + random.random()))
                    delay = min(delay * 2, 0.2)
                    continue
                if isinstance(exc, OperationalError):
                    raise MetastoreUnavailable(f"metastore database error: {exc.orig}") from exc
                raise MetaException(f"metastore database error: {exc.orig}") from exc
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def dispose(self) -> None:
        self.engine.dispose()
