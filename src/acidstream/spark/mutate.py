"""Merge, update and delete by key on Spark: one transaction, the driver's; Spark tasks write the mutations.

The driver opens the txn as the Python API does (:class:`~acidstream.mutate.merge.TableMutation`: shared-write
lock, the snapshot taken after it, heartbeats) and plans the target's scan at that snapshot. A merge then runs
one of two ways:

* **Split by bucket** (the table is bucketed on merge keys only, and unmatched target rows are left alone:
  :func:`~acidstream.mutate.bucket_merge.splits_by_bucket`): matches never cross buckets, so each Spark task
  takes some buckets (spread by file bytes), receives those buckets' source rows and reads those buckets' target
  rows itself, matching and writing with the Python merge's own code (:class:`BucketMerge`). One Spark job: a
  source Spark estimates under ``spark.sql.autoBroadcastJoinThreshold`` is collected once and shipped to the
  tasks, as Spark broadcasts a small join side; a larger one is bucketed by a Python stage and shuffled to them.
* **Join** (any other merge): Spark tasks read the target's keys and ROW__IDs bucket by bucket (for a merge
  whose source has at most ``MAX_PUSHED_KEYS`` distinct keys, collected to the driver first, only the rows those
  keys may match: the target is never shipped to Spark whole), and Spark joins them with the source. A Python
  stage turns each joined batch into mutation rows with the Python merge's code
  (:class:`~acidstream.mutate.changes.Changes`: updates keep their ROW__ID, inserts get their bucket attached).
  Spark then repartitions the mutations by (partition, bucket) and sorts each task's rows as Hive's API requires
  — partition, bucket, then ROW__ID, inserts last — and each task writes them through a
  :class:`MutatorCoordinator` built from the pickled ``AcidTable``.

Either way each writing task uses its Spark partition id as statement id and returns its ``MutationSummary``;
the driver commits with every summary. Nothing is visible until that commit: a failed job aborts the txn, and
a driver killed outright stops heartbeating, so the metastore aborts its txn after the txn timeout. Errors a
task raises on purpose (a row that would move between buckets, two source rows matching one target row) reach
the caller as the same exception classes the Python API raises. A retried task replaces its statement's files
and the driver deletes files of attempts no task reported before committing; two attempts of one statement
running at once would collide, so keep ``spark.speculation`` off (its default), as for batch writes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from acidstream.acid.codec import decode_writer_ids
from acidstream.acid.names import delete_delta_dir, delta_dir
from acidstream.acid.partitions import make_part_name, parse_part_name
from acidstream.acid.runs import runs
from acidstream.metastore.models import Table as TableDefinition
from acidstream.mutate.apply import DELETE, INSERT, OP, UPDATE, apply_mutations
from acidstream.mutate.bucket_merge import BucketMerge, splits_by_bucket, spread_buckets
from acidstream.mutate.changes import (
    PART,
    Changes,
    KnownPartitions,
    MatchedAction,
    MergeActions,
    PartitionValues,
    duplicate_match,
)
from acidstream.mutate.coordinator import MutatorCoordinator
from acidstream.mutate.merge import TableMutation
from acidstream.mutate.record_id import ROW_ID, row_id_arrays
from acidstream.mutate.table import AcidTable, MutationSummary
from acidstream.spark.errors import driver_errors, task_errors
from acidstream.spark.options import Target, client, metastore_location
from acidstream.spark.read import (
    PARTITION_NAME,
    PARTITION_NAME_OPTION,
    pack_tasks,
    read_tasks,
    selected_columns,
)
from acidstream.spark.task_write import statement_id_for
from acidstream.spark.types import schema_ddl, spark_arrow_schema, to_spark_batch
from acidstream.storage import table_filesystem

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame, SparkSession

    from acidstream.acid.types import Column
    from acidstream.acid.writeids import ValidWriteIdList
    from acidstream.read.planning import BucketTask
    from acidstream.read.scan import TableScan

#: A matched target row a merge leaves as it is: it goes through the shuffle only so that a second source row
#: matching it is found (and refused), then tasks drop it.
MATCHED = 3
#: Each mutation's bucket (decoded from its ROW__ID): with the partition name, what Spark groups by.
BUCKET = "__bucket"
#: The task a source row goes to in a merge split by bucket (:func:`bucket_tasks`).
TASK = "__task"
#: What a writing task reports: its coordinator's summary as JSON, and its attempt number.
SUMMARY_DDL = "summary string, attempt int"
_SOURCE = "__s_"
_TARGET = "__t_"
_SOURCE_PRESENT = "__s_present"
#: Up to this many distinct source keys are pushed into the target's read (:func:`source_keys`); beyond, the
#: driver would hold too much and the Spark semi-join takes over.
MAX_PUSHED_KEYS = 1_000_000
#: Rows a read task gathers before keeping those of the pushed keys: the keys are hashed once per this many.
KEY_FILTER_ROWS = 1 << 20
#: File bytes per task reading the target: one task per core unless the table is larger. A merge reads the keys
#: and ROW__IDs, a small part of each file, so tasks can cover more bytes than a read of whole rows.
READ_TASK_BYTES = 1 << 30


def merge(
    spark: SparkSession,
    table: str,
    source: DataFrame,
    on: Sequence[str],
    *,
    when_matched: MatchedAction = "update",
    when_not_matched: Literal["insert"] | None = "insert",
    when_not_matched_by_source: Literal["delete"] | None = None,
    metastore: str | None = None,
    warehouse: str | None = None,
) -> dict[str, int]:
    """Apply the DataFrame ``source`` to ``table`` (``db.table``), matching rows on the ``on`` columns, in one
    transaction; same semantics as ``Table.merge`` (matched rows updated or deleted, unmatched source rows
    inserted, unmatched target rows deleted if asked; null keys never match; a target row matched twice is an
    error). Returns ``{"inserted": n, "updated": n, "deleted": n}``.

    A table bucketed on merge keys only is merged bucket by bucket in one job, the source evaluated once
    (module docstring). Otherwise, unless unmatched target rows are deleted, only target rows the source's keys
    may match are joined: the source's distinct keys (up to :data:`MAX_PUSHED_KEYS`) are collected and the read
    keeps those rows, which are broadcast to the join; with more keys the target is semi-joined with them in
    Spark. The source is then evaluated twice (``cache()`` an expensive one)."""
    actions = MergeActions(when_matched, when_not_matched, when_not_matched_by_source)
    with _mutation(metastore, warehouse, table) as (m, location):
        changes = m.changes
        names = changes.source_columns(source.columns, on)
        keys = [k.lower() for k in on]
        target_columns = changes.target_columns(names, keys, actions)
        if splits_by_bucket(changes.table, keys, actions):
            return _merge_by_bucket(spark, m, location, source, names, keys, target_columns, actions)
        known = m.inserted_partitions(actions)
        pushed = None
        if actions.when_not_matched_by_source is None:
            pushed = source_keys(source, names, keys, changes.table)
        with m.scan(target_columns) as scan:  # registered as a reader until the tasks have read
            target = _scan_target(spark, m, location, scan, pushed)
            joined = _join(target, source, names, keys, target_columns, actions, changes.table, pushed)
            stage = MergeStage(
                changes,
                actions,
                keys,
                target_columns,
                names,
                known,
            )
            mutations = joined.mapInArrow(stage, mutation_ddl(changes.table))
            return _write(m, location, mutations, keys)


def delete(
    spark: SparkSession,
    table: str,
    condition: str | SparkColumn | None = None,
    *,
    metastore: str | None = None,
    warehouse: str | None = None,
) -> dict[str, int]:
    """Delete the rows of ``table`` matching ``condition`` (a Spark SQL string or Column over any columns,
    partition keys included, which prune partitions; None: every row) in one transaction."""
    from pyspark.sql import functions as F

    with _mutation(metastore, warehouse, table) as (m, location):
        every = [c.name for c in (*m.table.columns, *m.table.partition_keys)]
        rows = _where(_read_target(spark, m, location, every), condition)
        mutations = rows.select(
            ROW_ID, PARTITION_NAME, _bucket_of_row_id().alias(BUCKET), F.lit(DELETE).cast("tinyint").alias(OP)
        )
        return _write(m, location, mutations, [])


def update(
    spark: SparkSession,
    table: str,
    condition: str | SparkColumn | None,
    set: Mapping[str, Any],
    *,
    metastore: str | None = None,
    warehouse: str | None = None,
) -> dict[str, int]:
    """Set columns of the rows of ``table`` matching ``condition`` in one transaction. Each value is a Spark
    Column, a Spark SQL expression string over the row's columns (as Delta Lake's ``update`` takes them:
    ``"score * 2"``, ``"'text'"``), or a Python constant. Partition and bucketed columns cannot change."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    with _mutation(metastore, warehouse, table) as (m, location):
        assignments = m.changes.check_assignments(set)
        data = [c.name for c in m.table.columns]
        keys = [k.name for k in m.table.partition_keys]
        rows = _where(_read_target(spark, m, location, [*data, *keys]), condition)

        def value(v: Any) -> Column:
            if isinstance(v, Column):
                return v
            return F.expr(v) if isinstance(v, str) else F.lit(v)

        mutations = rows.select(
            ROW_ID,
            *[(value(assignments[c]) if c in assignments else F.col(c)).alias(c) for c in data],
            PARTITION_NAME,
            _bucket_of_row_id().alias(BUCKET),
            F.lit(UPDATE).cast("tinyint").alias(OP),
        )
        return _write(m, location, mutations, [])


