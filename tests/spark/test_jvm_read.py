"""Spark's JVM read of ACID snapshots, on tables written by Hive 2.3's own OrcRecordUpdater.

Every result is compared with a brute-force evaluation of Hive's read rules (docs/format.md, Reading a
snapshot) over the same files read by pyarrow (valid inserts minus valid delete events, keyed per partition),
and the insert side with Hive's reader.
"""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.orc as po
import pytest
from pyspark.sql import Row

from acidstream.acid.types import Column, parse_type
from acidstream.acid.writeids import LONG_MAX, ValidWriteIdList
from acidstream.catalog import Metastore
from acidstream.spark.jvm_read import (
    HIVE_ORC_FORMAT,
    EventFile,
    SnapshotPlan,
    read_plan,
    valid_write_id_filter,
)
from support.hivejvm import HiveJvm

COLS = [("id", "int"), ("msg", "string"), ("amount", "decimal(10,2)")]
COLUMNS = tuple(Column(n, parse_type(t)) for n, t in COLS)
KEYS = (Column("region", parse_type("string")), Column("day", parse_type("int")))


def _row(i: int, tag: str = "m") -> tuple[Any, ...]:
    return (i, f"{tag}{i}", Decimal(i) / 4)


def _write_history(hive: HiveJvm, d: str) -> None:
    """Write ids 1..7 over buckets 0 and 1: 2 and 7 end up aborted, 4 open (per snapshot), 5-6 in one delta."""

    def write(ops: list[tuple[Any, ...]], bucket: int, lo: int, hi: int | None = None) -> None:
        hive.write_with_record_updater(
            d,
            COLS,
            ops,
            bucket=bucket,
            min_write_id=lo,
            max_write_id=hi or lo,
            flush_after_each_write_id=True,
        )

    write([("insert", 1, _row(i)) for i in range(5)], 0, 1)
    write([("insert", 1, _row(i)) for i in range(5, 8)], 1, 1)
    write([("insert", 2, _row(i, "aborted")) for i in (100, 101)], 0, 2)
    write([("delete", 3, (1, 0, 1)), ("update", 3, (1, 0, 3), _row(3, "upd"))], 0, 3)
    write([("insert", 3, _row(8)), ("insert", 3, _row(9)), ("delete", 3, (1, 1, 0))], 1, 3)
    write([("insert", 4, _row(200, "open")), ("delete", 4, (1, 0, 0))], 0, 4)
    write(
        [("insert", 5, _row(50)), ("insert", 5, _row(51)), ("delete", 5, (2, 0, 0)), ("insert", 6, _row(60))],
        0,
        5,
        6,
    )
    write([("delete", 7, (1, 0, 2))], 0, 7)


def _event_files(d: str, values: tuple[str | None, ...] = ()) -> tuple[list[EventFile], list[EventFile]]:
    inserts, deletes = [], []
    for sub in sorted(os.listdir(d)):
        if not sub.startswith(("delta_", "delete_delta_", "base_")):
            continue
        for name in sorted(os.listdir(os.path.join(d, sub))):
            path = os.path.join(d, sub, name)
            event = EventFile(path, os.path.getsize(path), int(name[7:]), values, sub.startswith("delete_"))
            (deletes if event.is_delete else inserts).append(event)
    return inserts, deletes


@pytest.fixture(scope="module")
def hive(spark: Any) -> HiveJvm:
    return HiveJvm(spark)


@pytest.fixture(scope="module")
def table(hive: HiveJvm, tmp_path_factory: pytest.TempPathFactory) -> str:
    d = str(tmp_path_factory.mktemp("flat"))
    _write_history(hive, d)
    return d


