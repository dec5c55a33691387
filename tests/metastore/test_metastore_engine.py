"""The database layer: every metastore transaction runs with a short switch interval (acidstream.runtime)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import event

from acidstream.errors import MetastoreUnavailable, NoSuchObjectException
from acidstream.metastore import MetastoreFacade, TxnStatus
from acidstream.metastore.sql.engine import Database
from acidstream.metastore.sql.prepared import connection_lost, execute_driver_sql
from acidstream.runtime import DEFAULT_SWITCH_INTERVAL
from support.faultinjection import sqlite_write_lock_held


def test_metastore_transactions_shorten_the_switch_interval_while_they_run(
    metastore_url: str, tuned: None
) -> None:
    """Each statement releases the GIL; beside a busy Python thread each could wait 5 ms to get it back."""
    db = Database(metastore_url)
    try:
        before = sys.getswitchinterval()
        assert db.write(lambda _conn: sys.getswitchinterval()) == pytest.approx(DEFAULT_SWITCH_INTERVAL)
        assert db.read(lambda _conn: sys.getswitchinterval()) == pytest.approx(DEFAULT_SWITCH_INTERVAL)
        assert sys.getswitchinterval() == before
    finally:
        db.dispose()


def test_a_failing_metastore_call_restores_the_switch_interval(ms: MetastoreFacade) -> None:
    before = sys.getswitchinterval()
    with pytest.raises(NoSuchObjectException, match=r"db\.no_such_table does not exist"):
        ms.table("db.no_such_table")
    assert sys.getswitchinterval() == before


@pytest.mark.timeout(120)  # unbounded before: 50 attempts of the 30 s busy timeout
def test_a_write_lock_held_by_another_process_fails_the_call_within_the_wait_bound(
    tmp_path: Path, warehouse: Path
) -> None:
    db_path = tmp_path / "ms.db"
    with MetastoreFacade.connect(f"sqlite:///{db_path}", warehouse=warehouse, db_wait_timeout=0.5) as ms:
        first = ms.open_txns(1)[0]
        with sqlite_write_lock_held(db_path):
            with pytest.raises(MetastoreUnavailable, match="database is locked") as exc:
                ms.open_txns(1)
            assert exc.value.retryable
            assert ms.get_txn_state(first) is TxnStatus.OPEN  # reads go on beside the writer (WAL)
        assert ms.open_txns(1)[0] > first


@pytest.mark.parametrize(("txn_timeout", "bound"), [(300.0, 30.0), (60.0, 6.0), (2.0, 1.0)])
def test_the_default_wait_bound_is_well_under_the_txn_timeout(
    tmp_path: Path, warehouse: Path, txn_timeout: float, bound: float
) -> None:
    with MetastoreFacade.connect(
        f"sqlite:///{tmp_path / 'ms.db'}", warehouse=warehouse, txn_timeout=txn_timeout
    ) as ms:
        assert ms.db_wait_timeout == bound


@pytest.mark.parametrize("path", ["driver", "sqlalchemy"])
@pytest.mark.parametrize(
    "metastore_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)
def test_a_connection_stuck_in_pipeline_mode_is_replaced_and_the_call_retried(
    metastore_url: str, path: str
) -> None:
    """A backend terminated during a pipelined ``executemany`` can leave psycopg's connection in
    pipeline mode with results pending and not marked broken; every statement on it then fails with ``cannot
    exit pipeline mode while busy``, which was neither retried nor kept out of the pool. libpq puts a live
    connection in that very state when it leaves pipeline mode with a query in flight, as done here to the
    first connection the call gets. Both ways statements run are covered: on the DB-API cursor (the hot
    statements, ``prepared.py``) and through SQLAlchemy's execution."""
    db = Database(metastore_url)
    stuck: list[Any] = []

    @event.listens_for(db.engine, "engine_connect")
    def leave_stuck(conn: Any) -> None:
        if stuck:
            return
        dbapi = conn.connection.dbapi_connection
        dbapi.pgconn.enter_pipeline_mode()
        dbapi.pgconn.send_query_params(b"SELECT 1", None)
        with pytest.raises(psycopg.OperationalError, match="cannot exit pipeline mode while busy"):
            dbapi.pgconn.exit_pipeline_mode()
        stuck.append(dbapi)

    def statement(conn: Any) -> int:
        if path == "driver":
            execute_driver_sql(conn, "SELECT 1")  # no parameters: libpq refuses to send it on the stuck one
        else:
            conn.exec_driver_sql("SELECT 1")
        return 7

    try:
        assert db.write(statement) == 7
        assert len(stuck) == 1 and stuck[0].closed  # invalidated, never pooled again
    finally:
        db.dispose()


def test_which_driver_errors_mean_a_lost_connection() -> None:
    assert connection_lost(psycopg.OperationalError("cannot exit pipeline mode while busy"))
    assert connection_lost(psycopg.errors.AdminShutdown("terminating connection"))
    assert not connection_lost(psycopg.errors.SerializationFailure("could not serialize"))
    assert not connection_lost(psycopg.errors.UniqueViolation("duplicate key"))
    assert not connection_lost(ValueError("not a driver error"))


NO_DRIVER = """
import sys
sys.modules["psycopg"] = None  # as if acidstream was installed without its postgres extra
from acidstream.errors import MetastoreUrlError
from acidstream.metastore.sql.engine import make_engine
make_engine("sqlite:///" + sys.argv[1])  # SQLite needs no driver of its own
try:
    make_engine("postgresql://someone:secret@127.0.0.1:1/db")
except MetastoreUrlError as exc:
    print(exc)
"""


def test_a_postgresql_url_without_the_driver_says_which_extra_to_install(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", NO_DRIVER, str(tmp_path / "ms.db")], capture_output=True, text=True, check=True
    ).stdout
    assert "pip install 'acidstream[postgres]'" in out and "secret" not in out