# --- the driver --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _mutation(
    metastore: str | None, warehouse: str | None, table: str
) -> Iterator[tuple[TableMutation, dict[str, str]]]:
    """The open mutation txn and the options that find the metastore (for the data source and the tasks)."""
    location = {k: v for k, v in (("metastore", metastore), ("warehouse", warehouse)) if v is not None}
    url, wh = metastore_location(location)
    with TableMutation(client(url, wh), table) as m:
        yield m, {"metastore": url, "warehouse": wh}


def _merge_by_bucket(
    spark: SparkSession,
    m: TableMutation,
    location: dict[str, str],
    source: DataFrame,
    names: Sequence[str],
    keys: Sequence[str],
    target_columns: Sequence[str],
    actions: MergeActions,
) -> dict[str, int]:
    """A merge whose matches stay within buckets (:func:`splits_by_bucket`) as one Spark job: each task gets
    some buckets (spread over tasks by file bytes) and those buckets' source rows — shipped from the driver for
    a small source (:func:`_shipped_source`), else bucketed by a Python stage and shuffled — then merges them
    with those buckets' target rows, which it reads itself, and writes the mutations."""
    with m.scan(target_columns) as scan:  # registered as a reader until the tasks have read
        split = m.bucket_merge(scan, actions, keys, target_columns)
        task_of = bucket_tasks(
            split.bucket_bytes(), m.table.num_buckets, spark.sparkContext.defaultParallelism
        )
        tasks = max(task_of) + 1
        shipped = _shipped_source(spark, source, split, names, task_of)
        stage = BucketMergeStage(split, m.acid_table, location["metastore"], location["warehouse"], shipped)
        if shipped is not None:
            return _commit(m, spark.range(0, tasks, 1, tasks).mapInArrow(stage, SUMMARY_DDL))
        bucketed = source.mapInArrow(
            SourceBuckets(split, tuple(names), task_of), source_ddl(m.changes.table, names)
        ).repartitionById(tasks, TASK)
        return _commit(m, bucketed.mapInArrow(stage, SUMMARY_DDL))


