"""Database access: one SQLAlchemy engine per metastore, each state change one retried DB transaction.

SQLite: WAL, a busy timeout, and ``BEGIN IMMEDIATE`` for writes so that two processes never both hold a read
snapshot and then deadlock upgrading it; reads use a deferred ``BEGIN`` and run beside writers.
PostgreSQL: READ COMMITTED with ``SELECT ... FOR UPDATE`` on the rows Hive's TxnHandler locks; serialization
failures, deadlocks and lost insert races are retried with the whole transaction, and so are lost
connections (a terminated backend), each on a fresh connection.

Every call waits at most ``wait_timeout`` seconds in all (for SQLite's write lock, or between retries): a
lock held by another process, or a database gone for good, fails the call with :class:`MetastoreUnavailable`
well before the transactions a client keeps open time out.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import random
import sqlite3
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, OperationalError

from acidstream.errors import MetaException, MetastoreUnavailable, MetastoreUrlError
from acidstream.metastore.sql.prepared import connection_lost, execute_driver_sql
from acidstream.runtime import ShortSwitchInterval

T = TypeVar("T")

#: The longest a call waits in all, by default (``Metastore.connect`` derives it from the txn timeout).
DEFAULT_WAIT_TIMEOUT = 30.0
MAX_ATTEMPTS = 50
MAX_INTEGRITY_ATTEMPTS = 5  # a lost insert race resolves on the first retry; more means a real violation
_PG_RETRY_SQLSTATES = {"40001", "40P01"}  # serialization_failure, deadlock_detected
#: each statement releases the GIL: beside a busy Python thread a 10-statement transaction could wait 50 ms
_SHORT_SWITCH = ShortSwitchInterval()
_URL_FORMS = "sqlite:///path.db or postgresql://user@host/db"


class CommitInDoubt(MetastoreUnavailable):
    """A write whose COMMIT was sent, the connection lost before its answer, and the database not reached again
    within the wait timeout: whether it happened is unknown (a retry that reached the database would have
    found out, each write being one that can run again)."""


def make_engine(url: str, wait_timeout: float = DEFAULT_WAIT_TIMEOUT) -> Engine:
    """Engine for ``sqlite:///path`` or ``postgresql://...`` (mapped onto the psycopg 3 driver); a SQLite
    statement waits up to ``wait_timeout`` seconds for another connection's write lock."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise MetastoreUrlError(f"metastore URL {url!r} does not parse: use {_URL_FORMS}") from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise MetastoreUrlError(
                "the metastore needs a SQLite file (sqlite:///path/metastore.db), not :memory:"
            )
        os.makedirs(os.path.dirname(os.path.abspath(parsed.database)), exist_ok=True)
        engine = create_engine(
            parsed.set(drivername="sqlite+pysqlite"),
            connect_args={"check_same_thread": False, "timeout": wait_timeout},
        )
        _configure_sqlite(engine, round(wait_timeout * 1000))
        return engine
    if backend in ("postgresql", "postgres"):
        try:
            importlib.import_module("psycopg")
        except ImportError as exc:
            raise MetastoreUrlError(
                f"a PostgreSQL metastore ({parsed.render_as_string(hide_password=True)}) needs the psycopg "
                "driver: pip install 'acidstream[postgres]'"
            ) from exc
        engine = create_engine(
            parsed.set(drivername="postgresql+psycopg"), pool_size=8, max_overflow=16, pool_pre_ping=True
        )
        _configure_postgresql(engine)
        return engine
    raise MetastoreUrlError(f"unsupported metastore URL {url!r}: use {_URL_FORMS}")


def _configure_sqlite(engine: Engine, busy_timeout_ms: int) -> None:
    """WAL with ``synchronous=NORMAL``: a commit is atomic and survives a process crash, and reaches the disk
    at the next checkpoint or durable commit. A durable write (``Database.write(durable=True)``: a txn's
    commit record) runs under ``FULL``, which fsyncs the log, and with it every commit before it, at its end;
    FULL for every write transaction cost ~3 ms each on a virtual disk."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        if options.get("acid_readonly", False):
            execute_driver_sql(conn, "BEGIN")
            return
        if options.get("acid_durable", False):
            execute_driver_sql(conn, "PRAGMA synchronous=FULL")
            conn.connection.info["durable"] = True
        execute_driver_sql(conn, "BEGIN IMMEDIATE")

    @event.listens_for(engine, "checkin")
    def _on_checkin(dbapi_conn: Any, record: Any) -> None:
        if dbapi_conn is not None and record.info.pop("durable", False):
            with contextlib.suppress(sqlite3.Error):  # left FULL, the connection is only slower
                dbapi_conn.execute("PRAGMA synchronous=NORMAL")


def _configure_postgresql(engine: Engine) -> None:
    @event.listens_for(engine, "handle_error")
    def _on_error(context: ExceptionContext) -> None:
        if connection_lost(context.original_exception):
            context.is_disconnect = (
                True  # SQLAlchemy then invalidates the connection: the retry takes another
            )


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
    """The engine plus the one way to change state: ``write(fn)`` runs ``fn(conn)`` in one retried transaction
    (retries and lock waits together taking at most ``wait_timeout`` seconds)."""

    def __init__(self, url: str, wait_timeout: float = DEFAULT_WAIT_TIMEOUT) -> None:
        if wait_timeout <= 0:
            raise MetaException(f"the metastore's wait timeout must be > 0 seconds, got {wait_timeout}")
        self.url = url
        self.wait_timeout = wait_timeout
        self.engine = make_engine(url, wait_timeout)
        self.dialect = self.engine.dialect.name
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forget_pool(ref))

    def write(self, fn: Callable[[Connection], T], *, durable: bool = False) -> T:
        """``durable``: the commit is on disk when this returns, not only in the OS (PostgreSQL's commits
        always are; SQLite's only in such a write, see ``_configure_sqlite``)."""
        return self._run(fn, readonly=False, durable=durable)

    def read(self, fn: Callable[[Connection], T]) -> T:
        return self._run(fn, readonly=True)

    def _run(self, fn: Callable[[Connection], T], *, readonly: bool, durable: bool = False) -> T:
        delay = 0.001
        deadline = time.monotonic() + self.wait_timeout
        in_doubt = False  # a write's COMMIT was sent and the connection lost before its answer
        for attempt in range(MAX_ATTEMPTS):
            committing = False
            try:
                with _SHORT_SWITCH, self.engine.connect() as conn:
                    if readonly or durable:
                        conn = conn.execution_options(acid_readonly=readonly, acid_durable=durable)
                    with conn.begin():
                        result = fn(conn)
                        committing = True  # leaving the block sends COMMIT
                    return result
            except DBAPIError as exc:
                in_doubt = in_doubt or (committing and not readonly and _unavailable(exc))
                limit = MAX_INTEGRITY_ATTEMPTS if isinstance(exc, IntegrityError) else MAX_ATTEMPTS
                pause = delay * (1 + random.random())
                if (
                    attempt + 1 < limit
                    and time.monotonic() + pause < deadline
                    and (_retryable(exc) or _unavailable(exc))
                ):
                    time.sleep(pause)
                    delay = min(delay * 2, 0.2)
                    continue
                if in_doubt and isinstance(exc, OperationalError):
                    raise CommitInDoubt(
                        f"metastore database error: {exc.orig} (after a COMMIT whose answer was lost)"
                    ) from exc
                if isinstance(exc, OperationalError):
                    raise MetastoreUnavailable(f"metastore database error: {exc.orig}") from exc
                raise MetaException(f"metastore database error: {exc.orig}") from exc
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def dispose(self) -> None:
        self.engine.dispose()
