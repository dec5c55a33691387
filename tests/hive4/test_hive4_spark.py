"""The Spark data source, batch writer and exactly-once streaming sink on a Hive 4 metastore (``metastore`` option
``thrift://...``): what Spark writes, Hive 4's reader reads, and the sink's replayed micro-batch commits nothing."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from acidstream import Metastore
from acidstream.storage import table_filesystem
from hive4.referee import Referee
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

COLUMNS = [("id", "int"), ("msg", "string")]
_names = itertools.count()


@pytest.fixture
def table(hive4_metastore: str) -> str:
    import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")
    name = f"default.spark{next(_names)}"
    with Metastore.connect(hive4_metastore) as ms:
        ms.execute(
            f"CREATE TABLE {name} (id int, msg string) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
            "TBLPROPERTIES ('transactional'='true')"
        )
    return name


def hive_rows(hive4: Referee, uri: str, table: str) -> list[tuple[Any, ...]]:
    with Metastore.connect(uri) as ms:
        txns = ms.snapshot()
        location = table_filesystem(ms.table(table).location)[1]
        return sorted(
            row
            for _, row in hive4.read(location, COLUMNS, ms.get_valid_write_ids(table, snapshot=txns), txns)
        )


def test_spark_writes_and_reads_a_hive_metastore_table(
    spark: Any, hive4: Referee, hive4_metastore: str, table: str
) -> None:
    from acidstream.spark import register

    acid_spark = register(spark)
    opts = {"metastore": hive4_metastore}
    frame = acid_spark.range(0, 200, numPartitions=2).selectExpr("cast(id as int) id", "concat('m', id) msg")
    frame.write.format("acidstream").options(**opts).mode("append").save(table)
    expected = [(i, f"m{i}") for i in range(200)]
    read = acid_spark.read.format("acidstream").options(**opts).load(table)
    assert sorted(tuple(r) for r in read.collect()) == expected
    assert hive_rows(hive4, hive4_metastore, table) == expected


def sink_once(spark: Any, metastore: str, table: str, tmp_path: Path, tasks: int = 1) -> None:
    """The sink's query over the CSV files of ``tmp_path/in`` until they are all in ``table`` (from its
    checkpoint, ``tmp_path/ck``), each micro-batch in ``tasks`` tasks."""
    from acidstream.spark import register

    frame = register(spark).readStream.format("csv").schema("id int, msg string").load(str(tmp_path / "in"))
    query = (
        frame.repartition(tasks)
        .writeStream.format("acidstream")
        .option("metastore", metastore)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start(table)
    )
    query.awaitTermination()


def land(tmp_path: Path, name: str, ids: range) -> None:
    landing = tmp_path / "in"
    landing.mkdir(exist_ok=True)
    (landing / name).write_text("".join(f"{i},m{i}\n" for i in ids))


def test_the_exactly_once_sink_commits_each_micro_batch_once_on_a_hive_metastore(
    spark: Any, hive4: Referee, hive4_metastore: str, table: str, tmp_path: Path
) -> None:
    land(tmp_path, "f0000.csv", range(0, 50))
    sink_once(
        spark, hive4_metastore, table, tmp_path
    )  # the first commit: Hive keeps its key only where the table has it
    land(tmp_path, "f0050.csv", range(50, 100))
    sink_once(
        spark, hive4_metastore, table, tmp_path
    )  # the same query from its checkpoint: only the new file
    expected = [(i, f"m{i}") for i in range(100)]
    assert hive_rows(hive4, hive4_metastore, table) == expected
    with Metastore.connect(hive4_metastore) as ms:
        scanned = ms.table(table).scan().to_arrow()
        assert sorted(zip(scanned["id"].to_pylist(), scanned["msg"].to_pylist(), strict=True)) == expected


def test_the_sink_agrees_on_one_txn_across_a_micro_batchs_tasks_on_a_hive_metastore(
    spark: Any, hive4: Referee, hive4_metastore: str, table: str, tmp_path: Path
) -> None:
    """A micro-batch of several tasks on a Hive Metastore: Hive's ``SHOW TRANSACTIONS`` does not report a txn's
    agent info, which the tasks once used to find the batch's txn."""
    for f in range(3):
        land(tmp_path, f"f{f}.csv", range(f * 40, f * 40 + 40))
    sink_once(spark, hive4_metastore, table, tmp_path, tasks=3)
    assert hive_rows(hive4, hive4_metastore, table) == [(i, f"m{i}") for i in range(120)]
