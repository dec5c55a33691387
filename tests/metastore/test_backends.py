"""The metastore's behaviour suite, run against every backend: acidstream's own on SQLite and PostgreSQL, and a
real Hive 4 metastore over thrift. Each test goes through ``acidstream.Metastore.connect(url)`` as a user does:
DDL, partitions, transactions, locks, write conflicts, snapshots, streaming, mutations, SQL DML, compaction
requests and reader registrations behave alike; what a backend lacks raises ``UnsupportedCapability``."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.errors import (
    AlreadyExistsException,
    InvalidObjectException,
    NoSuchObjectException,
    UnsupportedCapability,
    WriteConflictException,
)
from acidstream.metastore.backend import Capability
from acidstream.metastore.models import (
    LockComponent,
    LockLevel,
    LockState,
    LockType,
    OperationType,
    TableWrite,
    TxnStatus,
)

_names = itertools.count()


def _create(ms: Metastore, table: str, partitioned: bool = False) -> None:
    parts = " PARTITIONED BY (ds string)" if partitioned else ""
    ms.execute(
        f"CREATE TABLE {table} (id int, msg string){parts} CLUSTERED BY (id) INTO 2 BUCKETS "
        "STORED AS ORC TBLPROPERTIES ('transactional'='true', 'acidstream.owner'='suite')"
    )


def _stream(ms: Metastore, table: str, rows: list[str], batch: int = 1) -> None:
    db, name = table.split(".")
    with (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database(db)
        .with_table(name)
        .with_transaction_batch_size(batch)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    ) as conn:
        conn.begin_transaction()
        for row in rows:
            conn.write(row.encode())
        conn.commit_transaction()


def _ids(ms: Metastore, table: str) -> list[int]:
    return sorted(ms.table(table).scan(["id"]).to_arrow()["id"].to_pylist())


def test_connect_returns_the_facade_and_declares_what_the_backend_lacks(
    metastore: Metastore,
) -> None:
    ms = metastore
    assert isinstance(ms, Metastore)
    hive = ms.url.startswith("thrift://")
    assert ms.supports(Capability.TXN_REPLACEMENT) is not hive
    assert ms.supports(Capability.NOTIFICATIONS) is not hive
    if hive:
        with pytest.raises(
            UnsupportedCapability, match=r"notifications: a Hive Metastore has no notifications"
        ):
            ms.notifications()
        with pytest.raises(UnsupportedCapability, match="replace_txn"):
            ms.replace_txn(1, "default.x")
    else:
        assert isinstance(ms.notifications(), list)  # no error


def test_connect_can_ask_for_an_existing_metastore_only(
    metastore: Metastore, metastore_settings: dict[str, Any], db: str, tmp_path: Path
) -> None:
    """``create=False`` (the command line's reading commands): an existing metastore opens on every backend (a
    Hive Metastore that answers exists); a missing one is an error naming it, and nothing is created."""
    with Metastore.connect(
        metastore.url, warehouse=metastore.warehouse, create=False, **metastore_settings
    ) as again:
        assert db in again.list_databases()
    missing = tmp_path / "none.db"
    with pytest.raises(
        NoSuchObjectException, match=rf"no metastore at sqlite:///{missing}: the file does not"
    ):
        Metastore.connect(f"sqlite:///{missing}", warehouse=tmp_path / "wh", create=False)
    assert not missing.exists() and not (tmp_path / "wh").exists()


def test_ddl_round_trips(metastore: Metastore, db: str) -> None:
    ms = metastore
    _create(ms, f"{db}.s", partitioned=True)
    table = ms.table(f"{db}.s")
    assert [c.name for c in table.columns] == ["id", "msg"]
    assert [c.name for c in table.partition_keys] == ["ds"]
    assert (table.bucket_columns, table.num_buckets) == (("id",), 2)
    assert table.is_transactional and table.properties["acidstream.owner"] == "suite"
    assert "s" in ms.list_tables(db)
    assert db in ms.list_databases()
    with pytest.raises(AlreadyExistsException):
        _create(ms, f"{db}.s")
    with pytest.raises(InvalidObjectException, match="not a valid table name"):
        ms.execute(
            f"CREATE TABLE {db}.{'x' * 200} (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
    ms.alter_table_properties(f"{db}.s", {"acidstream.owner": "changed"})
    assert ms.table(f"{db}.s").properties["acidstream.owner"] == "changed"
    ms.drop_table(f"{db}.s")
    with pytest.raises(NoSuchObjectException):
        ms.table(f"{db}.s")
    ms.drop_table(f"{db}.s", if_exists=True)


def test_partitions(metastore: Metastore, db: str) -> None:
    ms = metastore
    _create(ms, f"{db}.p", partitioned=True)
    first = ms.add_partition(f"{db}.p", ["2026-01-01"])
    again = ms.add_partition(f"{db}.p", ["2026-01-01"], if_not_exists=True)
    assert first.name == again.name == "ds=2026-01-01"
    assert first.location.endswith("/p/ds=2026-01-01")
    ms.add_partition(f"{db}.p", ["2026-01-02"])
    assert [p.name for p in ms.list_partitions(f"{db}.p")] == ["ds=2026-01-01", "ds=2026-01-02"]
    got = ms.get_partition(f"{db}.p", ["2026-01-02"])
    assert got is not None and got.values == ("2026-01-02",)
    assert ms.get_partition(f"{db}.p", ["1999-01-01"]) is None
    ms.drop_partition(f"{db}.p", ["2026-01-02"])
    assert [p.name for p in ms.list_partitions(f"{db}.p")] == ["ds=2026-01-01"]


def test_txns_locks_and_snapshots(metastore: Metastore, db: str) -> None:
    ms = metastore
    _create(ms, f"{db}.s")
    (txn, write_id), (other, _) = ms.open_txns_with_write_ids(2, f"{db}.s")
    lock = LockComponent(LockType.SHARED_WRITE, LockLevel.TABLE, db, "s", operation=OperationType.INSERT)
    assert ms.lock([lock], txn_id=txn).state is LockState.ACQUIRED
    assert {t.txn_id for t in ms.show_txns()} >= {txn, other}
    ms.heartbeat(txn)
    assert ms.heartbeat_txn_range(txn, other).aborted == []
    assert ms.get_txn_state(txn) is TxnStatus.OPEN
    before = ms.snapshot()
    ms.commit_txn(txn, writes=[TableWrite(f"{db}.s", write_id, {None: OperationType.INSERT})])
    ms.abort_txns([other])
    assert ms.get_txn_state(txn) is TxnStatus.COMMITTED
    assert not ms.get_valid_write_ids(f"{db}.s", snapshot=before).is_write_id_valid(write_id)
    assert ms.get_valid_write_ids(f"{db}.s").is_write_id_valid(write_id)


def test_write_conflict_goes_to_the_second_committer(metastore: Metastore, db: str) -> None:
    ms = metastore
    _create(ms, f"{db}.s")
    update = LockComponent(LockType.SHARED_WRITE, LockLevel.TABLE, db, "s", operation=OperationType.UPDATE)
    (first, w1), (second, w2) = ms.open_txns_with_write_ids(2, f"{db}.s")
    assert ms.lock([update], txn_id=first).state is LockState.ACQUIRED
    ms.commit_txn(first, writes=[TableWrite(f"{db}.s", w1, {None: OperationType.UPDATE})])
    # the second txn started before the first committed: its update conflicts whenever it got the lock
    assert ms.lock([update], txn_id=second).state is LockState.ACQUIRED
    with pytest.raises(WriteConflictException):
        ms.commit_txn(second, writes=[TableWrite(f"{db}.s", w2, {None: OperationType.UPDATE})])
    assert ms.get_txn_state(second) is TxnStatus.ABORTED


def test_streaming_mutation_and_sql_dml(metastore: Metastore, db: str) -> None:
    ms = metastore
    _create(ms, f"{db}.s")
    _stream(ms, f"{db}.s", [f"{i},m{i}" for i in range(10)])
    _stream(ms, f"{db}.s", [f"{i},m{i}" for i in range(10, 20)], batch=2)
    assert _ids(ms, f"{db}.s") == list(range(20))
    table = ms.table(f"{db}.s")
    assert table.update(pc.field("id") < 5, {"msg": "low"}) == {"inserted": 0, "updated": 5, "deleted": 0}
    assert table.delete(pc.field("id") >= 15) == {"inserted": 0, "updated": 0, "deleted": 5}
    source = pa.table({"id": pa.array([0, 100], pa.int32()), "msg": ["zero", "hundred"]})
    assert table.merge(source, on=["id"]) == {"inserted": 1, "updated": 1, "deleted": 0}
    assert ms.execute(f"DELETE FROM {db}.s WHERE id = 100") == [(0, 0, 1)]
    rows = ms.table(f"{db}.s").scan().to_arrow().sort_by("id")
    assert rows["id"].to_pylist() == list(range(15))
    assert rows["msg"].to_pylist()[:6] == ["zero", "low", "low", "low", "low", "m5"]


def test_compaction_request_and_readers(metastore: Metastore, db: str) -> None:
    ms = metastore
    _create(ms, f"{db}.s")
    for start in (0, 5):
        _stream(ms, f"{db}.s", [f"{i},m{i}" for i in range(start, start + 5)])
    registration = ms.register_reader(f"{db}.s", "suite-reader")
    assert (registration.write_ids.table, registration.write_ids.high_watermark) == (f"{db}.s", 2)
    assert [r[0] for r in ms.active_readers(f"{db}.s")] == [registration.reader_id]
    assert ms.unregister_readers("suite-reader") == 1
    assert ms.active_readers(f"{db}.s") == []
    ms.execute(f"ALTER TABLE {db}.s COMPACT 'major' AND WAIT")
    mine = [c for c in ms.show_compactions() if (c.db, c.table) == (db, "s")]
    assert [(c.kind, c.state) for c in mine] in ([("major", "ready for cleaning")], [("major", "succeeded")])
    assert _ids(ms, f"{db}.s") == list(range(10))
