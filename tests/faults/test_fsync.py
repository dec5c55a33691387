"""Durable commits: the metastore's commit record is fsynced, and with ``fsync`` (the connection's
configuration or the ``acidstream.fsync`` table property) so is every file a commit names, before it does.

Each path reaches ``os.fsync`` through the ``storage.fsync`` fault point, on the real local filesystem; the
metastore's commit is the ``metastore.commit`` point, so the order of the two is seen too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlalchemy import event

from acidstream import Metastore, StreamingConnection, faults
from acidstream.compactor import Compactor, CompactorConfig
from read.readhelpers import DELIM, connect, create

COMMIT = "<metastore commit>"


@pytest.fixture
def ms(tmp_path: Path, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE db")
        yield m


@pytest.fixture
def synced() -> Iterator[list[str]]:
    """The paths fsynced, in order, with the metastore's commits among them."""
    seen: list[str] = []

    def fsynced(path: Any) -> Any:
        seen.append(str(path))
        return path

    with (
        faults.armed("storage.fsync", fsynced),
        faults.armed("metastore.commit", lambda _: seen.append(COMMIT)),
    ):
        yield seen


def _commit(conn: Any, ids: list[int], part: str | None = None) -> None:
    conn.begin_transaction()
    data: dict[str, list[Any]] = {"id": ids, "msg": ["m"] * len(ids)}
    if part is not None:
        data["p"] = [part] * len(ids)
    conn.write_batch(pa.table(data))
    conn.commit_transaction()


def test_the_metastore_commit_record_is_fsynced(ms: Metastore) -> None:
    """SQLite in WAL mode syncs its log at a commit only under ``synchronous=FULL``: a txn's commit runs under
    it, other writes (open, heartbeat, lock) under NORMAL, whose commits the next FULL one syncs too.
    PostgreSQL syncs every commit by default. Seen in the statements the metastore's own connections run."""
    statements: list[str] = []
    engine = ms.backend._db.engine
    engine.dispose()  # the next connections are new, and traced

    @event.listens_for(engine, "connect")
    def trace(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.set_trace_callback(statements.append)

    [txn] = ms.open_txns(1)
    opened = len(statements)
    ms.commit_txn(txn)
    assert "PRAGMA synchronous=FULL" not in statements[:opened]
    commit = statements[opened:]
    full = commit.index("PRAGMA synchronous=FULL")
    assert commit[full + 1] == "BEGIN IMMEDIATE"
    assert any("UPDATE txns SET txn_state" in q for q in commit[full:])
    assert commit[-1] == "PRAGMA synchronous=NORMAL"  # back for the connection's next user
    assert ms.backend._db.write(lambda c: c.exec_driver_sql("PRAGMA synchronous").scalar()) == 1
    assert ms.backend._db.write(lambda c: c.exec_driver_sql("PRAGMA synchronous").scalar(), durable=True) == 2


@pytest.mark.parametrize("batch", [1, 3])
def test_fsync_makes_data_side_files_and_directories_durable_before_the_commit(
    ms: Metastore, synced: list[str], batch: int
) -> None:
    create(ms, "t", "id int, msg string", "PARTITIONED BY (p string)")
    location = Path(ms.table("db.t").location)
    builder = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("db")
        .with_table("t")
        .with_record_writer(DELIM)
        .with_transaction_batch_size(batch)
        .with_configuration({"fsync": True})
    )
    with builder.connect() as conn:
        _commit(conn, [1, 2], "a")
        assert synced.count(COMMIT) == 1
        first = synced[: synced.index(COMMIT)]
        [data] = location.glob("p=a/delta_*/bucket_00000")
        delta, partition = data.parent, data.parent.parent
        assert str(data) in first
        assert (str(Path(f"{data}_flush_length")) in first) == (batch > 1)
        assert str(delta / "_orc_acid_version") in first
        # the directories: the new delta, the new partition, the table's (which holds the new partition)
        assert {str(delta), str(partition), str(location)} <= set(first)
        synced.clear()
        _commit(conn, [3], "a")
        newest = sorted(location.glob("p=a/delta_*/bucket_00000"))[-1]  # the same file in a batch of 3
        assert str(newest) in synced[: synced.index(COMMIT)]
    assert ms.table("db.t").scan().count() == 3


def test_without_fsync_nothing_but_the_metastore_is_synced(ms: Metastore, synced: list[str]) -> None:
    create(ms, "t", "id int, msg string")
    with connect(ms, "t", batch=2) as conn:
        _commit(conn, [1, 2])
        _commit(conn, [3])
    assert synced == [COMMIT, COMMIT]


def test_the_table_property_makes_every_writer_fsync(ms: Metastore, synced: list[str]) -> None:
    """``acidstream.fsync``: streaming (no configuration given), a delete, and the compactor's outputs, which
    are durable before the metastore records their publication."""
    ms.execute(
        "CREATE TABLE db.t (id int, msg string) STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true', 'acidstream.fsync'='true')"
    )
    location = Path(ms.table("db.t").location)
    with connect(ms, "t") as conn:
        _commit(conn, [1, 2, 3])
    [data] = location.glob("delta_*/bucket_00000")
    assert str(data) in synced[: synced.index(COMMIT)]

    synced.clear()
    assert ms.table("db.t").delete(pc.field("id") == 2) == {"inserted": 0, "updated": 0, "deleted": 1}
    [deletes] = location.glob("delete_delta_*/bucket_00000")
    before = synced[: synced.index(COMMIT)]
    assert sorted(before) == sorted(
        [str(deletes), str(deletes.parent / "_orc_acid_version"), str(deletes.parent), str(location)]
    )

    synced.clear()
    info = Compactor(ms, CompactorConfig(retention=0.0)).compact("db.t", kind="major").info
    assert info.state == "ready for cleaning"
    [base] = location.glob("base_*/bucket_00000")
    done = synced.index(COMMIT)  # mark_compacted commits the compactor's txn
    tmp = [p for p in synced[:done] if "/_tmp_" in p]
    assert any(p.endswith(f"/{base.parent.name}/bucket_00000") for p in tmp)
    # the partition directory: with the new _tmp before begin_publish, then with the renamed outputs
    assert synced[:done].count(str(location)) == 2
    assert sorted(r["id"] for r in ms.table("db.t").scan().to_arrow().to_pylist()) == [1, 3]
