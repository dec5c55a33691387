"""Compaction against Hive's own classes and on Spark (tests/support/hivejvm.py).

* Hive 2.3's reader reads our ``base_N`` plus later (minor-compacted) deltas with our rows and ROW__IDs.
* Deletes written by Hive's ``OrcRecordUpdater`` in split-update mode compact like ours.
* orc-core reads every compacted file, compressed per ``orc.compress``.
* ``acidstream.spark.compact`` runs one task per (partition, bucket); a failed Spark job publishes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from compactorhelpers import dirs, hidden, rows_with_ids

import acidstream.spark
from acidstream import Metastore
from acidstream.acid.orc import read_events
from acidstream.acid.writeids import ValidWriteIdList
from acidstream.compactor import Compactor, CompactorConfig, CompactorDaemon
from acidstream.spark.compact import spark_runner
from read.readhelpers import connect, create, delete_rows
from support.hivejvm import HiveJvm, hive_txns

COLS = [("id", "int"), ("msg", "string")]


@pytest.fixture(scope="module")
def hive(spark: Any) -> HiveJvm:
    return HiveJvm(spark)


def hive_rows(hive: HiveJvm, ms: Metastore, table: str, snapshot: ValidWriteIdList) -> list[Any]:
    return sorted(
        (rid, tuple(row))
        for rid, row in hive.read_acid_table_with_row_ids(ms.table(table).location, COLS, hive_txns(snapshot))
    )


def stream_txns(
    ms: Metastore, table: str, ids: list[list[int]], batch: int = 1, abort: int | None = None
) -> None:
    with connect(ms, table, batch=batch) as conn:
        for n, chunk in enumerate(ids):
            conn.begin_transaction()
            conn.write_batch(pa.table({"id": pa.array(chunk, pa.int32()), "msg": [f"m{i}" for i in chunk]}))
            conn.abort_transaction() if n == abort else conn.commit_transaction()


def test_hive_reads_our_base_and_later_deltas_with_the_same_row_ids(ms: Metastore, hive: HiveJvm) -> None:
    # one event a stripe, stripes encoded side by side: Hive reads the base all the same
    compactor = Compactor(ms, CompactorConfig(retention=0, parallelism=2, batch_rows=1, stripe_bytes=1))
    create(ms, "t", "id int, msg string", "CLUSTERED BY (id) INTO 2 BUCKETS")
    stream_txns(ms, "t", [[1, 2, 3], [4, 5], [6], [7, 8]], batch=2, abort=2)
    victim = next(rid for rid, row in rows_with_ids(ms, "db.t") if row[0] == 4)
    delete_rows(ms, "t", [victim])
    before = rows_with_ids(ms, "db.t")
    compactor.compact("db.t", kind="major")
    compactor.clean()
    assert dirs(ms, "db.t") == ["base_0000005"]
    now = ms.get_valid_write_ids("db.t")
    assert hive_rows(hive, ms, "db.t", now) == before == rows_with_ids(ms, "db.t")  # no deleted row in a base
    stream_txns(ms, "t", [[10, 11], [12], [13]], abort=1)
    compactor.compact("db.t", kind="minor")
    stream_txns(ms, "t", [[20]])
    compactor.clean()
    assert dirs(ms, "db.t") == ["base_0000005", "delta_0000006_0000008", "delta_0000009_0000009"]
    for snapshot in (ms.get_valid_write_ids("db.t"), now):
        assert hive_rows(hive, ms, "db.t", snapshot) == rows_with_ids(ms, "db.t", snapshot=snapshot)
    location = Path(ms.table("db.t").location)
    info = hive.orc_file_info(str(location / "base_0000005" / "bucket_00001"))
    assert info["compression"] == "ZLIB" and info["metadata"]["hive.acid.version"] == "2"
    assert info["rows"] == sum(1 for rid, _ in before if rid[1] == 536936448)


def test_hive_seeks_in_our_base_by_its_row_index(ms: Metastore, hive: HiveJvm) -> None:
    """Hive's reader positions every column at a row group through the row index: the ACID columns we encode
    ourselves (constants) and copy (currentTransaction) included, in every stripe."""
    compactor = Compactor(ms, CompactorConfig(retention=0, stripe_bytes=1 << 20))
    create(ms, "t", "id int, msg string")
    stream_txns(ms, "t", [list(range(n, 75_000, 3)) for n in range(3)])
    delete_rows(ms, "t", [rid for rid, _ in rows_with_ids(ms, "db.t")[::11]])
    compactor.compact("db.t", kind="major")
    compactor.clean()
    [base] = Path(ms.table("db.t").location).glob("base_*/bucket_00000")
    events = [tuple(e.values()) for e in read_events(pafs.LocalFileSystem(), str(base)).to_pylist()]
    stripes = hive.orc_file_info(str(base))["stripes"]
    assert stripes > 1 and len(events) > 10_000 * (stripes + 1)  # stripes of several row groups
    for first in (0, 9_999, 10_000, 20_001, 33_333, 50_000, len(events) - 2):
        assert hive.orc_rows(str(base), first_row=first, limit=3) == events[first : first + 3]


def test_hive_split_update_deletes_compact_like_ours(ms: Metastore, hive: HiveJvm) -> None:
    """Hive's updater writes V0 bucket values, statement ids and delete_delta dirs; minor then major keep
    exactly the rows (and ROW__IDs) our reader shows."""
    create(ms, "h", "id int, msg string", "CLUSTERED BY (id) INTO 2 BUCKETS")
    location = ms.table("db.h").location
    txns = ms.open_txns(3)
    ms.allocate_table_write_ids(txns, "db.h")
    inserts = [("insert", 1, (i, f"a{i}")) for i in range(6)]
    hive.write_with_record_updater(location, COLS, inserts, bucket=0, min_write_id=1, max_write_id=1)
    hive.write_with_record_updater(
        location, COLS, [("insert", 1, (9, "b9"))], bucket=1, min_write_id=1, max_write_id=1
    )
    ops = [("delete", 2, (1, 0, 1)), ("delete", 2, (1, 0, 4)), ("insert", 2, (44, "a4-updated"))]
    hive.write_with_record_updater(
        location, COLS, ops, bucket=0, min_write_id=2, max_write_id=2, statement_id=0
    )
    hive.write_with_record_updater(
        location, COLS, [("delete", 3, (1, 1, 0))], bucket=1, min_write_id=3, max_write_id=3, statement_id=0
    )
    for txn in txns:
        ms.commit_txn(txn)
    before = rows_with_ids(ms, "db.h")
    assert sorted(row[0] for _, row in before) == [0, 2, 3, 5, 44]
    compactor = Compactor(ms, CompactorConfig(retention=0))
    assert compactor.compact("db.h", kind="minor").info.state == "ready for cleaning"
    compactor.clean()
    assert dirs(ms, "db.h") == ["delete_delta_0000001_0000003", "delta_0000001_0000003"]
    assert rows_with_ids(ms, "db.h") == before
    compactor.compact("db.h", kind="major")
    compactor.clean()
    assert dirs(ms, "db.h") == ["base_0000003"]
    assert rows_with_ids(ms, "db.h") == before
    assert hive_rows(hive, ms, "db.h", ms.get_valid_write_ids("db.h")) == before


def test_spark_compaction_runs_a_task_per_partition_and_bucket(
    ms: Metastore, spark: Any, warehouse: Path
) -> None:
    url = ms.url
    create(ms, "p", "id int, msg string", "PARTITIONED BY (ds string) CLUSTERED BY (id) INTO 3 BUCKETS")
    for ds in ("a", "b"):
        with connect(ms, "p", static=[ds], batch=2) as conn:
            for n in range(4):
                conn.begin_transaction()
                conn.write_batch(pa.table({"id": list(range(n * 10, n * 10 + 9)), "msg": [ds] * 9}))
                conn.commit_transaction()
    victim = rows_with_ids(ms, "db.p")[0][0]
    delete_rows(ms, "p", [victim], partition_dir=f"{ms.table('db.p').location}/ds=a")
    before = rows_with_ids(ms, "db.p")
    outcomes = acidstream.spark.compact(spark, "db.p", kind="major", metastore=url, warehouse=str(warehouse))
    assert [o.info.state for o in outcomes] == ["ready for cleaning", "ready for cleaning"]
    assert [len(o.results) for o in outcomes] == [3, 3]  # one task per (partition, bucket)
    assert rows_with_ids(ms, "db.p") == before
    # the tasks' attempts wrote below _tmp_*/_acidstream_attempts/: their files moved out, nothing is left
    assert hidden(ms, "db.p", "ds=a") == [] and hidden(ms, "db.p", "ds=b") == []
    Compactor(ms, CompactorConfig(retention=0)).clean()
    assert dirs(ms, "db.p", "ds=a") == ["base_0000009"] and dirs(ms, "db.p", "ds=b") == ["base_0000008"]
    assert rows_with_ids(ms, "db.p") == before


def test_daemon_with_spark_runner_and_a_failing_job(ms: Metastore, spark: Any) -> None:
    create(ms, "t", "id int, msg string")
    stream_txns(ms, "t", [[i] for i in range(12)])
    before = rows_with_ids(ms, "db.t")
    bad = Path(ms.table("db.t").location) / "delta_0000003_0000003" / "bucket_00000"
    data = bad.read_bytes()
    bad.write_bytes(data[:3] + b"\0" * (len(data) - 3))
    daemon = CompactorDaemon(ms, CompactorConfig(retention=0), run_jobs=spark_runner(spark))
    summary = daemon.run_once()
    assert summary.counts()["failed"] == 1
    [info] = ms.show_compactions()
    assert info.state == "failed" and "CorruptFileError" in (info.error_message or "")
    assert hidden(ms, "db.t") == [] and len(dirs(ms, "db.t")) == 12
    bad.write_bytes(data)
    assert rows_with_ids(ms, "db.t") == before
    cq = ms.compact("db.t", kind="major")
    assert daemon.run_once().counts()["compacted"] == 1
    assert ms.get_compaction(cq).state == "succeeded"
    assert dirs(ms, "db.t") == ["base_0000012"] and rows_with_ids(ms, "db.t") == before
