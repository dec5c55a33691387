"""The end-to-end pipeline behind ``acidstream main-job``: landing CSV files → Spark Structured Streaming →
the demo table ``testing.alerts``, queried with Spark SQL while it fills.

Each run lands its files in a directory of its own under the landing directory (:func:`landing_directory`:
``<warehouse>/_landing`` unless told otherwise), beside its streaming checkpoint and a manifest of what it holds
(:class:`LandedRun`); its stream reads that directory only. The landing directory is a local one (on a cluster,
one every node mounts at the same path) or on HDFS, reached through :mod:`acidstream.storage` by the driver and
through Hadoop's own filesystems by Spark (its file source and checkpoint), never on an object store: Spark's
checkpoint and the run directories' hand-offs below rely on atomic renames, which an object store lacks. Once all
of a run's files are committed the directory goes, checkpoint and all. A run stopped before that (a signal, a
crash) leaves it, and the next run resumes it instead of landing new files: Spark's checkpoint replays the
micro-batch that was under way, and the sink's commit record in the table (one sink for every run) skips it if
it was committed already, so each file is committed exactly once. A new run's ids follow the table's highest,
so ids stay unique across runs (and ``--reset`` starts over).

One landing file is one micro-batch is one transaction, and file ``f`` holds the ids ``first + f * per_file
...``, so a Spark SQL query that groups the visible ids by file sees, for each transaction, either all of its
rows or none: that is what :class:`SnapshotWatcher` checks on every query it runs while the ingest goes on.

Sizing: the first micro-batch starts Spark's Python workers (seconds); each later one costs Spark a few tenths
of a second beyond the sink's writing (offset and commit logs, planning, Python worker round trips), and the
queries share the cores. The defaults (:data:`DEFAULT_ROWS` in files of :data:`ROWS_PER_FILE`) make 40
transactions in about half a minute on two cores, so the queries see many snapshots mid-ingest; fewer, bigger
files raise the records/s towards the sink's own rate (docs/benchmarks.md) and leave fewer snapshots to see.
The queries run in their own fair-scheduler pool, so a micro-batch's task takes the next free core instead of
queueing behind all of a query's tasks, and the next query waits at least as long as the last one took: the
queries never hold the cores more than about half of the time.

Meanwhile :class:`TableCompactor` keeps the table compacted, as a compactor daemon would: every
:data:`COMPACT_INTERVAL` seconds one pass of the initiator (Hive's thresholds: more than 10 deltas in a
partition asks for a compaction), the workers and the cleaner, and one more pass after the ingest. The queries
keep checking whole transactions while compactions replace the files under them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import posixpath
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from acidstream.compactor import CompactorConfig, CompactorDaemon, Summary
from acidstream.errors import AcidStreamError, StorageLocationError, TransactionError
from acidstream.spark.options import HIVE_CONF
from acidstream.spark.read import reader_agent_info
from acidstream.storage import (
    delete_locations,
    is_object_store,
    local_path,
    make_directories,
    table_filesystem,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from acidstream.catalog import Metastore

log = logging.getLogger(__name__)

TABLE = "testing.alerts"
#: Tags this process's queries' reader registrations, which the job ends once its queries are over.
READER_TAG = f"main-job-{uuid.uuid4().hex[:12]}"
#: Rows a run lands and ingests unless told otherwise.
DEFAULT_ROWS = 1_000_000
#: Default landing file size (rows of one micro-batch and transaction).
ROWS_PER_FILE = 25_000
#: Seconds between two looks at the metastore for the progress shown.
PROGRESS_POLL = 0.2
#: Seconds between two compactor passes while the job streams.
COMPACT_INTERVAL = 5.0
#: Hive's thresholds; what a compaction replaced goes as soon as no registered reader needs it (the job's
#: readers, its Spark SQL queries included, all register their snapshots: no retention delay is needed).
COMPACTOR_CONFIG = CompactorConfig(retention=0.0)
#: Fair-scheduler pools (``spark.scheduler.mode=FAIR``, set by ``spark.shell.command_session``).
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
    query_interval: float = 0.5
    #: ``Metastore.connect``'s options for a Hive Metastore (Kerberos, TLS: ``[hive]``), as sorted pairs; not in
    #: the repr (a delegation token is a secret)
    hive: tuple[tuple[str, Any], ...] = field(default=(), repr=False)
    #: where the runs' landing files and checkpoints go (:func:`landing_directory`); empty: the default
    landing: str = ""

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings that carry the job's metastore, warehouse and Hive settings to every process
        working for it (``spark.acidstream.*``, docs/spark.md): its driver then gets a delegation token for the
        executors where the Hive settings say Kerberos."""
        conf = {"spark.acidstream.metastore": self.metastore, "spark.acidstream.warehouse": self.warehouse}
        for key, value in self.hive:
            conf[HIVE_CONF + key] = str(value).lower() if isinstance(value, bool) else str(value)
        return conf


