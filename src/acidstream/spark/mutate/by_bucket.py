"""A merge split by bucket as one Spark job (package docstring): which task takes which buckets, and how the
source reaches them — collected and shipped when Spark would broadcast it, else bucketed and shuffled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from acidstream.mutate.bucket_merge import BucketMerge, spread_buckets
from acidstream.mutate.changes import MergeActions
from acidstream.mutate.merge import TableMutation
from acidstream.spark.mutate.join import READ_TASK_BYTES
from acidstream.spark.mutate.stages import (
    BUCKET,
    SUMMARY_DDL,
    TASK,
    BucketMergeStage,
    SourceBuckets,
    source_ddl,
)
from acidstream.spark.options import JobSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from acidstream.read.scan import TableScan


def merge_by_bucket(
    spark: SparkSession,
    m: TableMutation,
    location: dict[str, str],
    job: JobSettings,
    scan: TableScan,
    source: DataFrame,
    names: Sequence[str],
    keys: Sequence[str],
    target_columns: Sequence[str],
    actions: MergeActions,
) -> DataFrame:
    """A merge whose matches stay within buckets (:func:`splits_by_bucket`) as one Spark job, whose writing
    tasks' reports (:data:`SUMMARY_DDL`) the driver commits: each task gets some buckets (spread over tasks by
    file bytes) and those buckets' source rows — shipped from the driver for a small source
    (:func:`_shipped_source`), else bucketed by a Python stage and shuffled — then merges them with those
    buckets' target rows, which it reads itself (at ``scan``'s snapshot), and writes the mutations."""
    split = m.bucket_merge(scan, actions, keys, target_columns)
    task_of = bucket_tasks(split.bucket_bytes(), m.table.num_buckets, spark.sparkContext.defaultParallelism)
    tasks = max(task_of) + 1
    shipped = _shipped_source(spark, source, split, names, task_of)
    stage = BucketMergeStage(split, m.acid_table, location["metastore"], location["warehouse"], job, shipped)
    if shipped is not None:
        return spark.range(0, tasks, 1, tasks).mapInArrow(stage, SUMMARY_DDL)
    bucketed = source.mapInArrow(
        SourceBuckets(split, tuple(names), task_of), source_ddl(m.changes.table, names)
    ).repartitionById(tasks, TASK)
    return bucketed.mapInArrow(stage, SUMMARY_DDL)


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