@pytest.fixture(scope="module")
def partitioned(
    hive: HiveJvm, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, list[EventFile], list[EventFile]]:
    """Two partitions with identical ROW__IDs (same write ids, buckets, row counters); deletes only in the one
    listed second, so a partition index assigned per side of the anti-join would delete from the wrong one."""
    root = tmp_path_factory.mktemp("parted")
    eu, odd = str(root / "region=eu" / "day=1"), str(root / "region=a b%3A" / "day=2")
    for d, tag in ((eu, "eu"), (odd, "odd")):
        hive.write_with_record_updater(
            d, COLS, [("insert", 1, _row(i, tag)) for i in range(4)], bucket=0, min_write_id=1, max_write_id=1
        )
    hive.write_with_record_updater(
        odd, COLS, [("delete", 2, (1, 0, 1))], bucket=0, min_write_id=2, max_write_id=2
    )
    eu_ins, eu_del = _event_files(eu, ("eu", "1"))
    odd_ins, odd_del = _event_files(odd, ("a b:", "2"))
    return str(root), odd_ins + eu_ins, odd_del + eu_del


def _plan(
    inserts: list[EventFile], deletes: list[EventFile], snapshot: str, keys: tuple[Column, ...] = ()
) -> SnapshotPlan:
    return SnapshotPlan(COLUMNS, keys, ValidWriteIdList.parse(snapshot), tuple(inserts), tuple(deletes))


def _partition_value(key: Column, value: str | None) -> Any:
    return None if value is None else int(value) if key.type.name == "int" else value


def brute_force(plan: SnapshotPlan, names: list[str], with_row_id: bool) -> list[tuple[Any, ...]]:
    """Hive's read rules by hand over pyarrow's view of the files."""
    valid = plan.valid_write_ids.is_write_id_valid
    deleted = {
        (f.partition_values, e["originalTransaction"], e["bucket"], e["rowId"])
        for f in plan.delete_files
        for e in po.read_table(f.path).to_pylist()
        if valid(e["currentTransaction"])
    }
    rows = []
    for f in plan.insert_files:
        partition = {
            k.name: _partition_value(k, v)
            for k, v in zip(plan.partition_keys, f.partition_values, strict=True)
        }
        for e in po.read_table(f.path).to_pylist():
            key = (e["originalTransaction"], e["bucket"], e["rowId"])
            if valid(e["currentTransaction"]) and (f.partition_values, *key) not in deleted:
                values = tuple({**e["row"], **partition}[n] for n in names)
                rows.append((key, *values) if with_row_id else values)
    return sorted(rows)


def collected(frame: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(tuple(v) if isinstance(v, Row) else v for v in r) for r in frame.collect())


SNAPSHOTS = [
    "default.t:7:4:4:2,7",  # 4 open, 2 and 7 aborted
    "default.t:3:9223372036854775807::2",
    "default.t:5:4:4:2",  # write id 6 above the high-water mark, in the same file as valid 5
    f"default.t:7:{LONG_MAX}::",  # everything committed, even 2, 4 and 7
    f"default.t:1:{LONG_MAX}::",
]


@pytest.mark.parametrize("snapshot", SNAPSHOTS)
def test_snapshot_matches_brute_force(spark: Any, table: str, snapshot: str) -> None:
    plan = _plan(*_event_files(table), snapshot)
    frame = read_plan(spark, plan, with_row_id=True)
    assert frame.columns == ["ROW__ID", "id", "msg", "amount"]
    expected = brute_force(plan, ["id", "msg", "amount"], with_row_id=True)
    assert collected(frame) == expected
    assert expected  # every snapshot above sees some rows


def test_known_rows_at_one_snapshot(spark: Any, table: str) -> None:
    """Pin the semantics independently of the brute force: aborted, open, deleted, updated rows."""
    frame = read_plan(spark, _plan(*_event_files(table), "default.t:7:4:4:2,7"), columns=["id", "msg"])
    expected = [0, 2, 4, 6, 7, 8, 9, 50, 51, 60]
    assert collected(frame) == sorted([(3, "upd3")] + [(i, f"m{i}") for i in expected])


