"""Fixtures of the metastore suite.

``metastore`` is the behaviour suite's one fixture: a connected metastore on each backend (SQLite, PostgreSQL and
the session's Hive 4 metastore over thrift) with a database of the test's own (``db``) holding two full-ACID
tables, ``t`` (partitioned by ``ds``) and ``u``. Hive's metastore is shared by the session, so its txn, lock and
compaction ids are not the test's alone: tests compare ids relative to the ones they opened and filter listings
by their database. ``ms`` is acidstream's SQL metastore alone (its internal tables, counters and engine), with
the fixed database ``db``."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from acidstream import Metastore
from acidstream.metastore import MetastoreFacade, TxnStatus
from support.backends import sql_metastore_url
from support.deps import import_or_skip

ACID = {"transactional": "true"}
_names = itertools.count()


def _create_tables(m: MetastoreFacade, db: str) -> None:
    m.execute(f"CREATE DATABASE {db}")
    m.execute(
        f"CREATE TABLE {db}.t (id int, msg string) PARTITIONED BY (ds string) "
        "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    m.execute(f"CREATE TABLE {db}.u (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")


@pytest.fixture
def ms(metastore_url: str, warehouse: Path) -> Iterator[MetastoreFacade]:
    """acidstream's SQL metastore (SQLite, PostgreSQL) with the database ``db``."""
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse, lock_wait_timeout=2.0) as m:
        _create_tables(m, "db")
        yield m


@pytest.fixture
def db() -> str:
    """The test's own database name (the ``metastore`` fixture creates it)."""
    return f"ms{os.getpid()}x{next(_names)}"


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("hive", marks=pytest.mark.hive4),
    ]
)
def metastore(request: pytest.FixtureRequest, tmp_path: Path, db: str) -> Iterator[Metastore]:
    """A connected metastore on each backend, as ``acidstream.Metastore.connect(url)`` gives it to a user, with the
    test's database ``db`` (tables ``t`` and ``u``). At the
    end the txns the test left open are aborted, its locks outside txns released and its database dropped (Hive's metastore lives on)."""
    with ExitStack() as stack:
        if request.param == "hive":
            import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")
            m = Metastore.connect(request.getfixturevalue("hive4_metastore"), lock_wait_timeout=2.0)
        else:
            url = stack.enter_context(sql_metastore_url(request.param, tmp_path))
            m = Metastore.connect(url, warehouse=tmp_path / "wh", lock_wait_timeout=2.0)
        stack.enter_context(m)
        txns, locks = {t.txn_id for t in m.show_txns()}, {li.lock_id for li in m.show_locks()}
        _create_tables(m, db)
        yield m
        left = [t.txn_id for t in m.show_txns() if t.txn_id not in txns and t.state is TxnStatus.OPEN]
        if left:
            m.abort_txns(left)
        for lock_id in {li.lock_id for li in m.show_locks() if li.lock_id not in locks and not li.txn_id}:
            m.unlock(lock_id)  # a lock outside a txn lives until unlocked (on Hive: until it times out)
        m.drop_database(db, cascade=True, if_exists=True)
