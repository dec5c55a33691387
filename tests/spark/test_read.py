"""Reading into Spark: one snapshot per query, consistent while a streaming connection commits."""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow as pa

from acidstream.catalog import Metastore
from acidstream.spark import read_table
from acidstream.streaming.connection import StreamingConnection
from acidstream.streaming.writers import StrictDelimitedInputWriter

TXN_ROWS = 60
PLACES = [("Asia", "India"), ("Europe", "Germany")]


def txn_rows(txn: int) -> pa.RecordBatch:
    ids = list(range(txn * TXN_ROWS, (txn + 1) * TXN_ROWS))
    return pa.RecordBatch.from_pydict(
        {
            "id": pa.array(ids, pa.int32()),
            "msg": [f"m{i}" for i in ids],
            "continent": [PLACES[i % 2][0] for i in ids],
            "country": [PLACES[i % 2][1] for i in ids],
        }
    )


def connect(ms: Metastore, batch_size: int) -> StreamingConnection:
    return (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("testing")
        .with_table("alerts")
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .with_transaction_batch_size(batch_size)
        .connect()
    )


def test_reads_see_whole_transactions_while_a_streaming_connection_commits(
    acid_spark: Any, ms: Metastore, opts: dict[str, str]
) -> None:
    conn = connect(ms, batch_size=20)  # one open batch: files grow under side files while we read
    txns = 4
    done = threading.Event()
    counts: list[int] = []

    def ingest() -> None:
        for t in range(txns):
            seen = len(counts)
            conn.begin_transaction()
            conn.write_batch(txn_rows(t))
            while len(counts) < seen + 1 and not done.is_set():  # a read starts while this txn is open
                time.sleep(0.05)
            conn.commit_transaction()
        done.set()

    conn.begin_transaction()
    conn.write_batch(txn_rows(txns))  # rows of an aborted txn in the same files: never visible
    conn.abort_transaction()
    worker = threading.Thread(target=ingest)
    frame = acid_spark.read.format("acidstream").options(**opts).load("testing.alerts")
    try:
        worker.start()
        pinned = frame.count()
        while not done.is_set():  # every query builds its DataFrame, so it takes a new snapshot
            counts.append(acid_spark.read.format("acidstream").options(**opts).load("testing.alerts").count())
            counts.append(read_table(acid_spark, "testing.alerts", **opts).count())
        worker.join()
        assert len(counts) > txns
        assert all(c % TXN_ROWS == 0 for c in counts), counts
        assert counts == sorted(counts), counts  # each query takes a later snapshot than the one before

        expected = sorted(i for t in range(txns) for i in txn_rows(t).column("id").to_pylist())
        plan = ms.table("testing.alerts").scan().plan_files()
        assert any(
            f.open_batch for task in plan.tasks for f in task.insert_files
        )  # the mixed path is exercised
        jvm_and_python = read_table(acid_spark, "testing.alerts", columns=["id"], with_row_id=True, **opts)
        assert sorted(r.id for r in jvm_and_python.collect()) == expected
        python_rows = ms.table("testing.alerts").scan(columns=["id"], with_row_id=True).to_arrow().to_pylist()
        assert sorted((tuple(r.ROW__ID), r.id) for r in jvm_and_python.collect()) == sorted(
            (tuple(r["ROW__ID"].values()), r["id"]) for r in python_rows
        )
        assert frame.count() == pinned  # a DataFrame keeps the snapshot it was planned at
        fresh = acid_spark.read.format("acidstream").options(**opts).load("testing.alerts")
        assert sorted(r.id for r in fresh.collect()) == expected
    finally:
        conn.close()


def test_a_pinned_snapshot_ignores_later_commits(
    acid_spark: Any, ms: Metastore, opts: dict[str, str]
) -> None:
    with connect(ms, batch_size=1) as conn:
        for t in range(2):
            conn.begin_transaction()
            conn.write_batch(txn_rows(t))
            conn.commit_transaction()
        snapshot = str(ms.get_valid_write_ids("testing.alerts"))
        conn.begin_transaction()
        conn.write_batch(txn_rows(2))
        conn.commit_transaction()
    pinned = (
        acid_spark.read.format("acidstream")
        .options(**opts)
        .option("snapshot", snapshot)
        .load("testing.alerts")
    )
    assert pinned.count() == 2 * TXN_ROWS
    assert read_table(acid_spark, "testing.alerts", snapshot=snapshot, **opts).count() == 2 * TXN_ROWS


def test_partition_filters_prune_read_tasks(acid_spark: Any, ms: Metastore, opts: dict[str, str]) -> None:
    with connect(ms, batch_size=1) as conn:
        conn.begin_transaction()
        conn.write_batch(txn_rows(0))
        conn.commit_transaction()
    # one Spark partition per bucket task, so the task count shows what was pruned
    frame = (
        acid_spark.read.format("acidstream")
        .options(**opts)
        .option("partitionBytes", "1")
        .load("testing.alerts")
    )
    everything = frame.rdd.getNumPartitions()
    asia = frame.where("continent = 'Asia'")
    assert asia.rdd.getNumPartitions() < everything
    assert sorted(r.id for r in asia.collect()) == [i for i in range(TXN_ROWS) if i % 2 == 0]
    projected = (
        acid_spark.read.format("acidstream")
        .options(**opts)
        .option("columns", "country,id")
        .load("testing.alerts")
    )
    assert projected.columns == ["country", "id"]


def test_sql_views_see_each_querys_own_snapshot(acid_spark: Any, ms: Metastore, opts: dict[str, str]) -> None:
    from acidstream.spark import register_views

    ms.execute("CREATE DATABASE other")
    ms.execute("CREATE TABLE other.alerts (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
    ms.execute("CREATE TABLE other.notes (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
    views = register_views(acid_spark, **opts)  # every table; the shared name 'alerts' is qualified
    assert views == {
        "testing_alerts": "testing.alerts",
        "other_alerts": "other.alerts",
        "notes": "other.notes",
    }
    count = "SELECT count(*) AS n FROM testing_alerts WHERE country = 'India'"
    assert acid_spark.sql(count).first().n == 0
    with connect(ms, batch_size=1) as conn:
        conn.begin_transaction()
        conn.write_batch(txn_rows(0))
        conn.commit_transaction()
    assert acid_spark.sql(count).first().n == TXN_ROWS // 2  # the same view, a later query: the new commit
    assert register_views(acid_spark, ["testing.alerts"], **opts) == {"alerts": "testing.alerts"}
    assert acid_spark.sql("SELECT count(*) AS n FROM alerts").first().n == TXN_ROWS
