"""Bulk Spark reads of a resolved ACID snapshot through Spark's JVM ORC reader: no row passes through Python.

The driver has already chosen the files (``acidstream.read.planning``); here they become one DataFrame:
insert events from every insert-side file, kept when their ``currentTransaction`` is valid in the snapshot,
minus the rows hit by a valid delete event (left anti-join on ``originalTransaction, bucket, rowId``; see
docs/format.md, Reading a snapshot), flattened to ``row.*`` plus partition columns and an optional
``ROW__ID``.

Files are read with Spark's Hive ORC implementation (named by class, so the session's ``spark.sql.orc.impl``
does not matter): the native one mis-maps column ids of files with the ACID event schema.
That implementation prunes top-level event columns but decodes the whole ``row`` struct; it also reads a
file's physical length, so files of still-open streaming batches (logical length from a side file) must go
through the Python reader instead (``EventFile.open_batch``; ``read_plan`` refuses them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from acidstream.acid.types import Column
from acidstream.acid.writeids import ValidWriteIdList
from acidstream.read.bucket_read import ROW_ID
from acidstream.read.planning import ScanPlan
from acidstream.spark.types import schema_ddl, spark_ddl

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Spark's Hive ORC file format (``spark.sql.orc.impl=hive``), the one that reads ACID event files correctly.
HIVE_ORC_FORMAT = "org.apache.spark.sql.hive.orc.OrcFileFormat"
#: Up to this many invalid write ids are checked with ``NOT IN`` (a hash set once Catalyst converts it to
#: ``InSet``); beyond it, a broadcast anti-join keeps the plan small.
INLINE_EXCEPTION_LIMIT = 10_000

_KEY = ["originalTransaction", "bucket", "rowId"]
_PART = "__acidstream_partition"


@dataclass(frozen=True)
class EventFile:
    """One ORC event file of the snapshot.

    ``partition_values`` are the partition directory's values as strings (None for Hive's default
    partition), in ``SnapshotPlan.partition_keys`` order. ``open_batch`` marks a file whose readable length
    comes from a side file: the JVM reader cannot honour it.
    """

    path: str
    logical_length: int
    bucket_id: int
    partition_values: tuple[str | None, ...] = ()
    is_delete: bool = False
    open_batch: bool = False


@dataclass(frozen=True)
class SnapshotPlan:
    """What the driver resolved: table shape, the snapshot and the current insert and delete event files."""

    columns: tuple[Column, ...]
    partition_keys: tuple[Column, ...]
    valid_write_ids: ValidWriteIdList
    insert_files: tuple[EventFile, ...]
    delete_files: tuple[EventFile, ...]

    @classmethod
    def from_scan_plan(cls, plan: ScanPlan) -> SnapshotPlan:
        """The files of a planner's per-bucket tasks (a delete file shared by tasks is read once)."""
        inserts: list[EventFile] = []
        deletes: dict[str, EventFile] = {}
        for task in plan.tasks:
            for piece in task.insert_files:
                if piece.original:
                    raise ValueError(
                        f"{piece.path} is an original (non-ACID) file: its synthetic ROW__IDs need row positions, "
                        "read it through the Python reader"
                    )
                inserts.append(
                    EventFile(
                        piece.path,
                        piece.length,
                        piece.bucket_id,
                        task.partition_values,
                        False,
                        piece.open_batch,
                    )
                )
            for piece in task.delete_files:
                deletes[piece.path] = EventFile(
                    piece.path, piece.length, piece.bucket_id, task.partition_values, True, piece.open_batch
                )
        return cls(plan.columns, plan.partition_keys, plan.write_ids, tuple(inserts), tuple(deletes.values()))


