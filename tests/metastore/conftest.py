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
from typing import Any

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


@pytest.fixture
def metastore_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The connect settings beside the URL that the ``metastore`` fixture's backend needs, for a test that opens a
    second connection (``Metastore.connect(metastore.url, **metastore_settings)``): on the kerberized Hive
    metastore alice's principal and keytab, every message sealed (QOP auth-conf); none elsewhere."""
    if request.node.callspec.params.get("metastore") != "hive-kerberos":
        return {}
    import_or_skip("gssapi", reason="the kerberos extra (python-gssapi) is not installed")
    kdc = request.getfixturevalue("kdc")
    keytab = str(kdc.dir / "alice.keytab")
    return {"kerberos_principal": "alice", "kerberos_keytab": keytab, "kerberos_qop": "auth-conf"}


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("hive", marks=pytest.mark.hive4),
        pytest.param("hive-kerberos", marks=pytest.mark.hive4),
    ]
)
def metastore(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    db: str,
    metastore_settings: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Metastore]:
    """A connected metastore on each backend, as ``acidstream.Metastore.connect(url)`` gives it to a user, with the
    test's database ``db`` (tables ``t`` and ``u``). ``hive-kerberos`` is the session's kerberized Hive metastore
    (SASL/GSSAPI), reached with the keytab in ``metastore_settings`` while the default ticket cache is an empty
    one of the test's own, which must stay untouched. At the end the txns the test left open are aborted, its locks
    outside txns released and its database dropped (Hive's metastore lives on)."""
    no_ticket = tmp_path / "krb5cc"
    with ExitStack() as stack:
        if request.param.startswith("hive"):
            import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")
            uri = request.getfixturevalue(
                "hive4_kerberos_metastore" if request.param == "hive-kerberos" else "hive4_metastore"
            )
            if metastore_settings:
                monkeypatch.setenv("KRB5CCNAME", f"FILE:{no_ticket}")
            m = Metastore.connect(uri, lock_wait_timeout=2.0, **metastore_settings)
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
    assert not no_ticket.exists(), "the library wrote the caller's default ticket cache"
