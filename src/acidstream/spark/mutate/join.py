"""A merge as a join (package docstring): the target's keys and ROW__IDs read by Spark tasks, only those the
source's keys may match where the driver can hold those keys, joined with the source in Spark; the driver then
turns the joined rows into mutations with :class:`~acidstream.spark.mutate.stages.MergeStage`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from acidstream.metastore.models import TableDefinition
from acidstream.mutate.changes import MergeActions, duplicate_key
from acidstream.mutate.merge import TableMutation
from acidstream.mutate.record_id import ROW_ID
from acidstream.spark.mutate.stages import SOURCE_PREFIX, SOURCE_PRESENT, TARGET_PREFIX, ReadStage
from acidstream.spark.options import JobSettings, ResolvedTable
from acidstream.spark.read import PARTITION_NAME, pack_tasks, selected_columns
from acidstream.spark.types import schema_ddl

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from acidstream.read.scan import TableScan

#: Up to this many distinct source keys are pushed into the target's read (:func:`source_keys`); beyond, the
#: driver would hold too much and the Spark semi-join takes over.
MAX_PUSHED_KEYS = 1_000_000
#: File bytes per task reading the target: one task per core unless the table is larger. A merge reads the keys
#: and ROW__IDs, a small part of each file, so tasks can cover more bytes than a read of whole rows.
READ_TASK_BYTES = 1 << 30
#: The column counting each source key's rows.
_ROWS = "__rows"


def scan_target(
    spark: SparkSession,
    m: TableMutation,
    location: dict[str, str],
    job: JobSettings,
    scan: TableScan,
    keys: pa.Table | None,
) -> DataFrame:
    """ROW__ID, the scan's columns and the partition name of the rows ``scan`` (planned here, at the txn's
    snapshot) sees, read by Spark tasks; with ``keys``, only rows whose key columns hold values among those.

    Tasks are a range of Spark partitions mapped to groups of bucket tasks, not the data source: its planning
    runs in Python workers of its own, which cost more than this whole read of a change set's rows."""
    plan = scan.plan_files()
    columns = tuple(selected_columns(m.table, scan.columns))
    target = ResolvedTable(location["metastore"], location["warehouse"], m.table.definition(), job)
    parallelism = spark.sparkContext.defaultParallelism
    groups = pack_tasks(plan.tasks, READ_TASK_BYTES, min_groups=parallelism) or [()]
    stage = ReadStage(target, columns, plan.write_ids, tuple(groups), keys)
    ddl = f"{schema_ddl(columns, True)}, `{PARTITION_NAME}` string"
    return spark.range(0, len(groups), 1, len(groups)).mapInArrow(stage, ddl)


def source_keys(
    source: DataFrame, names: Sequence[str], keys: Sequence[str], table: TableDefinition, *, push: bool
) -> pa.Table | None:
    """The source's distinct non-null keys, typed as Spark types the target's columns, collected to the driver
    so that the target's read keeps only rows they may match; None when not ``push``-ed or there are more than
    :data:`MAX_PUSHED_KEYS` (the target is then semi-joined with them in Spark).

    A key two source rows hold is refused (``InvalidObjectException`` naming it), matched or not, as the
    Python merge refuses it: counted with the keys collected, or in a job of its own when none are."""
    from pyspark.sql import functions as F

    from acidstream.spark.types import spark_ddl

    types = {c.name: c.type for c in (*table.columns, *table.partition_keys)}
    originals = dict(zip(names, source.columns, strict=True))
    frame = source.select(*[F.col(f"`{originals[k]}`").cast(spark_ddl(types[k])).alias(k) for k in keys])
    counted = frame.dropna().groupBy(*keys).agg(F.count(F.lit(1)).alias(_ROWS))
    if push:
        # counted before the limit: the bound is on keys, not rows (a source of many rows per key still pushes)
        collected = counted.limit(MAX_PUSHED_KEYS + 1).toArrow()
        if collected.num_rows <= MAX_PUSHED_KEYS:
            _refuse_repeated(collected.filter(pc.greater(collected.column(_ROWS), 1)), keys)
            return collected.drop_columns([_ROWS])
    _refuse_repeated(counted.where(F.col(_ROWS) > 1).limit(1).toArrow(), keys)
    return None


def _refuse_repeated(repeated: pa.Table, keys: Sequence[str]) -> None:
    """Raise the merge's duplicate-key error for the first of ``repeated`` (keys held by several rows), if any."""
    if repeated.num_rows:
        first = repeated.slice(0, 1).to_pylist()[0]
        raise duplicate_key("two source rows", {k: first[k] for k in keys})


def join_source(
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
    t = target.select(ROW_ID, PARTITION_NAME, *[F.col(c).alias(TARGET_PREFIX + c) for c in target_columns])
    s = source.select(
        *[
            F.col(f"`{original}`").alias(SOURCE_PREFIX + name)
            for original, name in zip(source.columns, names, strict=True)
        ],
        F.lit(True).alias(SOURCE_PRESENT),
    )
    orphans = actions.when_not_matched_by_source == "delete"
    if pushed is None and not orphans:
        # only target rows some source row matches matter: a semi-join (the source is usually the small side)
        # keeps the outer join below from shuffling the whole target
        probe = s.select(
            *[F.col(SOURCE_PREFIX + k).cast(spark_ddl(types[k])).alias(TARGET_PREFIX + k) for k in keys]
        )
        t = t.join(probe.distinct(), on=[TARGET_PREFIX + k for k in keys], how="left_semi")
    condition = None
    for k in keys:
        equal = t[TARGET_PREFIX + k] == s[SOURCE_PREFIX + k].cast(spark_ddl(types[k]))
        condition = equal if condition is None else condition & equal
    inserts = actions.when_not_matched == "insert"
    how = {(True, True): "full", (True, False): "right", (False, True): "left", (False, False): "inner"}
    if pushed is not None:
        # the read kept only rows the source's keys may match, at most about one per key: broadcast them,
        # and the source is joined where it lies, with no shuffle
        t = F.broadcast(t)
    return t.join(s, on=condition, how=how[(inserts, orphans)])