@pytest.mark.parametrize("snapshot", ["default.t:7:4:4:2,7", f"default.t:5:{LONG_MAX}::"])
def test_insert_side_and_row_ids_match_hives_reader(
    hive: HiveJvm, spark: Any, table: str, snapshot: str
) -> None:
    write_ids = ValidWriteIdList.parse(snapshot)
    invalid = write_ids.invalid_write_ids()
    txns = f"{write_ids.high_watermark}:{write_ids.min_open_write_id}:" + ":".join(map(str, invalid))
    if not invalid:
        txns += ":"
    inserts, _ = _event_files(table)
    ours = read_plan(spark, _plan(inserts, [], snapshot), columns=["id", "msg", "amount"], with_row_id=True)
    theirs = hive.read_acid_table_with_row_ids(table, COLS, txns)
    assert collected(ours) == sorted((rid, *row) for rid, row in theirs)


def test_partitions_are_literals_and_deletes_stay_in_their_partition(
    spark: Any, partitioned: tuple[str, list[EventFile], list[EventFile]]
) -> None:
    _, inserts, deletes = partitioned
    plan = _plan(inserts, deletes, f"default.t:2:{LONG_MAX}::", KEYS)
    frame = read_plan(spark, plan, columns=["day", "id", "region"], with_row_id=True)
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == [
        ("ROW__ID", "struct<writeid:bigint,bucketid:int,rowid:bigint>"),
        ("day", "int"),
        ("id", "int"),
        ("region", "string"),
    ]
    rows = collected(frame)
    assert rows == brute_force(plan, ["day", "id", "region"], with_row_id=True)
    assert sorted(r[1:] for r in rows) == [(1, i, "eu") for i in range(4)] + [
        (2, i, "a b:") for i in (0, 2, 3)
    ]
    assert collected(read_plan(spark, plan, columns=["region"]).distinct()) == [("a b:",), ("eu",)]


def test_null_partition_value_is_a_typed_null(
    spark: Any, partitioned: tuple[str, list[EventFile], list[EventFile]]
) -> None:
    _, inserts, _ = partitioned
    nulled = [
        EventFile(f.path, f.logical_length, f.bucket_id, (f.partition_values[0], None)) for f in inserts
    ]
    frame = read_plan(spark, _plan(nulled, [], f"default.t:2:{LONG_MAX}::", KEYS), columns=["day"])
    assert frame.schema.fields[0].dataType.simpleString() == "int"
    assert collected(frame.distinct()) == [(None,)]


def test_projection_reads_only_needed_event_columns(spark: Any, table: str) -> None:
    inserts, deletes = _event_files(table)
    plain = read_plan(spark, _plan(inserts, [], "default.t:7:4:4:2,7"), columns=["msg"])
    assert plain.columns == ["msg"]
    read_schemas = plain._jdf.queryExecution().executedPlan().toString()
    assert "ReadSchema: struct<currentTransaction:bigint,row:struct<" in read_schemas
    assert "operation" not in read_schemas and "rowId" not in read_schemas
    with_deletes = read_plan(spark, _plan(inserts, deletes, "default.t:7:4:4:2,7"), columns=["msg"])
    assert (
        "originalTransaction:bigint,bucket:int,rowId:bigint"
        in with_deletes._jdf.queryExecution().executedPlan().toString()
    )


def test_long_exception_lists_become_a_broadcast_anti_join(spark: Any, table: str) -> None:
    snapshot = ValidWriteIdList(7, (4,), (2, 7), table="default.t", min_open_write_id=4)
    events = spark.read.format(HIVE_ORC_FORMAT).load([f.path for f in _event_files(table)[0]])
    inline = valid_write_id_filter(events, "currentTransaction", snapshot)
    joined = valid_write_id_filter(events, "currentTransaction", snapshot, inline_limit=1)
    assert "LeftAnti" in joined._jdf.queryExecution().executedPlan().toString()
    kept = sorted(r.currentTransaction for r in joined.select("currentTransaction").collect())
    assert kept == sorted(r.currentTransaction for r in inline.select("currentTransaction").collect())
    assert set(kept) == {1, 3, 5, 6}