def read_plan(
    spark: SparkSession,
    plan: SnapshotPlan | ScanPlan,
    *,
    columns: Sequence[str] | None = None,
    with_row_id: bool = False,
) -> DataFrame:
    """The snapshot's rows: ``columns`` (data or partition column names, default all data columns then the
    partition keys) in that order, preceded by ``ROW__ID struct<writeid,bucketid,rowid>`` if asked.

    Files are scanned once per partition directory and unioned, so partition values are literals (no
    per-row file-name lookup); the anti-join key carries a partition index because ROW__IDs repeat across
    partitions (same write id, bucket and per-file row counter).
    """
    if isinstance(plan, ScanPlan):
        plan = SnapshotPlan.from_scan_plan(plan)
    still_open = [f.path for f in (*plan.insert_files, *plan.delete_files) if f.open_batch]
    if still_open:
        raise ValueError(
            f"files of open streaming batches cannot be read by Spark's ORC reader: {still_open}"
        )
    wanted = _output_columns(plan, columns)
    # One index per partition for both sides of the anti-join, whatever subset of partitions each side has.
    every = dict.fromkeys(f.partition_values for f in (*plan.insert_files, *plan.delete_files))
    partitions = {values: i for i, values in enumerate(every)}
    inserts = _scan_groups(spark, plan, plan.insert_files, partitions)
    if inserts is None:
        return spark.createDataFrame([], schema_ddl(wanted, with_row_id))
    rows = valid_write_id_filter(inserts, "currentTransaction", plan.valid_write_ids)
    deletes = _scan_groups(spark, plan, plan.delete_files, partitions)
    if deletes is not None:
        deletes = valid_write_id_filter(deletes, "currentTransaction", plan.valid_write_ids)
        rows = rows.join(deletes.select(_PART, *_KEY), on=[_PART, *_KEY], how="left_anti")
    data_names = {c.name for c in plan.columns}
    flat = [
        (F.col(f"row.`{c.name}`") if c.name in data_names else F.col(f"`{c.name}`")).alias(c.name)
        for c in wanted
    ]
    if with_row_id:
        row_id = F.struct(
            F.col("originalTransaction").alias("writeid"),
            F.col("bucket").alias("bucketid"),
            F.col("rowId").alias("rowid"),
        ).alias(ROW_ID)
        flat.insert(0, row_id)
    return rows.select(*flat)


def valid_write_id_filter(
    frame: DataFrame, column: str, write_ids: ValidWriteIdList, *, inline_limit: int = INLINE_EXCEPTION_LIMIT
) -> DataFrame:
    """Rows whose write id ``column`` is valid: at most the high-water mark and not open or aborted."""
    write_id = F.col(column)
    below = frame.where(write_id <= F.lit(write_ids.high_watermark))
    invalid = write_ids.invalid_write_ids()
    if not invalid:
        return below
    if len(invalid) <= inline_limit:
        return below.where(~write_id.isin(list(invalid)))
    excluded = frame.sparkSession.createDataFrame([(w,) for w in invalid], f"`{column}` bigint")
    return below.join(F.broadcast(excluded), on=column, how="left_anti")


def _output_columns(plan: SnapshotPlan, names: Sequence[str] | None) -> list[Column]:
    every = [*plan.columns, *plan.partition_keys]
    if names is None:
        return every
    by_name = {c.name: c for c in every}
    unknown = [n for n in names if n.lower() not in by_name]
    if unknown:
        raise ValueError(f"unknown columns {unknown}; the table has {[c.name for c in every]}")
    return [by_name[n.lower()] for n in names]


def _scan_groups(
    spark: SparkSession,
    plan: SnapshotPlan,
    files: Sequence[EventFile],
    partitions: dict[tuple[str | None, ...], int],
) -> DataFrame | None:
    """Event rows of ``files`` plus the partition columns and index (``partitions``), one scan per partition."""
    groups: dict[tuple[str | None, ...], list[str]] = defaultdict(list)
    for event_file in files:
        if event_file.logical_length > 0:
            groups[event_file.partition_values].append(event_file.path)
    event_ddl = _event_ddl(plan.columns)
    frames = []
    for values, paths in groups.items():
        if len(values) != len(plan.partition_keys):
            raise ValueError(f"{paths[0]}: {len(values)} partition values for keys {plan.partition_keys}")
        literals = [
            F.lit(value).cast(spark_ddl(key.type)).alias(key.name)
            for key, value in zip(plan.partition_keys, values, strict=True)
        ]
        scan = spark.read.format(HIVE_ORC_FORMAT).schema(event_ddl).load(paths)
        frames.append(scan.select("*", *literals, F.lit(partitions[values]).alias(_PART)))
    if not frames:
        return None
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionAll(frame)
    return union


def _event_ddl(columns: Sequence[Column]) -> str:
    row = ",".join(f"`{c.name}`:{spark_ddl(c.type)}" for c in columns)
    return (
        "operation int, originalTransaction bigint, bucket int, rowId bigint, currentTransaction bigint, "
        f"row struct<{row}>"
    )
