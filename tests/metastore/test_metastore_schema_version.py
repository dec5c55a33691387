"""Schema versioning: a database from another release opens or fails with SchemaVersionError."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from acidstream.errors import MetaException, SchemaVersionError
from acidstream.metastore import MetastoreFacade
from acidstream.metastore.sql.schema import SCHEMA_VERSION


def _set_version(url: str, version: int) -> None:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(text("UPDATE acidstream_version SET version = :v"), {"v": version})
    engine.dispose()


def test_reopen_keeps_state(metastore_url: str, warehouse: Path) -> None:
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse) as ms:
        ms.execute("CREATE TABLE t (a int) TBLPROPERTIES ('transactional'='true')")
        ms.open_txns(2)
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse) as ms:
        assert ms.list_tables() == ["t"]
        assert ms.open_txns() == [3]


def test_newer_schema_is_refused(metastore_url: str, warehouse: Path) -> None:
    MetastoreFacade.connect(metastore_url, warehouse=warehouse).close()
    _set_version(metastore_url, SCHEMA_VERSION + 1)
    with pytest.raises(SchemaVersionError, match="newer acidstream release"):
        MetastoreFacade.connect(metastore_url, warehouse=warehouse)


def test_older_schema_without_upgrade_path_is_refused(metastore_url: str, warehouse: Path) -> None:
    MetastoreFacade.connect(metastore_url, warehouse=warehouse).close()
    _set_version(metastore_url, 0)
    with pytest.raises(SchemaVersionError, match="no upgrade path exists from it"):
        MetastoreFacade.connect(metastore_url, warehouse=warehouse)


def test_foreign_database_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE txns (x int)"))
    engine.dispose()
    with pytest.raises(SchemaVersionError, match="no version table"):
        MetastoreFacade.connect(url, warehouse=tmp_path)


def test_bad_urls(tmp_path: Path) -> None:
    with pytest.raises(MetaException, match="unsupported metastore URL"):
        MetastoreFacade.connect("mysql://x/y", warehouse=tmp_path)
    with pytest.raises(MetaException, match="SQLite file"):
        MetastoreFacade.connect("sqlite://", warehouse=tmp_path)


def _make_v1(url: str) -> None:
    """Turn a fresh database back into version 1: the notification log keyed by counter-assigned ids."""
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_ws_commit"))
        conn.execute(text("CREATE INDEX ix_ws_table ON write_set (ws_database, ws_table)"))
        conn.execute(text("DROP TABLE notification_log"))
        conn.execute(
            text(
                "CREATE TABLE notification_log (nl_id BIGINT PRIMARY KEY, event_time BIGINT NOT NULL, "
                "event_type VARCHAR(32) NOT NULL, db_name VARCHAR(128), tbl_name VARCHAR(128), "
                "partition TEXT, txn_id BIGINT, write_id BIGINT, message TEXT NOT NULL)"
            )
        )
        for i, kind in ((1, "CREATE_DATABASE"), (2, "OPEN_TXN")):
            conn.execute(
                text(
                    "INSERT INTO notification_log (nl_id, event_time, event_type, message) "
                    "VALUES (:i, 0, :k, '{}')"
                ),
                {"i": i, "k": kind},
            )
        conn.execute(text("UPDATE notification_sequence SET next_event_id = 3"))
        conn.execute(text("UPDATE acidstream_version SET version = 1"))
    engine.dispose()


def test_version_1_is_upgraded_keeping_its_events(metastore_url: str, warehouse: Path) -> None:
    MetastoreFacade.connect(metastore_url, warehouse=warehouse).close()
    _make_v1(metastore_url)
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse) as ms:
        ms.open_txns()
        events = ms.notifications()
        assert [(e.event_id, e.event_type) for e in events] == [
            (1, "CREATE_DATABASE"),
            (2, "OPEN_TXN"),
            (3, "OPEN_TXN"),
        ]
        assert ms.current_notification_event_id() == 3
    engine = create_engine(metastore_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version FROM acidstream_version")).scalar_one() == SCHEMA_VERSION
        assert {i["name"] for i in inspect(conn).get_indexes("write_set")} == {"ix_ws_commit"}
    engine.dispose()


_V3_COLUMNS = (
    "txn_id",
    "initiator_id",
    "attempts",
    "publish_id",
    "next_reader_id",
    "commit_time",
    "meta_info",
    "cleaner_start",
)


def _make_v2(url: str) -> None:
    """Turn a fresh database back into version 2: no compactor columns, no reader registrations."""
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE snapshot_readers"))
        conn.execute(text("DROP TABLE next_reader_id"))
        conn.execute(text("DROP INDEX ix_cq_table"))
        conn.execute(text("DROP INDEX ix_cc_target"))
        for table, prefix in (("compaction_queue", "cq"), ("completed_compactions", "cc")):
            for column in _V3_COLUMNS:
                conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {prefix}_{column}"))
        conn.execute(text("UPDATE acidstream_version SET version = 2"))
    engine.dispose()


def test_version_2_is_upgraded_for_the_compactor(metastore_url: str, warehouse: Path) -> None:
    MetastoreFacade.connect(metastore_url, warehouse=warehouse).close()
    _make_v2(metastore_url)
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse) as ms:
        ms.execute("CREATE TABLE t (a int) TBLPROPERTIES ('transactional'='true')")
        cq = ms.compact("t")
        info = ms.find_next_compaction("w-1-1")
        assert info is not None and info.id == cq and info.txn_id is not None
        assert ms.register_reader("t").reader_id == 1
    engine = create_engine(metastore_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version FROM acidstream_version")).scalar_one() == SCHEMA_VERSION
        columns = {c["name"] for c in inspect(conn).get_columns("completed_compactions")}
        assert {f"cc_{c}" for c in _V3_COLUMNS} <= columns
    engine.dispose()


def _make_v3(url: str) -> None:
    """Turn a fresh database back into version 3: no replication tables."""
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        for table in ("repl_txn_map", "repl_state", "repl_files", "repl_followers"):
            conn.execute(text(f"DROP TABLE {table}"))
        conn.execute(text("DROP INDEX ix_nl_txn"))
        conn.execute(text("UPDATE acidstream_version SET version = 3"))
    engine.dispose()


def test_version_3_is_upgraded_for_replication(metastore_url: str, warehouse: Path) -> None:
    MetastoreFacade.connect(metastore_url, warehouse=warehouse).close()
    _make_v3(metastore_url)
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse) as ms:
        ms.repl_follower_progress("replica", 5, lease=60)
        assert [f[:2] for f in ms.repl_followers()] == [("replica", 5)]
        assert ms.repl_state("default") is None
    engine = create_engine(metastore_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version FROM acidstream_version")).scalar_one() == SCHEMA_VERSION
        assert "ix_nl_txn" in {i["name"] for i in inspect(conn).get_indexes("notification_log")}
    engine.dispose()
