"""Batch writes: one job = one transaction, dynamic partitions and bucketing as in streaming."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from acidstream.acid.codec import BucketCodec
from acidstream.acid.orc.compression import CompressionKind
from acidstream.acid.orc.tail import read_tail
from acidstream.catalog import Metastore
from acidstream.errors import TransactionError
from acidstream.metastore import TxnStatus
from acidstream.spark.task_write import MAX_STATEMENT_ID, statement_id_for

PLACES = "element_at(array('Asia','Asia','Europe','America'), cast(id % 4 as int) + 1)"
COUNTRIES = "element_at(array('India','China','Germany','Peru'), cast(id % 4 as int) + 1)"


def alerts_frame(spark: Any, n: int, partitions: int, start: int = 0) -> Any:
    return spark.range(start, start + n, numPartitions=partitions).selectExpr(
        "cast(id as int) id", "concat('msg', id) msg", f"{PLACES} continent", f"{COUNTRIES} country"
    )


def sorted_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(
        zip(*(table.column(c).to_pylist() for c in ["id", "msg", "continent", "country"]), strict=True)
    )


def test_append_with_dynamic_partitions_into_bucketed_table_reads_back(
    acid_spark: Any, ms: Metastore, opts: dict[str, str], warehouse: Path
) -> None:
    df = alerts_frame(acid_spark, 400, 3)
    df.write.format("acidstream").options(**opts).mode("append").save("testing.alerts")

    expected = sorted(tuple(r) for r in df.collect())
    got = ms.table("testing.alerts").scan(with_row_id=True).to_arrow()
    assert sorted_rows(got) == expected
    assert sorted(p.name for p in ms.list_partitions("testing.alerts")) == [
        "continent=America/country=Peru",
        "continent=Asia/country=China",
        "continent=Asia/country=India",
        "continent=Europe/country=Germany",
    ]
    # one write id for the whole job, one statement per Spark task, buckets by Hive's hash of id
    row_ids = got.column("ROW__ID").to_pylist()
    assert {r["writeid"] for r in row_ids} == {1}
    statements = {BucketCodec.V1.decode_statement_id(r["bucketid"]) for r in row_ids}
    assert statements == {0, 1, 2}
    deltas = {p.parent.name for p in warehouse.rglob("bucket_*")}
    assert deltas == {
        "delta_0000001_0000001_0000",
        "delta_0000001_0000001_0001",
        "delta_0000001_0000001_0002",
    }
    assert all(int(p.name.split("_")[1]) < 5 for p in warehouse.rglob("bucket_*"))

    read = acid_spark.read.format("acidstream").options(**opts).load("testing.alerts")
    assert sorted(tuple(r) for r in read.collect()) == expected

    try:
        from support.hivejvm import HiveJvm
    except ImportError:  # pragma: no cover - the oracle is optional
        return
    hive = HiveJvm(acid_spark)
    hive_rows = []
    for part in ms.list_partitions("testing.alerts"):
        rows = hive.read_acid_table(
            part.location, [("id", "int"), ("msg", "string")], "1:9223372036854775807::", 5
        )
        hive_rows += [(*r, *part.values) for r in rows]
    assert sorted(hive_rows) == expected


def test_append_honours_the_tables_orc_codec_and_hive_reads_it(
    acid_spark: Any, ms: Metastore, opts: dict[str, str], warehouse: Path
) -> None:
    ms.execute(
        "CREATE TABLE testing.events (id int, msg string) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true', 'orc.compress'='SNAPPY')"
    )
    df = alerts_frame(acid_spark, 300, 2).select("id", "msg")
    df.write.format("acidstream").options(**opts).mode("append").save("testing.events")

    expected = sorted(tuple(r) for r in df.collect())
    table = ms.table("testing.events")
    files = sorted(Path(table.location).rglob("bucket_*"))
    assert files
    for path in files:
        with pa.OSFile(str(path)) as f:
            assert read_tail(f, f.size()).compression is CompressionKind.SNAPPY
    got = table.scan().to_arrow()
    assert sorted(zip(got.column("id").to_pylist(), got.column("msg").to_pylist(), strict=True)) == expected
    try:
        from support.hivejvm import HiveJvm
    except ImportError:  # pragma: no cover - the oracle is optional
        return
    rows = HiveJvm(acid_spark).read_acid_table(
        table.location, [("id", "int"), ("msg", "string")], "1:9223372036854775807::", 2
    )
    assert sorted(tuple(r) for r in rows) == expected


def test_task_failing_mid_write_leaves_nothing_visible_and_aborts_the_txn(
    acid_spark: Any, ms: Metastore, opts: dict[str, str]
) -> None:
    from pyspark.sql.functions import udf

    @udf("int")
    def explode_late(i):  # type: ignore[no-untyped-def]  # annotated UDFs make Spark guess a pandas UDF
        if i == 350:
            raise RuntimeError("task dies mid-write")
        return i

    acid_spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        df = alerts_frame(acid_spark, 400, 2).withColumn("id", explode_late("id"))
        with pytest.raises(Exception, match="task dies mid-write"):
            df.write.format("acidstream").options(**opts).mode("append").save("testing.alerts")
    finally:
        acid_spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")

    assert ms.table("testing.alerts").scan().count() == 0
    txns = [t for t in ms.show_txns() if (t.agent_info or "").startswith("acidstream-spark-batch")]
    assert [t.state for t in txns] == [TxnStatus.ABORTED]
    write_ids = ms.get_valid_write_ids("testing.alerts")
    assert write_ids.is_write_id_aborted(1) and not write_ids.is_write_id_valid(1)


def test_overwrite_is_refused_with_a_reason(acid_spark: Any, ms: Metastore, opts: dict[str, str]) -> None:
    with pytest.raises(Exception, match="cannot overwrite yet"):
        alerts_frame(acid_spark, 10, 1).write.format("acidstream").options(**opts).mode("overwrite").save(
            "testing.alerts"
        )
    assert ms.show_txns() == []


def test_statement_ids_are_task_partition_ids_within_12_bits() -> None:
    assert statement_id_for(0) == 0
    assert statement_id_for(MAX_STATEMENT_ID) == 4095
    with pytest.raises(TransactionError, match="coalesce"):
        statement_id_for(4096)