@dataclass
class JobReport:
    #: rows this job committed (a resumed run's earlier ones not included)
    rows: int
    seconds: float
    transactions: int
    table_rows: int
    partitions: int
    files: int
    #: the run's files (whole transactions) that each Spark SQL query saw, in order (the last after the ingest)
    snapshots: list[int] = field(default_factory=list)
    #: what the compactor did while the job ran (``Summary.counts()``)
    compaction: dict[str, int] = field(default_factory=dict)
    #: seconds of the first micro-batch; median seconds of the later ones and of their writing (Spark's progress)
    first_batch_seconds: float = 0.0
    batch_seconds: float = 0.0
    write_seconds: float = 0.0
    #: the run (its landing directory's name), and whether it was an unfinished one resumed
    run: str = ""
    resumed: bool = False
    #: the run's landing files: all, committed before this job, committed when it ended
    landing_files: int = 0
    files_before: int = 0
    files_committed: int = 0
    #: whether the job was stopped (``run(stop=...)``) before all of the run's files were committed
    stopped: bool = False

    @property
    def records_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    @property
    def queries(self) -> int:
        return len(self.snapshots)

    @property
    def mid_ingest_snapshots(self) -> int:
        """Distinct snapshots the queries saw with some but not all of the transactions this job committed."""
        return len({n for n in self.snapshots if self.files_before < n < self.files_committed})


#: The landing directory's name in the warehouse, where it goes unless told otherwise.
LANDING = "_landing"
#: The setting that names the landing directory, as errors name it.
LANDING_SETTING = "the landing directory (--landing, JobConfig.landing)"


def landing_directory(warehouse: str, landing: str = "") -> str:
    """Where the runs land: ``landing`` (a local path made absolute), else ``<warehouse>/_landing``.

    It must rename atomically: Spark commits its checkpoint's logs by renaming, and a run directory is hidden
    by one rename before it goes. A local disk (on a cluster, one every node mounts, so that every executor
    reads the files) and HDFS do; an object store does not (Spark's own docs warn against checkpoints there).
    So a warehouse on S3 needs a landing directory named, and one named on an object store is refused: a
    :class:`StorageLocationError` naming the setting, before anything is landed or Spark starts."""
    location = landing or _join(warehouse, LANDING)
    fs, path = table_filesystem(location)
    if not is_object_store(fs):
        return path if local_path(fs, path) is not None else location.rstrip("/")
    if landing:
        raise StorageLocationError(
            f"{LANDING_SETTING} {landing} is on an object store, where nothing renames atomically, as Spark's "
            "streaming checkpoint and the job's runs need: name a local directory every Spark node mounts, or "
            "one on HDFS"
        )
    raise StorageLocationError(
        f"the warehouse {warehouse} is on an object store, where nothing renames atomically, as Spark's "
        f"streaming checkpoint and the job's runs need: set {LANDING_SETTING} to a local directory every Spark "
        "node mounts, or one on HDFS"
    )


def _join(location: str, name: str) -> str:
    """``name`` in the directory ``location`` (a local path or a URI)."""
    return posixpath.join(location.rstrip("/") if "://" in location else location, name)


def spark_path(location: str) -> str:
    """``location`` as Spark's file source and checkpoint should read it: a local path as a ``file:`` URI (a
    cluster's default filesystem may be HDFS), a URI as it is."""
    return location if "://" in location else f"file://{location}"


