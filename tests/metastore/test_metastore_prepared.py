"""Prepared statements: the hot statements run on the DB-API cursor, with SQLAlchemy's results and errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy.exc as sa_exc
from sqlalchemy import Connection, select

from acidstream.errors import MetaException
from acidstream.metastore import (
    LockComponent,
    LockLevel,
    LockType,
    MetastoreFacade,
    OperationType,
    TableWrite,
)
from acidstream.metastore.sql import catalog, counters, locks, notifications, txns
from acidstream.metastore.sql import schema as s
from acidstream.metastore.sql.prepared import Prepared, execute_driver_sql

MODULES = (catalog, counters, locks, notifications, txns)


def prepared_statements() -> Iterator[tuple[str, Prepared]]:
    for module in MODULES:
        for name, value in vars(module).items():
            if isinstance(value, Prepared):
                yield f"{module.__name__}.{name}", value
    for counter in (s.next_txn_id, s.next_lock_id):
        yield f"take_ids({counter.name})", counters._take(counter)


def streaming_cycles(ms: MetastoreFacade) -> None:
    """What streaming asks of the metastore: batch open with a lock, heartbeats, commits and an abort."""
    lock = LockComponent(LockType.SHARED_READ, LockLevel.TABLE, "db", "u", operation=OperationType.INSERT)
    for _ in range(2):
        pairs, _resp = ms.open_txns_with_write_ids_and_lock(2, "db.u", [lock], agent_info="test")
        ms.heartbeat_txn_range(pairs[0][0], pairs[-1][0])
        ms.commit_txn(pairs[0][0], writes=[TableWrite("db.u", pairs[0][1], files={None: ["f"]})])
        ms.abort_txn(pairs[1][0])


def test_every_hot_statement_runs_on_the_driver(ms: MetastoreFacade) -> None:
    """A statement that needs SQLAlchemy at run time (a new Python-side default, an expanding IN) would
    silently lose the fast path: every plan the streaming cycle made must be a direct one."""
    streaming_cycles(ms)
    used = {name: p._plans for name, p in prepared_statements() if p._plans}
    assert len(used) >= 15
    slow = {name for name, plans in used.items() if any(plan is None for plan in plans.values())}
    assert not slow


def test_rows_are_what_sqlalchemy_returns(ms: MetastoreFacade) -> None:
    streaming_cycles(ms)
    queries = [
        (txns._COMPONENTS, {"txn_id": 1}),
        (txns._WRITE_IDS_OF, {"txn_id": 1}),
        (txns._STATE, {"txn_id": 2}),
        (catalog._TABLE_PARAMS, {"db": "db", "name": "u"}),
        (locks._OTHER_LOCKS_IN_DB, {"ext_id": 0, "db": "db"}),
    ]

    def both(conn: Connection) -> list[tuple[list[tuple[object, ...]], list[tuple[object, ...]]]]:
        return [
            ([tuple(r) for r in p.run(conn, params)], [tuple(r) for r in conn.execute(p.statement, params)])
            for p, params in queries
        ]

    for direct, via_sqlalchemy in ms.backend._db.read(both):
        assert direct == via_sqlalchemy
    rows = ms.backend._db.read(lambda conn: catalog._TABLE_PARAMS.run(conn, {"db": "db", "name": "u"}).all())
    assert {r.param_key: r.param_value for r in rows}["transactional"] == "true"  # attribute access, as Row


def test_driver_errors_become_sqlalchemy_errors_that_the_retries_know(ms: MetastoreFacade) -> None:
    def duplicate_txn(conn: Connection) -> None:
        row = {"txn_id": 10**9, "txn_state": "o", "txn_started": 0, "txn_last_heartbeat": 0}
        txns._INSERT_TXNS.run(conn, [row])
        txns._INSERT_TXNS.run(conn, [row])

    with pytest.raises(sa_exc.IntegrityError), ms.backend._db.engine.connect() as conn, conn.begin():
        duplicate_txn(conn)
    with pytest.raises(MetaException, match=r"(?i)unique|duplicate"):  # retried as a lost race, then raised
        ms.backend._db.write(duplicate_txn)
    with ms.backend._db.engine.connect() as conn, pytest.raises(sa_exc.DBAPIError):
        execute_driver_sql(conn, "NOT SQL AT ALL")
    inserted = ms.backend._db.read(
        lambda conn: conn.execute(select(s.txns.c.txn_id).where(s.txns.c.txn_id == 10**9)).all()
    )
    assert inserted == []  # both transactions rolled back


def test_scalar_one_insists_on_one_row(ms: MetastoreFacade) -> None:
    streaming_cycles(ms)
    every_txn = Prepared(select(s.txns.c.txn_id))
    with pytest.raises(sa_exc.NoResultFound):
        ms.backend._db.read(lambda conn: txns._STATE.run(conn, {"txn_id": 10**9}).scalar_one())
    with pytest.raises(sa_exc.MultipleResultsFound):
        ms.backend._db.read(lambda conn: every_txn.run(conn).scalar_one())