def _shipped_source(
    spark: SparkSession, source: DataFrame, split: BucketMerge, names: Sequence[str], task_of: Sequence[int]
) -> tuple[pa.Table, ...] | None:
    """Each task's source rows (aligned, with their bucket), collected on the driver, when Spark estimates
    the source at most ``spark.sql.autoBroadcastJoinThreshold`` bytes — the size under which Spark broadcasts
    a join's side rather than shuffling both; None (shuffle the source) when larger or unknown."""
    threshold = _size_setting(spark.conf.get("spark.sql.autoBroadcastJoinThreshold") or "-1")
    estimate = _estimated_bytes(source)
    if threshold < 0 or estimate is None or estimate > threshold:
        return None
    collected = source.toArrow()
    aligned = split.changes.align_source(collected.rename_columns(list(names)), split.keys)
    buckets = split.bucket_ids(aligned)
    rows = aligned.append_column(BUCKET, pa.array(buckets, pa.int32()))
    task = np.asarray(task_of, dtype=np.int32)[buckets]
    return tuple(rows.filter(pa.array(task == t)) for t in range(max(task_of) + 1))


def _estimated_bytes(frame: DataFrame) -> int | None:
    """Spark's optimizer's estimate of ``frame``'s size (what it sizes broadcast joins by); None where the
    session does not expose it (Spark Connect)."""
    from py4j.protocol import Py4JError

    try:
        return int(str(frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    except (AttributeError, Py4JError):  # no JVM plan to ask: take the path that needs no estimate
        return None


def _size_setting(text: str) -> int:
    """A Spark byte-size setting (``10485760``, ``10MB``, ``-1``) in bytes."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    value = text.strip().lower().removesuffix("b")
    if value and value[-1] in units:
        return int(float(value[:-1]) * units[value[-1]])
    return int(value)


def bucket_tasks(sizes: Mapping[int, int], num_buckets: int, parallelism: int) -> tuple[int, ...]:
    """The task of each bucket: as many tasks as Spark has cores, or one per :data:`READ_TASK_BYTES` of the
    target's files if that is more, never more than buckets (:func:`spread_buckets`)."""
    total = sum(sizes.values())
    return spread_buckets(sizes, num_buckets, max(parallelism, -(-total // READ_TASK_BYTES)))


def source_ddl(table: TableDefinition, names: Sequence[str]) -> str:
    """The Spark schema of source rows on their way to their bucket's task: the source's columns typed as
    the table's, the bucket and the task."""
    by_name = {c.name: c for c in (*table.columns, *table.partition_keys)}
    return f"{schema_ddl([by_name[n] for n in names], False)}, `{BUCKET}` int, `{TASK}` int"


def _read_target(
    spark: SparkSession, m: TableMutation, location: dict[str, str], columns: Sequence[str]
) -> DataFrame:
    """ROW__ID, ``columns`` and the partition name of every row at the txn's snapshot, through the data
    source (whose filter push-down prunes partitions)."""
    from acidstream.spark import register

    register(spark)
    return (
        spark.read.format("acidstream")
        .options(**location)
        .option("columns", ",".join(columns))
        .option("withRowId", "true")
        .option("snapshot", str(m.valid_write_ids()))
        .option(PARTITION_NAME_OPTION, "true")
        .load(m.table.full_name)
    )


def _scan_target(
    spark: SparkSession, m: TableMutation, location: dict[str, str], scan: TableScan, keys: pa.Table | None
) -> DataFrame:
    """ROW__ID, the scan's columns and the partition name of the rows ``scan`` (planned here, at the txn's
    snapshot) sees, read by Spark tasks; with ``keys``, only rows whose key columns hold values among those.

    Tasks are a range of Spark partitions mapped to groups of bucket tasks, not the data source: its planning
    runs in Python workers of its own, which cost more than this whole read of a change set's rows."""
    plan = scan.plan_files()
    columns = tuple(selected_columns(m.table, scan.columns))
    target = Target(location["metastore"], location["warehouse"], m.table.definition())
    parallelism = spark.sparkContext.defaultParallelism
    groups = pack_tasks(plan.tasks, READ_TASK_BYTES, min_groups=parallelism) or [()]
    stage = ReadStage(target, columns, plan.write_ids, tuple(groups), keys)
    ddl = f"{schema_ddl(columns, True)}, `{PARTITION_NAME}` string"
    return spark.range(0, len(groups), 1, len(groups)).mapInArrow(stage, ddl)


def source_keys(
    source: DataFrame, names: Sequence[str], keys: Sequence[str], table: TableDefinition
) -> pa.Table | None:
    """The source's distinct non-null keys, typed as Spark types the target's columns, collected to the driver
    so that the target's read keeps only rows they may match; None when there are more than
    :data:`MAX_PUSHED_KEYS` (the target is then semi-joined with them in Spark)."""
    from pyspark.sql import functions as F

    from acidstream.spark.types import spark_ddl

    types = {c.name: c.type for c in (*table.columns, *table.partition_keys)}
    originals = dict(zip(names, source.columns, strict=True))
    frame = source.select(*[F.col(f"`{originals[k]}`").cast(spark_ddl(types[k])).alias(k) for k in keys])
    # distinct before the limit: the bound is on keys, not rows (a source of many rows per key still pushes)
    collected = frame.dropna().distinct().limit(MAX_PUSHED_KEYS + 1).toArrow()
    return None if collected.num_rows > MAX_PUSHED_KEYS else collected


def _where(rows: DataFrame, condition: str | SparkColumn | None) -> DataFrame:
    from pyspark.sql import functions as F

    if condition is None:
        return rows
    return rows.where(F.expr(condition) if isinstance(condition, str) else condition)


def _join(
    target: DataFrame,
    source: DataFrame,
    names: Sequence[str],
    keys: Sequence[str],
    target_columns: Sequence[str],
    actions: MergeActions,
    table: TableDefinition,
    pushed: pa.Table | None,
) -> DataFrame:
    """The target's rows joined with the source's on the keys (null never matches), each side's columns
    prefixed; an outer side only where an action needs its unmatched rows. ``pushed``: the source keys the
    target's read kept rows for (None: the read kept every row).

    With ``pushed``, the kept target rows are broadcast to every task: that assumes about one target row per
    key (a merge key); a key that is not unique in the target broadcasts all of its rows."""
    from pyspark.sql import functions as F

    from acidstream.spark.types import spark_ddl

    types = {c.name: c.type for c in (*table.columns, *table.partition_keys)}
    t = target.select(ROW_ID, PARTITION_NAME, *[F.col(c).alias(_TARGET + c) for c in target_columns])
    s = source.select(
        *[
            F.col(f"`{original}`").alias(_SOURCE + name)
            for original, name in zip(source.columns, names, strict=True)
        ],
        F.lit(True).alias(_SOURCE_PRESENT),
    )
    orphans = actions.when_not_matched_by_source == "delete"
    if pushed is None and not orphans:
        # only target rows some source row matches matter: a semi-join (the source is usually the small side)
        # keeps the outer join below from shuffling the whole target
        probe = s.select(*[F.col(_SOURCE + k).cast(spark_ddl(types[k])).alias(_TARGET + k) for k in keys])
        t = t.join(probe.distinct(), on=[_TARGET + k for k in keys], how="left_semi")
    condition = None
    for k in keys:
        equal = t[_TARGET + k] == s[_SOURCE + k].cast(spark_ddl(types[k]))
        condition = equal if condition is None else condition & equal
    inserts = actions.when_not_matched == "insert"
    how = {(True, True): "full", (True, False): "right", (False, True): "left", (False, False): "inner"}
    if pushed is not None:
        # the read kept only rows the source's keys may match, at most about one per key: broadcast them,
        # and the source is joined where it lies, with no shuffle
        t = F.broadcast(t)
    return t.join(s, on=condition, how=how[(inserts, orphans)])


def mutation_ddl(table: TableDefinition) -> str:
    """The Spark schema of mutation rows: ROW__ID, the data columns, partition name, bucket, operation."""
    return f"{schema_ddl(table.columns, True)}, `{PARTITION_NAME}` string, `{BUCKET}` int, `{OP}` tinyint"


def _bucket_of_row_id() -> SparkColumn:
    """``decode_writer_ids`` in Spark SQL: the bucket of a V1 bucket property; V0 holds the bucket itself."""
    from pyspark.sql import functions as F

    prop = F.col(f"{ROW_ID}.bucketid")
    return F.when(F.shiftright(prop, 29) == 1, F.shiftright(prop, 16).bitwiseAND(0xFFF)).otherwise(prop)


def _write(
    m: TableMutation, location: dict[str, str], mutations: DataFrame, keys: Sequence[str]
) -> dict[str, int]:
    """Group and order the mutations as Hive's API requires, write them in tasks, commit their summaries."""
    from pyspark.sql import functions as F

    ordered = mutations.repartition(PARTITION_NAME, BUCKET).sortWithinPartitions(
        PARTITION_NAME,
        BUCKET,
        F.col(OP) == INSERT,
        F.col(f"{ROW_ID}.writeid"),
        F.col(f"{ROW_ID}.bucketid"),
        F.col(f"{ROW_ID}.rowid"),
    )
    stage = WriteStage(m.acid_table, location["metastore"], location["warehouse"], tuple(keys))
    return _commit(m, ordered.mapInArrow(stage, SUMMARY_DDL))


def _commit(m: TableMutation, reports: DataFrame) -> dict[str, int]:
    """Run the job whose tasks report their :class:`MutationSummary` (:data:`SUMMARY_DDL`), commit them."""
    with driver_errors():
        rows = reports.collect()
    summaries = [MutationSummary.from_json(r.summary) for r in rows]
    if any(r.attempt > 0 for r in rows):
        remove_unreported(m.acid_table, summaries)
    return m.commit(summaries)


def remove_unreported(table: AcidTable, summaries: Sequence[MutationSummary]) -> None:
    """After task retries: delete files of this write id that no successful attempt reported.

    A retry replaces the files of the groups it writes (``delete_delta_if_exists``), but a killed attempt may
    have written a group its retry did not (non-deterministic input); those carry the committed write id and
    would become visible. Cost: one listing per partition.
    """
    from acidstream.spark.task_write import statement_dirs

    assert table.write_id is not None
    reported = {f for s in summaries for p in s.partitions.values() for f in p.files}
    fs, table_dir = table_filesystem(table.table.location)
    depth = len(table.table.partition_keys)
    for kind in (delta_dir, delete_delta_dir):
        for _, _, directory in statement_dirs(fs, table_dir, depth, table.write_id, kind):
            files = fs.get_file_info(pafs.FileSelector(directory))
            if not any(f.path in reported for f in files):
                fs.delete_dir(directory)
                continue
            for f in files:
                if f.path not in reported:
                    fs.delete_file(f.path)


# --- the tasks ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceBuckets:
    """Source batches in, the same rows typed as the table's columns with their bucket and task out (a
    ``mapInArrow`` function)."""

    split: BucketMerge
    names: tuple[str, ...]
    task_of: tuple[int, ...]

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        changes = self.split.changes
        by_name = {c.name: c for c in (*changes.table.columns, *changes.table.partition_keys)}
        schema = spark_arrow_schema([by_name[n] for n in self.names], False)
        task_of = np.array(self.task_of, dtype=np.int32)
        with task_errors():
            for batch in batches:
                if not batch.num_rows:
                    continue
                aligned = changes.align_source(
                    pa.Table.from_batches([batch]).rename_columns(list(self.names)), self.split.keys
                )
                buckets = self.split.bucket_ids(aligned)
                rows = to_spark_batch(aligned.combine_chunks().to_batches()[0], schema)
                yield rows.append_column(BUCKET, pa.array(buckets, pa.int32())).append_column(
                    TASK, pa.array(task_of[buckets], pa.int32())
                )


@dataclass(frozen=True)
class BucketMergeStage:
    """The source rows of this task's buckets in, the task's ``MutationSummary`` out (a ``mapInArrow``
    function): its buckets merged by :class:`BucketMerge` through one coordinator, the task's.

    The rows come shuffled by :class:`SourceBuckets`, or, when the driver ships them (``shipped``: each task's
    rows, aligned, with :data:`BUCKET`), the input is the task's number (a row of ``spark.range``)."""

    split: BucketMerge
    table: AcidTable
    url: str
    warehouse: str
    shipped: tuple[pa.Table, ...] | None = None

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition, attempt = _task_attempt()
        with task_errors():
            if self.shipped is None:
                received = [b for b in batches if b.num_rows]
                if not received:
                    return
                rows = pa.Table.from_batches(received)
                buckets = rows.column(BUCKET)
                source = self.split.changes.align_source(rows.drop_columns([BUCKET, TASK]), self.split.keys)
            else:
                mine = [self.shipped[i] for b in batches for i in b.column(0).to_pylist()]
                rows = pa.concat_tables(mine) if mine else None
                if rows is None or not rows.num_rows:
                    return
                buckets, source = rows.column(BUCKET), rows.drop_columns([BUCKET])
            coordinator = MutatorCoordinator(
                self.table,
                metastore=client(self.url, self.warehouse),
                statement_id=statement_id_for(partition),
                delete_delta_if_exists=attempt > 0,
            )
            try:
                self.split.write_buckets(coordinator, source, buckets.to_numpy())
                summary = coordinator.close()
            except BaseException:
                coordinator.abort()
                raise
        yield _report(summary, attempt)


@dataclass(frozen=True)
class ReadStage:
    """Spark partition ``i`` in (a row of ``spark.range``), the rows of ``groups[i]``'s bucket tasks out (a
    ``mapInArrow`` function); with ``keys``, only rows whose key columns hold values among those."""

    target: Target
    columns: tuple[Column, ...]
    write_ids: ValidWriteIdList
    groups: tuple[tuple[BucketTask, ...], ...]
    keys: pa.Table | None
    batch_rows: int = 65536

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with task_errors():
            for batch in batches:
                for i in batch.column(0).to_pylist():
                    rows = read_tasks(
                        self.target, self.groups[i], self.write_ids, self.columns, True, self.batch_rows, True
                    )
                    yield from rows if self.keys is None else keep_keys(rows, self.keys)


def keep_keys(
    batches: Iterable[pa.RecordBatch], keys: pa.Table, gather_rows: int = KEY_FILTER_ROWS
) -> Iterator[pa.RecordBatch]:
    """The rows whose every key column holds one of ``keys``' values in that column (a superset of the rows a
    join on those keys matches; null never matches). Batches are gathered up to ``gather_rows`` rows and
    filtered together: hashing the keys costs more than probing one small batch."""
    values = {name: keys.column(name).combine_chunks() for name in keys.column_names}

    def kept(gathered: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = pa.Table.from_batches(gathered)
        mask = None
        for name, value_set in values.items():
            hit = pc.is_in(rows.column(name), value_set=value_set, skip_nulls=True)
            mask = hit if mask is None else pc.and_(mask, hit)
        yield from rows.filter(mask).combine_chunks().to_batches()

    gathered: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        gathered.append(batch)
        size += batch.num_rows
        if size >= gather_rows:
            yield from kept(gathered)
            gathered, size = [], 0
    if gathered:
        yield from kept(gathered)


@dataclass(frozen=True)
class MergeStage:
    """Joined batches in, mutation rows out (a ``mapInArrow`` function): the Python merge's code per batch."""

    changes: Changes
    actions: MergeActions
    keys: Sequence[str]
    target_columns: Sequence[str]
    source_columns: Sequence[str]
    known: KnownPartitions

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = self.changes.table
        schema = spark_arrow_schema(table.columns, True)
        with task_errors():
            for batch in batches:
                if batch.num_rows:
                    yield from self.mutations(batch, schema)

    def mutations(self, batch: pa.RecordBatch, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        t_present = pc.is_valid(batch.column(ROW_ID)).to_numpy(zero_copy_only=False)
        s_present = pc.is_valid(batch.column(_SOURCE_PRESENT)).to_numpy(zero_copy_only=False)
        rows = pa.Table.from_batches([batch])
        target_rows = rows.filter(pa.array(t_present))
        codes, parts = _partition_codes(target_rows.column(PARTITION_NAME), self.changes.table)
        target = pa.table(
            {
                ROW_ID: target_rows.column(ROW_ID),
                **{c: target_rows.column(_TARGET + c) for c in self.target_columns},
                PART: codes,
            }
        )
        source_rows = rows.filter(pa.array(s_present))
        source = self.changes.align_source(
            pa.table({c: source_rows.column(_SOURCE + c) for c in self.source_columns}), self.keys
        )
        matched = t_present & s_present
        t_idx = (np.cumsum(t_present) - 1)[matched]
        s_idx = (np.cumsum(s_present) - 1)[matched]
        pieces = self.changes.merge(target, parts, source, t_idx, s_idx, self.actions, lambda: self.known)
        if self.actions.when_matched is None and len(t_idx):
            pieces.append(self.changes.marked(target.take(pa.array(t_idx)), MATCHED))
        if pieces:
            yield _spark_mutations(
                pa.concat_tables([p.cast(pieces[0].schema) for p in pieces]),
                parts,
                self.changes.table,
                schema,
            )


def _partition_codes(
    names: pa.ChunkedArray, table: TableDefinition
) -> tuple[pa.Array, list[PartitionValues]]:
    """Partition names as codes into the list of their values (as ``TableMutation.read_target`` gives them)."""
    encoded = pc.dictionary_encode(names.combine_chunks())
    parts: list[PartitionValues] = [
        tuple(parse_part_name(name).values()) if table.partition_keys else ()
        for name in encoded.dictionary.to_pylist()
    ]
    return encoded.indices.cast(pa.int32()), parts


def _spark_mutations(
    mutations: pa.Table, parts: list[PartitionValues], table: TableDefinition, data_schema: pa.Schema
) -> pa.RecordBatch:
    """Mutation rows (``__part`` codes into ``parts``) as the Spark rows of :func:`mutation_ddl`."""
    keys = [k.name for k in table.partition_keys]
    names = pa.array([make_part_name(keys, p) if keys else "" for p in parts], pa.string())
    data = to_spark_batch(
        pa.RecordBatch.from_arrays(
            [mutations.column(n).combine_chunks() for n in data_schema.names], names=data_schema.names
        ),
        data_schema,
    )
    _, props, _, _ = row_id_arrays(mutations.column(ROW_ID))
    extra = [(PARTITION_NAME, pa.string()), (BUCKET, pa.int32()), (OP, pa.int8())]
    return pa.RecordBatch.from_arrays(
        [
            *data.columns,
            names.take(mutations.column(PART).combine_chunks()),
            pa.array(decode_writer_ids(props), pa.int32()),
            mutations.column(OP).combine_chunks(),
        ],
        schema=pa.schema([*data_schema, *(pa.field(n, t) for n, t in extra)]),
    )


@dataclass(frozen=True)
class WriteStage:
    """Ordered mutation rows in, this task's ``MutationSummary`` out (a ``mapInArrow`` function)."""

    table: AcidTable
    url: str
    warehouse: str
    keys: tuple[str, ...]

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition, attempt = _task_attempt()
        with task_errors():
            summary = write_mutations(
                self.table,
                client(self.url, self.warehouse),
                statement_id_for(partition),
                attempt,
                batches,
                self.keys,
            )
        if summary is not None:
            yield _report(summary, attempt)


def _task_attempt() -> tuple[int, int]:
    """(Spark partition id, attempt number) of the running task; (0, 0) outside one."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return (context.partitionId(), context.attemptNumber()) if context is not None else (0, 0)


def _report(summary: MutationSummary, attempt: int) -> pa.RecordBatch:
    """A writing task's one row of :data:`SUMMARY_DDL`."""
    return pa.RecordBatch.from_pydict(
        {"summary": [summary.to_json()], "attempt": pa.array([attempt], pa.int32())}
    )


def write_mutations(
    table: AcidTable,
    metastore: Any,
    statement_id: int,
    attempt: int,
    batches: Iterable[pa.RecordBatch],
    keys: Sequence[str] = (),
) -> MutationSummary | None:
    """Write ordered mutation rows (:func:`mutation_ddl`) through one coordinator; None if there were none.

    Two mutations of one ROW__ID (adjacent, being sorted) mean two source rows matched one target row: refused,
    naming the row by ``keys``. A retry (``attempt > 0``) replaces what an earlier attempt of the statement
    left.
    """
    coordinator: MutatorCoordinator | None = None
    last: tuple[str, int, int, int] | None = None
    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            if coordinator is None:
                coordinator = MutatorCoordinator(
                    table, metastore=metastore, statement_id=statement_id, delete_delta_if_exists=attempt > 0
                )
            last = _check_single_match(batch, last, keys, table.table)
            ops = batch.column(OP).to_numpy(zero_copy_only=False)
            if (ops == MATCHED).any():
                batch = batch.filter(pa.array(ops != MATCHED))
            names = batch.column(PARTITION_NAME)
            encoded = pc.dictionary_encode(names)
            codes = encoded.indices.to_numpy(zero_copy_only=False)
            data = pa.Table.from_batches([batch.drop_columns([PARTITION_NAME, BUCKET])])
            for start, end in runs(codes):
                name = encoded.dictionary[int(codes[start])].as_py()
                values = tuple(parse_part_name(name).values()) if table.table.partition_keys else ()
                apply_mutations(coordinator, values, data.slice(start, end - start), presorted=True)
        return coordinator.close() if coordinator is not None else None
    except BaseException:
        if coordinator is not None:
            coordinator.abort()
        raise


def _check_single_match(
    batch: pa.RecordBatch,
    last: tuple[str, int, int, int] | None,
    keys: Sequence[str],
    table: TableDefinition,
) -> tuple[str, int, int, int] | None:
    """Refuse a ROW__ID that comes twice among updates and deletes (sorted: twice means adjacent); returns
    the batch's last (partition, ROW__ID) for the next batch."""
    ops = batch.column(OP).to_numpy(zero_copy_only=False)
    positions = np.flatnonzero(ops != INSERT)
    if not len(positions):
        return last
    sub = batch.take(pa.array(positions))
    write_ids, props, row_ids, _ = row_id_arrays(sub.column(ROW_ID))
    names = sub.column(PARTITION_NAME)
    codes = pc.dictionary_encode(names).indices.to_numpy(zero_copy_only=False)
    same = (np.diff(write_ids) == 0) & (np.diff(props) == 0) & (np.diff(row_ids) == 0) & (np.diff(codes) == 0)
    first = (names[0].as_py(), int(write_ids[0]), int(props[0]), int(row_ids[0]))
    if last is not None and first == last:
        raise duplicate_match("two source rows", _key_of(sub, 0, keys, table))
    if same.any():
        raise duplicate_match("two source rows", _key_of(sub, int(np.argmax(same)) + 1, keys, table))
    return (names[-1].as_py(), int(write_ids[-1]), int(props[-1]), int(row_ids[-1]))


def _key_of(rows: pa.RecordBatch, i: int, keys: Sequence[str], table: TableDefinition) -> dict[str, Any]:
    """The merge keys of row ``i``: data columns from the row, partition keys from its partition name."""
    partition = parse_part_name(rows.column(PARTITION_NAME)[i].as_py()) if table.partition_keys else {}
    return {k: rows.column(k)[i].as_py() if k in rows.schema.names else partition.get(k) for k in keys}
