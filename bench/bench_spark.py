"""Spark pipeline throughput on one machine, same run, same data (numbers go in the issue report).

* read: ``spark.read.orc`` of the table's event files with no ACID logic (the ceiling) vs ``read_table``
  (JVM ORC reader + write-id filter + delete anti-join in Spark) vs ``format("acidstream")`` (Python data
  source, Arrow merge per bucket); every path computes the same aggregate over all columns.
* batch write: ``df.write.orc`` vs ``df.write.format("acidstream").mode("append")`` of one cached DataFrame.
* streaming sink: CSV landing files, one per micro-batch, into the acidstream sink; records/s over the query.

Usage: ``python bench/bench_spark.py [--rows 2000000] [--runs 2] [--write-only]``; prints one line per measurement.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from _tuning import tuned
from acidstream.catalog import Metastore
from acidstream.spark import read_table, register, session
from acidstream.spark.jvm_read import HIVE_ORC_FORMAT

TABLE = "bench.events"
DDL = (
    f"CREATE TABLE {TABLE} (id bigint, msg string, score double) CLUSTERED BY (id) INTO 4 BUCKETS "
    "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
)
#: the same table with df.write.orc's default codec in Spark 4 (``orc.compress`` picks it, as in Hive)
ZSTD_DDL = DDL.replace("'transactional'='true'", "'transactional'='true', 'orc.compress'='ZSTD'")


def best(label: str, runs: int, rows: int, fn: Callable[[], Any]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    fastest = min(times)
    print(
        f"{label:<44} {fastest:7.2f} s  {rows / fastest / 1e6:6.2f} M rows/s  (runs: {', '.join(f'{t:.2f}' for t in times)})"
    )
    return fastest


def interleaved(cases: dict[str, Callable[[], Any]], *, rounds: int, rows: int) -> dict[str, list[float]]:
    """One untimed warm-up of every case (JIT, Python workers), then ``rounds`` rounds running each case once.

    The machine's speed drifts within minutes, so cases are compared round by round, never best against best.
    """
    for fn in cases.values():
        fn()
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            seconds[name].append(time.perf_counter() - start)
    for name, times in seconds.items():
        med = float(np.median(times))
        print(
            f"{name:<44} {med:7.2f} s  {rows / med / 1e6:6.2f} M rows/s  (median; rounds: "
            f"{', '.join(f'{t:.2f}' for t in times)})"
        )
    return seconds


def median_ratio(peer: list[float], ours: list[float]) -> float:
    """Median over rounds of peer time / our time (our throughput as a share of the peer's)."""
    return float(np.median([p / o for p, o in zip(peer, ours, strict=True)]))


def aggregate(df: Any) -> Any:
    return df.selectExpr("sum(id)", "sum(length(msg))", "sum(score)").collect()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=3, help="timed runs (write: interleaved rounds)")
    parser.add_argument("--stream-files", type=int, default=10)
    parser.add_argument("--write-only", action="store_true", help="stop after the batch-write measurements")
    args = parser.parse_args()
    rows, runs = args.rows, args.runs

    root = tempfile.mkdtemp(prefix="acidstream-bench-")
    warehouse = os.path.join(root, "wh")
    url = f"sqlite:///{root}/metastore.db"
    opts = {"metastore": url, "warehouse": warehouse}
    ms = Metastore.connect(url, warehouse=warehouse)
    ms.execute("CREATE DATABASE bench")
    ms.execute(DDL)
    spark = register(session("acidstream-bench"))
    print(f"{rows:,} rows, {os.cpu_count()} cores, local[2], runs={runs}; writes: medians, reads: best run")

    source = (
        spark.range(rows, numPartitions=2)
        .selectExpr("id", "concat('message number ', id) msg", "id * 0.5 score")
        .cache()
    )
    source.count()
    plain_dir = os.path.join(root, "plain")

    def append_once(ddl: str) -> None:
        ms.execute(f"DROP TABLE {TABLE}")  # the drop deletes the table's files too
        ms.execute(ddl)
        source.write.format("acidstream").options(**opts).mode("append").save(TABLE)

    writes: dict[str, Callable[[], Any]] = {
        "write: df.write.orc (zstd, Spark's default)": lambda: source.write.mode("overwrite").orc(plain_dir),
        "write: df.write.orc (zlib, Hive's default)": lambda: (
            source.write.mode("overwrite").option("compression", "zlib").orc(plain_dir)
        ),
        "write: format('acidstream'), ZSTD table": lambda: append_once(ZSTD_DDL),
        "write: format('acidstream'), ZLIB table": lambda: append_once(DDL),
    }
    seconds = interleaved(writes, rounds=runs, rows=rows)
    orc, zlib, acid_zstd, acid = (seconds[name] for name in writes)
    print(
        f"  -> batch write at {median_ratio(orc, acid_zstd):.0%} of df.write.orc with the same codec (zstd), "
        f"{median_ratio(zlib, acid):.0%} with Hive's zlib (medians of per-round ratios)"
    )
    tiny = spark.range(1).selectExpr("id", "'x' msg", "0.5 score")
    fixed = best(
        "write: 1 row (fixed cost: txn, planner, commit)",
        runs,
        1,
        lambda: tiny.write.format("acidstream").options(**opts).mode("append").save(TABLE),
    )
    variable = float(np.median(acid)) - fixed
    print(
        f"  -> without the fixed cost: {float(np.median(zlib)) / max(variable, 1e-9):.0%} of df.write.orc (zlib)"
    )
    if args.write_only:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
        return

    plan = ms.table(TABLE).scan().plan_files()
    files = [f.path for task in plan.tasks for f in task.insert_files]
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(16 << 20))
    plain_events = best(
        "read: spark.read.orc of event files (no ACID)",
        runs,
        rows,
        lambda: (
            spark.read.format(HIVE_ORC_FORMAT)
            .load(files)
            .selectExpr("sum(row.id)", "sum(length(row.msg))", "sum(row.score)")
            .collect()
        ),
    )
    jvm = best(
        "read: read_table (JVM + ACID in Spark)",
        runs,
        rows,
        lambda: aggregate(read_table(spark, TABLE, **opts)),
    )
    python = best(
        "read: format('acidstream') (Python data source)",
        runs,
        rows,
        lambda: aggregate(spark.read.format("acidstream").options(**opts).load(TABLE)),
    )
    print(
        f"  -> read_table at {plain_events / jvm:.0%}, Python data source at {plain_events / python:.0%} of plain ORC"
    )

    landing = os.path.join(root, "landing")
    os.makedirs(landing)
    per_file = rows // args.stream_files
    for f in range(args.stream_files):
        with open(os.path.join(landing, f"part-{f:04d}.csv"), "w", encoding="utf-8") as handle:
            handle.writelines(
                f"{i},message number {i},{i * 0.5}\n" for i in range(f * per_file, (f + 1) * per_file)
            )
    ms.execute(f"DROP TABLE {TABLE}")
    ms.execute(DDL)
    stream = (
        spark.readStream.format("csv")
        .schema("id bigint, msg string, score double")
        .option("maxFilesPerTrigger", 1)
        .load(landing)
    )
    start = time.perf_counter()
    query = (
        stream.writeStream.format("acidstream")
        .options(**opts)
        .option("checkpointLocation", os.path.join(root, "ck"))
        .trigger(availableNow=True)
        .start(TABLE)
    )
    query.awaitTermination()
    seconds = time.perf_counter() - start
    streamed = per_file * args.stream_files
    assert ms.table(TABLE).scan(columns=["id"]).count() == streamed
    print(
        f"{'stream: CSV files -> acidstream sink':<44} {seconds:7.2f} s  {streamed / seconds:,.0f} records/s "
        f"({args.stream_files} micro-batches, first includes worker start-up)"
    )
    # Sustained rate: micro-batches after the first (worker start-up), from Spark's own query progress.
    later = [p for p in query.recentProgress if p["numInputRows"]][1:]
    if later:
        batch_rows = sum(p["numInputRows"] for p in later)
        batch_seconds = sum(p["durationMs"]["triggerExecution"] for p in later) / 1000
        print(
            f"{'stream: sustained (batches 2..n, progress)':<44} {batch_seconds:7.2f} s  "
            f"{batch_rows / batch_seconds:,.0f} records/s ({per_file:,} rows per micro-batch: "
            f"{per_file / (batch_rows / batch_seconds):.1f} s each)"
        )
    spark.stop()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    tuned()
    main()