def default_files(rows: int) -> int:
    """Landing files for ``rows`` rows when not given: one per :data:`ROWS_PER_FILE` rows."""
    return max(1, -(-rows // ROWS_PER_FILE))


#: A run directory's manifest (:class:`LandedRun`), written once all its files are: the run is landed.
MANIFEST = "_run.json"
#: Every run commits through this one sink: one commit record in the table properties, however many runs.
SINK_ID = "main-job"


@dataclass(frozen=True)
class LandedRun:
    """One run's landing files (``part-NNNNN.csv``, file ``f`` holding ids ``first_id + f * per_file ...``), its
    streaming checkpoint and its manifest, in one directory: they are kept and dropped together, so a stream
    over these files never starts without its checkpoint's record of what it committed."""

    #: the run's directory: a local path or a URI (:func:`landing_directory`)
    path: str
    first_id: int
    sizes: tuple[int, ...]

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    @property
    def rows(self) -> int:
        return sum(self.sizes)

    @property
    def per_file(self) -> int:
        return self.sizes[0]

    @property
    def files(self) -> str:
        """The stream's source, for Spark: the landing files only (not the manifest or the checkpoint beside
        them)."""
        return spark_path(_join(self.path, "part-*.csv"))

    @property
    def checkpoint(self) -> str:
        """The stream's checkpoint, for Spark."""
        return spark_path(_join(self.path, "_checkpoint"))

    def rows_of(self, files: set[int]) -> int:
        return sum(self.sizes[f] for f in files)


def land_files(landing: str, rows: int, files: int, first_id: int) -> LandedRun:
    """Write ``files`` CSV files (``id,msg,continent,country``) into a new run directory of the landing
    directory (:func:`landing_directory`'s), then its manifest."""
    run_dir = _join(landing, f"run-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}")
    fs, path = table_filesystem(run_dir)
    make_directories(fs, path)
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
        _write_atomically(fs, posixpath.join(path, f"part-{f:05d}.csv"), "".join(lines))
        sizes.append(n)
        next_id += n
    run = LandedRun(run_dir, first_id, tuple(sizes))
    _write_atomically(fs, posixpath.join(path, MANIFEST), json.dumps({"first_id": first_id, "sizes": sizes}))
    return run


def _write_atomically(fs: pafs.FileSystem, path: str, text: str) -> None:
    """Hidden (``.name.tmp``, which the stream's pattern does not match) until complete, then renamed."""
    tmp = posixpath.join(posixpath.dirname(path), f".{posixpath.basename(path)}.tmp")
    with fs.open_output_stream(tmp) as out:
        out.write(text.encode())
    fs.move(tmp, path)


def unfinished_run(landing: str) -> LandedRun | None:
    """The earliest landed run whose files are not all committed yet, to be resumed; directories without a
    manifest (a landing cut short, before any stream read it) and retired ones left half-removed are removed."""
    fs, root = table_filesystem(landing)
    listed = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    runs = []
    for info in sorted(listed, key=lambda i: i.base_name):
        if info.type != pafs.FileType.Directory:
            continue
        manifest = posixpath.join(info.path, MANIFEST)
        if info.base_name.startswith(".") or fs.get_file_info(manifest).type != pafs.FileType.File:
            with contextlib.suppress(FileNotFoundError):
                fs.delete_dir(info.path)
            continue
        with fs.open_input_stream(manifest) as handle:
            data = json.loads(handle.read())
        path = _join(landing, info.base_name)
        runs.append(LandedRun(path, int(data["first_id"]), tuple(int(n) for n in data["sizes"])))
    return runs[0] if runs else None


def retire(run: LandedRun) -> None:
    """Drop a run whose files are all committed: hidden first (one rename, so no later run can mistake a
    half-removed directory for one to resume), then removed."""
    fs, path = table_filesystem(run.path)
    hidden = posixpath.join(posixpath.dirname(path), f".retired-{run.name}")
    fs.move(path, hidden)
    fs.delete_dir(hidden)


def next_id(ms: Metastore) -> int:
    """The first id of a new run: above every id in the table (each earlier run's ids are all committed)."""
    import pyarrow.compute as pc

    highest = pc.max(ms.table(TABLE).scan(columns=["id"]).to_arrow().column("id")).as_py()
    return 0 if highest is None else highest + 1


def prepare(cfg: JobConfig) -> Metastore:
    from acidstream.catalog import Metastore

    ms = Metastore.connect(cfg.metastore, warehouse=cfg.warehouse, **dict(cfg.hive))
    if cfg.reset:
        if any(t == "alerts" for t in _tables(ms)):
            ms.execute(f"DROP TABLE {TABLE}")  # and its files, as Hive drops a managed table
        delete_locations([landing_directory(cfg.warehouse, cfg.landing)])  # runs and checkpoints
    ms.execute("CREATE DATABASE IF NOT EXISTS testing")
    ms.execute(CREATE_TABLE)
    return ms


def _tables(ms: Metastore) -> list[str]:
    return ms.list_tables("testing") if "testing" in ms.list_databases() else []


def visible_files(spark: SparkSession, cfg: JobConfig, first_id: int, per_file: int) -> dict[int, int]:
    """One Spark SQL query: rows visible now of each of this run's landing files (file index → rows).

    The view is rebuilt so the query plans its own snapshot; it reads only ``id`` (a Python source gets no
    column pruning from Spark), and which rows are visible does not depend on the columns read.
    """
    spark.read.format("acidstream").option("metastore", cfg.metastore).option(
        "warehouse", cfg.warehouse
    ).option("columns", "id").option("readerTag", READER_TAG).load(TABLE).createOrReplaceTempView("alerts")
    rows = spark.sql(
        f"SELECT CAST((id - {first_id}) DIV {per_file} AS INT) AS file, count(*) AS n FROM alerts "
        f"WHERE id >= {first_id} GROUP BY 1"
    ).collect()
    return {int(row["file"]): int(row["n"]) for row in rows}


def check_whole(visible: dict[int, int], sizes: Sequence[int], seen_before: set[int]) -> None:
    """A query saw whole transactions only: each file all or nothing, and nothing committed went missing."""
    partial = {f: n for f, n in visible.items() if f >= len(sizes) or n != sizes[f]}
    if partial:
        raise TransactionError(
            f"a Spark SQL query saw part of a transaction: file → rows visible {partial}, sizes {list(sizes)}"
        )
    lost = seen_before - set(visible)
    if lost:
        raise TransactionError(f"committed landing files {sorted(lost)} disappeared from a later snapshot")


def _in_pool(spark: SparkSession, pool: str | None) -> None:
    """Jobs of this thread (and of threads it starts, e.g. a streaming query's) go to ``pool``."""
    spark.sparkContext.setLocalProperty(POOL_PROPERTY, pool)  # type: ignore[arg-type]  # None unsets


class SnapshotWatcher(threading.Thread):
    """Spark SQL queries in a thread of their own while the ingest runs; each must see whole transactions.

    The next query waits at least as long as the last one took, so the queries hold the cores at most about
    half of the time however big the table grows. A failed check (or query) stops the watcher and is raised by
    :meth:`finish`.
    """

    def __init__(self, spark: SparkSession, cfg: JobConfig, first_id: int, sizes: Sequence[int]) -> None:
        super().__init__(name="acidstream-snapshot-watcher", daemon=True)
        self.spark, self.cfg, self.first_id, self.sizes = spark, cfg, first_id, sizes
        self.snapshots: list[int] = []
        #: the run's files the last query saw
        self.seen: set[int] = set()
        self._finishing = threading.Event()
        self._error: BaseException | None = None

    def observe(self) -> None:
        """One query and its checks, on the calling thread (the job's own before and after the ingest)."""
        visible = visible_files(self.spark, self.cfg, self.first_id, self.sizes[0])
        check_whole(visible, self.sizes, self.seen)
        self.seen = set(visible)
        self.snapshots.append(len(visible))

    def run(self) -> None:
        _in_pool(self.spark, QUERY_POOL)
        pause = self.cfg.query_interval
        while not self._finishing.wait(pause):
            asked = time.monotonic()
            try:
                self.observe()
            except BaseException as exc:  # raised in the job's thread by finish()
                self._error = exc
                return
            pause = max(self.cfg.query_interval, time.monotonic() - asked)

    def finish(self) -> None:
        """Stop after the query under way (if started), then raise what the watcher found wrong, if anything."""
        self._finishing.set()
        if self.ident is not None:
            self.join()
        if self._error is not None:
            raise self._error


class TableCompactor(threading.Thread):
    """Compactor passes (``CompactorDaemon.compact_once``: initiator, workers, cleaner) every
    :data:`COMPACT_INTERVAL` seconds while the ingest runs, and one more at :meth:`finish`, so the job leaves its
    table compacted.

    ``on_pass(summary)`` follows every pass that did something. A pass that fails on the metastore or the
    filesystem is logged and the next one retries, as in the compactor daemon: the ingest goes on.
    """

    def __init__(self, ms: Metastore, on_pass: Callable[[Summary], None] = lambda _: None) -> None:
        super().__init__(name="acidstream-main-job-compactor", daemon=True)
        self.ms = ms
        self.compactor = CompactorDaemon(ms, COMPACTOR_CONFIG, workers=COMPACTOR_CONFIG.parallelism)
        self._on_pass = on_pass
        self._finishing = threading.Event()

    def run(self) -> None:
        while not self._finishing.wait(COMPACT_INTERVAL):
            self.run_pass()

    def run_pass(self) -> None:
        try:
            done = self.compactor.compact_once()
        except (AcidStreamError, OSError):
            log.exception("compactor pass failed; the next one retries")
            return
        if any(done.counts().values()):
            self._on_pass(done)

    def finish(self) -> Summary:
        """Stop after the pass under way; end the registrations of the job's queries, which are over (their
        tasks would let them expire only a reader lease later, keeping the cleaner from what they replaced);
        run the last pass, which cleans up after every compaction. Returns everything the passes did."""
        self._finishing.set()
        if self.is_alive():
            self.join()
        self.ms.unregister_readers(reader_agent_info(READER_TAG))
        self.run_pass()
        return self.compactor.summary


def describe(summary: Summary) -> str:
    """A pass's or a run's compactor figures, those not zero."""
    return ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in summary.counts().items() if v) or "nothing"


def run(
    cfg: JobConfig,
    spark: SparkSession,
    on_progress: Callable[[int, int], None],
    on_compaction: Callable[[Summary], None] = lambda _: None,
    stop: threading.Event | None = None,
) -> JobReport:
    """Land (or resume an unfinished run), stream and watch; ``on_progress(rows of the run committed, rows of the
    run)`` as the sink commits, ``on_compaction(summary)`` after each compactor pass that did something. Once
    ``stop`` is set, the streaming query stops (or never starts) and the micro-batch under way is aborted: the
    report says what was committed, and the next run resumes the rest."""
    landing = landing_directory(cfg.warehouse, cfg.landing)  # refused before anything is done
    ms = prepare(cfg)
    landed = unfinished_run(landing)
    resumed = landed is not None
    if landed is None:
        landed = land_files(landing, cfg.rows, cfg.files, first_id=next_id(ms))
    pool_before = spark.sparkContext.getLocalProperty(POOL_PROPERTY)
    try:
        report = _run(
            cfg, spark, ms, landed, on_progress, TableCompactor(ms, on_compaction), stop or threading.Event()
        )
    finally:
        _in_pool(spark, pool_before)
    report.resumed = resumed
    if not report.stopped:
        retire(landed)
    return report


def _run(
    cfg: JobConfig,
    spark: SparkSession,
    ms: Metastore,
    landed: LandedRun,
    on_progress: Callable[[int, int], None],
    compactor: TableCompactor,
    stop: threading.Event,
) -> JobReport:
    write_ids_before = ms.get_valid_write_ids(TABLE).high_watermark
    watcher = SnapshotWatcher(spark, cfg, landed.first_id, landed.sizes)
    _in_pool(spark, QUERY_POOL)
    watcher.observe()  # before the ingest: the run's files committed earlier (and Spark's workers warm)
    before = set(watcher.seen)
    left = [n for f, n in enumerate(landed.sizes) if f not in before]
    committed_rows = [landed.rows_of(before) + n for n in (0, *accumulate(left))]
    on_progress(committed_rows[0], landed.rows)
    started = time.monotonic()
    query = None
    try:
        if not stop.is_set():
            query = _start_ingest(spark, cfg, landed)
            watcher.start()
            compactor.start()
        while query is not None and query.isActive and not stop.is_set():
            query.awaitTermination(PROGRESS_POLL)  # float seconds work
            done = _committed_since(ms, write_ids_before)
            on_progress(committed_rows[min(done, len(left))], landed.rows)
        if query is not None:
            if stop.is_set():
                _stop_ingest(query, ms)
            query.awaitTermination()  # raises the query's failure, if any
        seconds = time.monotonic() - started
    finally:
        try:
            if query is not None and query.isActive:  # a failure here: no micro-batch is left open
                _stop_ingest(query, ms)
            watcher.finish()
        finally:
            compaction = compactor.finish()  # also on a failure: no pass may outlive the job
    watcher.observe()  # after the ingest and the last compactor pass: every file visible, unless stopped
    after = watcher.seen
    on_progress(committed_rows[0] + landed.rows_of(after - before), landed.rows)
    complete = len(after) == len(landed.sizes)
    if not (complete or stop.is_set()):
        raise TransactionError(f"ingest ended with {len(after)} of {len(landed.sizes)} files visible")
    table = ms.table(TABLE)
    first_batch_seconds, batch_seconds, write_seconds = _batch_times(query.recentProgress if query else [])
    return JobReport(
        rows=landed.rows_of(after - before),
        seconds=seconds,
        transactions=_committed_since(ms, write_ids_before),
        table_rows=table.scan(columns=["id"]).count(),
        partitions=len(ms.list_partitions(TABLE)),
        files=bucket_files(table.location),
        snapshots=watcher.snapshots,
        compaction=compaction.counts(),
        first_batch_seconds=first_batch_seconds,
        batch_seconds=batch_seconds,
        write_seconds=write_seconds,
        run=landed.name,
        landing_files=len(landed.sizes),
        files_before=len(before),
        files_committed=len(after),
        stopped=not complete,
    )


def bucket_files(location: str) -> int:
    """The bucket files below a table's directory, on whichever store it is."""
    fs, path = table_filesystem(location)
    listed = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    return sum(1 for i in listed if i.type == pafs.FileType.File and i.base_name.startswith("bucket_"))


def _start_ingest(spark: SparkSession, cfg: JobConfig, landed: LandedRun) -> Any:
    """The run's streaming query (``availableNow``: its files, one per micro-batch, then it ends), resuming
    from the run's checkpoint if an earlier job started it; its jobs go to the ingest pool."""
    source = (
        spark.readStream.format("csv")
        .schema("id int, msg string, continent string, country string")
        .option("maxFilesPerTrigger", 1)
        .load(landed.files)
    )
    _in_pool(spark, INGEST_POOL)  # the streaming query's thread inherits the pool
    try:
        return (
            source.writeStream.format("acidstream")
            .queryName("alerts_ingest")
            .options(**_sink_options(cfg, landed))
            .trigger(availableNow=True)
            .start(TABLE)
        )
    finally:
        _in_pool(spark, QUERY_POOL)


def _sink_options(cfg: JobConfig, landed: LandedRun) -> dict[str, str]:
    """Every run commits through :data:`SINK_ID`: a run's query (new, or resumed from its checkpoint) takes the
    sink over from the previous run's, whose files are all committed (or it would be the one resumed)."""
    return {
        "metastore": cfg.metastore,
        "warehouse": cfg.warehouse,
        "checkpointLocation": landed.checkpoint,
        "sinkId": SINK_ID,
        "sinkTakeover": "true",
    }


def _stop_ingest(query: Any, ms: Metastore) -> None:
    """Stop the streaming query, then abort the transaction of the micro-batch it was writing, if any (its
    tasks elected it; with the query stopped, nobody commits it)."""
    from acidstream.spark.stream_write import abort_open_batches

    query.stop()
    aborted = abort_open_batches(ms, SINK_ID)
    if aborted:
        log.info("stopped the ingest; aborted the open micro-batch transactions %s", aborted)


def _committed_since(ms: Metastore, write_id: int) -> int:
    """Transactions committed on the table after ``write_id`` (the sink's, while the job runs)."""
    valid = ms.get_valid_write_ids(TABLE)
    return sum(1 for w in range(write_id + 1, valid.high_watermark + 1) if valid.is_write_id_valid(w))


def _batch_times(progress: Sequence[dict[str, Any]]) -> tuple[float, float, float]:
    """Seconds of the first micro-batch (it starts Spark's Python workers), and the median of the later ones
    and of their writing (``addBatch``), from Spark's query progress."""
    durations = [p["durationMs"] for p in progress if p["numInputRows"]]
    if not durations:
        return 0.0, 0.0, 0.0
    later = durations[1:] or durations
    return (
        durations[0]["triggerExecution"] / 1000,
        statistics.median(d["triggerExecution"] for d in later) / 1000,
        statistics.median(d.get("addBatch", 0) for d in later) / 1000,
    )
