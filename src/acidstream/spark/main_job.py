"""The end-to-end pipeline behind ``acidstream main-job``: landing CSV files → Spark Structured Streaming →
``testing.alerts`` (the Hive streaming seed's table), queried with Spark SQL while it fills.

Each run lands its files in a fresh directory under ``<warehouse>/_landing``; the streaming checkpoint is
kept, so a second run ingests only its own files (and ``--reset`` starts over). While the query runs, the
table is counted through Spark SQL about once a second (less often when a count takes longer): counts may
only grow and must always be a whole number of landing files (one file is one micro-batch is one
transaction), which is the visible proof that readers only ever see committed transactions.

Speed: a micro-batch costs Spark about a second whatever its size (offset and commit logs, planning, a
task's and the commit's Python worker round trips), while the sink writes 10k rows in ~0.1 s; so by default
landing files are sized by rows (:data:`ROWS_PER_FILE`) rather than counted. The counting queries run in
their own fair-scheduler pool, so a micro-batch's task takes the next free core instead of queueing behind
all of a query's tasks, and the next query waits at least as long as the last one took: however big the
table grows, the queries never hold the cores more than about half of the time.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from acidstream.errors import TransactionError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from acidstream.catalog import Metastore

TABLE = "testing.alerts"
#: Default landing file size: micro-batches big enough that Spark's per-batch cost does not dominate.
ROWS_PER_FILE = 50_000
#: Fair-scheduler pools (``spark.scheduler.mode=FAIR``, set by :func:`quiet_session`).
INGEST_POOL = "acidstream-ingest"
QUERY_POOL = "acidstream-queries"
POOL_PROPERTY = "spark.scheduler.pool"
PLACES = [
    ("Asia", "India"),
    ("Asia", "China"),
    ("Asia", "Japan"),
    ("Europe", "Germany"),
    ("Europe", "France"),
    ("Europe", "Spain"),
    ("America", "Peru"),
    ("America", "Canada"),
    ("Africa", "Kenya"),
    ("Oceania", "Fiji"),
]
CREATE_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (id int, msg string) PARTITIONED BY (continent string, country string) "
    "CLUSTERED BY (id) INTO 5 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
)


@dataclass(frozen=True)
class JobConfig:
    rows: int
    files: int
    warehouse: str
    metastore: str
    reset: bool = False
    query_interval: float = 1.0


@dataclass
class JobReport:
    rows: int
    seconds: float
    transactions: int
    table_rows: int
    partitions: int
    files: int
    queries: int
    counts: list[int] = field(default_factory=list)

    @property
    def records_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


def default_files(rows: int) -> int:
    """Landing files for ``rows`` rows when not given: one per :data:`ROWS_PER_FILE` rows."""
    return max(1, -(-rows // ROWS_PER_FILE))


def quiet_session(app_name: str, log_file: str | None = None) -> SparkSession:
    """The project's local session with the acidstream format registered (JVM stderr to ``log_file``).

    Fair scheduling lets the ingest and the queries share the cores (a running session keeps its mode).
    """
    from acidstream.spark import register, session

    return register(session(app_name, log_file=log_file, extra_conf={"spark.scheduler.mode": "FAIR"}))


def land_files(landing: str, rows: int, files: int, first_id: int) -> list[int]:
    """Write ``files`` CSV files (``id,msg,continent,country``) into a new run directory; their row counts."""
    run_dir = os.path.join(landing, f"run-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}")
    os.makedirs(run_dir)
    per_file = -(-rows // files)
    sizes = []
    next_id = first_id
    for f in range(files):
        n = max(0, min(per_file, first_id + rows - next_id))
        if n == 0:
            break
        lines = [
            f"{i},alert {i},{PLACES[i % len(PLACES)][0]},{PLACES[i % len(PLACES)][1]}\n"
            for i in range(next_id, next_id + n)
        ]
        tmp = os.path.join(run_dir, f".part-{f:05d}.csv.tmp")  # hidden until complete
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.writelines(lines)
        os.rename(tmp, os.path.join(run_dir, f"part-{f:05d}.csv"))
        sizes.append(n)
        next_id += n
    return sizes


def whole_files(count: int, sizes: list[int]) -> bool:
    """Is ``count`` the row total of some prefix-size multiset of files? (all equal but the last)"""
    full, last = sizes[0], sizes[-1]
    return count % full == 0 or (count >= last and (count - last) % full == 0)


def prepare(cfg: JobConfig) -> Metastore:
    from acidstream.catalog import Metastore

    ms = Metastore.connect(cfg.metastore, warehouse=cfg.warehouse)
    if cfg.reset:
        if any(t == "alerts" for t in _tables(ms)):
            ms.execute(f"DROP TABLE {TABLE}")  # and its files, as Hive drops a managed table
        for sub in ("_landing", "_checkpoints"):
            shutil.rmtree(os.path.join(cfg.warehouse, sub), ignore_errors=True)
    ms.execute("CREATE DATABASE IF NOT EXISTS testing")
    ms.execute(CREATE_TABLE)
    return ms


def _tables(ms: Metastore) -> list[str]:
    return ms.list_tables("testing") if "testing" in ms.list_databases() else []


def count_committed(spark: SparkSession, cfg: JobConfig) -> int:
    """One Spark SQL query; the view is rebuilt so the query plans its own snapshot.

    The view reads only ``id`` (a Python source gets no column pruning from Spark, and ``count(*)`` needs no
    column): which rows are visible does not depend on the columns read.
    """
    spark.read.format("acidstream").option("metastore", cfg.metastore).option(
        "warehouse", cfg.warehouse
    ).option("columns", "id").load(TABLE).createOrReplaceTempView("alerts")
    return int(spark.sql("SELECT count(*) AS n FROM alerts").collect()[0]["n"])


def _in_pool(spark: SparkSession, pool: str | None) -> None:
    """Jobs of this thread (and of threads it starts, e.g. a streaming query's) go to ``pool``."""
    spark.sparkContext.setLocalProperty(POOL_PROPERTY, pool)  # type: ignore[arg-type]  # None unsets


def run(cfg: JobConfig, spark: SparkSession, on_progress: Callable[[int], None]) -> JobReport:
    """Land, stream and watch; ``on_progress(rows visible so far in this run)`` after every query."""
    ms = prepare(cfg)
    pool_before = spark.sparkContext.getLocalProperty(POOL_PROPERTY)
    try:
        return _run(cfg, spark, ms, on_progress)
    finally:
        _in_pool(spark, pool_before)


def _run(cfg: JobConfig, spark: SparkSession, ms: Metastore, on_progress: Callable[[int], None]) -> JobReport:
    baseline = ms.table(TABLE).scan(columns=["id"]).count()
    write_ids_before = ms.get_valid_write_ids(TABLE).high_watermark
    landing = os.path.join(cfg.warehouse, "_landing")
    sizes = land_files(landing, cfg.rows, cfg.files, first_id=baseline)
    source = (
        spark.readStream.format("csv")
        .schema("id int, msg string, continent string, country string")
        .option("maxFilesPerTrigger", 1)
        .load(os.path.join(landing, "*"))
    )
    started = time.monotonic()
    _in_pool(spark, INGEST_POOL)  # the streaming query's thread inherits the pool
    query = (
        source.writeStream.format("acidstream")
        .queryName("alerts_ingest")
        .option("metastore", cfg.metastore)
        .option("warehouse", cfg.warehouse)
        .option("checkpointLocation", os.path.join(cfg.warehouse, "_checkpoints", TABLE))
        .trigger(availableNow=True)
        .start(TABLE)
    )
    _in_pool(spark, QUERY_POOL)
    counts: list[int] = []
    while query.isActive:
        asked = time.monotonic()
        counts.append(count_committed(spark, cfg))
        check_count(counts, baseline, sizes)
        on_progress(counts[-1] - baseline)
        # the next query waits at least as long as this one took: queries hold the cores half the time at most
        pause = max(cfg.query_interval, time.monotonic() - asked)
        query.awaitTermination(pause)  # type: ignore[arg-type]  # float seconds work (int(t * 1000))
    query.awaitTermination()
    seconds = time.monotonic() - started
    counts.append(count_committed(spark, cfg))
    check_count(counts, baseline, sizes)
    on_progress(counts[-1] - baseline)
    if counts[-1] != baseline + sum(sizes):
        raise TransactionError(f"ingest ended with {counts[-1] - baseline} new rows, expected {sum(sizes)}")
    table = ms.table(TABLE)
    return JobReport(
        rows=sum(sizes),
        seconds=seconds,
        transactions=ms.get_valid_write_ids(TABLE).high_watermark - write_ids_before,
        table_rows=counts[-1],
        partitions=len(ms.list_partitions(TABLE)),
        files=sum(1 for _, _, names in os.walk(table.location) for n in names if n.startswith("bucket_")),
        queries=len(counts),
        counts=counts,
    )


def check_count(counts: list[int], baseline: int, sizes: list[int]) -> None:
    """Readers see only committed micro-batches: counts never shrink and are whole files' worth of rows."""
    new = counts[-1] - baseline
    if len(counts) > 1 and counts[-1] < counts[-2]:
        raise TransactionError(f"row count went down from {counts[-2]} to {counts[-1]}")
    if new < 0 or (new and not whole_files(new, sizes)):
        raise TransactionError(f"{new} new rows visible: not a whole number of committed files {sizes}")