def test_open_batches_are_refused_and_empty_plans_keep_their_schema(spark: Any, table: str) -> None:
    inserts, deletes = _event_files(table)
    still_open = [EventFile(inserts[0].path, 10, 0, open_batch=True)]
    with pytest.raises(ValueError, match="open streaming batches"):
        read_plan(spark, _plan(still_open, deletes, "default.t:7:4:4:2,7"))
    empty = read_plan(spark, _plan([], deletes, "default.t:7:4:4:2,7"), columns=["amount"], with_row_id=True)
    assert [f.dataType.simpleString() for f in empty.schema.fields] == [
        "struct<writeid:bigint,bucketid:int,rowid:bigint>",
        "decimal(10,2)",
    ]
    assert empty.count() == 0
    with pytest.raises(ValueError, match="unknown columns"):
        read_plan(spark, _plan(inserts, [], "default.t:7:4:4:2,7"), columns=["nope"])


def test_reads_the_planners_scan_plan(spark: Any, table: str) -> None:
    """The driver's planner (acidstream.read.planning) feeds read_plan directly."""
    import pyarrow.fs as pafs

    from acidstream.read.planning import ScanPlan, plan_partition

    write_ids = ValidWriteIdList.parse("default.t:7:4:4:2,7")
    tasks, _ = plan_partition(pafs.LocalFileSystem(), table, write_ids, None, (), "")
    scan = ScanPlan("default.t", COLUMNS, (), write_ids, tuple(tasks))
    direct = _plan(*_event_files(table), "default.t:7:4:4:2,7")
    assert collected(read_plan(spark, scan, with_row_id=True)) == collected(
        read_plan(spark, direct, with_row_id=True)
    )


def test_from_scan_plan_reads_shared_deletes_once_and_refuses_originals() -> None:
    """SnapshotPlan.from_scan_plan keeps each shared delete file once and refuses original files."""
    from acidstream.read.planning import BucketTask, FileSlice, ScanPlan

    write_ids = ValidWriteIdList.parse(f"default.t:1:{LONG_MAX}::")
    shared = FileSlice("/t/delete_delta_1_1/bucket_00000", 5, 0, 1, 1, None)
    tasks = tuple(
        BucketTask(
            ("eu",), "region=eu", b, (FileSlice(f"/t/delta_1_1/bucket_0000{b}", 9, b, 1, 1, None),), (shared,)
        )
        for b in (0, 1)
    )
    plan = SnapshotPlan.from_scan_plan(ScanPlan("default.t", COLUMNS, KEYS[:1], write_ids, tasks))
    assert [f.path for f in plan.insert_files] == ["/t/delta_1_1/bucket_00000", "/t/delta_1_1/bucket_00001"]
    assert plan.delete_files == (EventFile(shared.path, 5, 0, ("eu",), is_delete=True),)
    original = BucketTask((), "", 0, (FileSlice("/t/000000_0", 9, 0, 0, 0, None, original=True),), ())
    with pytest.raises(ValueError, match="original"):
        SnapshotPlan.from_scan_plan(ScanPlan("default.t", COLUMNS, (), write_ids, (original,)))


DRIVER = """
import sys
from acidstream.spark import read_table
from acidstream.spark.session import session
spark = session("acidstream-exit-test", master="local[1]")
print(read_table(spark, "default.t", metastore=sys.argv[1], warehouse=sys.argv[2]).count(), flush=True)
"""


@pytest.mark.slow
def test_read_tables_registration_ends_with_its_driver(tmp_path: Path) -> None:
    """JVM tasks do not heartbeat, so read_table's registration has a txn timeout's lease; the driver's exit
    ends it at once (a finished spark-shell query no longer holds the cleaner back for minutes)."""
    url = f"sqlite:///{tmp_path / 'ms.db'}"
    with Metastore.connect(url, warehouse=tmp_path) as ms:
        ms.execute("CREATE TABLE t (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
        ms.table("t").merge(pd.DataFrame({"id": [1, 2, 3]}), on=["id"])
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, url, str(tmp_path)], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.split() == ["3"]
        assert ms.active_readers("default.t") == []
