"""The driver's part of a Spark merge, update or delete: it opens the txn (:class:`TableMutation`), plans the
job, runs it and commits the summaries its writing tasks report (package docstring)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from acidstream.mutate.apply import DELETE, INSERT, OP, UPDATE
from acidstream.mutate.bucket_merge import splits_by_bucket
from acidstream.mutate.changes import MatchedAction, MergeActions
from acidstream.mutate.coordinator import publish_staged
from acidstream.mutate.merge import TableMutation
from acidstream.mutate.record_id import ROW_ID
from acidstream.mutate.table import AcidTable, MutationSummary
from acidstream.spark.commit import remove_attempts
from acidstream.spark.datasource import register
from acidstream.spark.errors import driver_errors
from acidstream.spark.mutate.by_bucket import merge_by_bucket
from acidstream.spark.mutate.join import join_source, scan_target, source_keys
from acidstream.spark.mutate.stages import BUCKET, SUMMARY_DDL, MergeStage, WriteStage, mutation_ddl
from acidstream.spark.options import JobSettings, client, metastore_location, session_job
from acidstream.spark.read import PARTITION_NAME, PARTITION_NAME_OPTION
from acidstream.storage import table_filesystem

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame, SparkSession


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
    inserted, unmatched target rows deleted if asked; null keys never match; a key two source rows hold is an
    error). Returns ``{"inserted": n, "updated": n, "deleted": n}``.

    A table bucketed on merge keys only is merged bucket by bucket in one job, the source evaluated once
    (package docstring). Otherwise, unless unmatched target rows are deleted, only target rows the source's keys
    may match are joined: the source's distinct keys (up to :data:`MAX_PUSHED_KEYS`) are collected and the read
    keeps those rows, which are broadcast to the join; with more keys the target is semi-joined with them in
    Spark. The source is then evaluated twice (``cache()`` an expensive one), as it is when unmatched target
    rows are deleted (its keys are counted first, to refuse a key held twice)."""
    actions = MergeActions(when_matched, when_not_matched, when_not_matched_by_source)
    job = session_job(spark)
    with _mutation(metastore, warehouse, table) as (m, location):
        changes = m.changes
        names = changes.source_columns(source.columns, on)
        keys = [k.lower() for k in on]
        target_columns = changes.target_columns(names, keys, actions)
        if splits_by_bucket(changes.table, keys, actions):
            with m.scan(target_columns) as scan:  # registered as a reader until the tasks have read
                reports = merge_by_bucket(
                    spark, m, location, job, scan, source, names, keys, target_columns, actions
                )
                return _commit(m, reports)
        known = m.inserted_partitions(actions)
        push = actions.when_not_matched_by_source is None
        pushed = source_keys(source, names, keys, changes.table, push=push)
        with m.scan(target_columns) as scan:  # registered as a reader until the tasks have read
            target = scan_target(spark, m, location, job, scan, pushed)
            joined = join_source(target, source, names, keys, target_columns, actions, changes.table, pushed)
            stage = MergeStage(
                changes,
                actions,
                keys,
                target_columns,
                names,
                known,
            )
            mutations = joined.mapInArrow(stage, mutation_ddl(changes.table))
            return _write(m, location, job, mutations, keys)


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
        return _write(m, location, session_job(spark), mutations, [])


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
        return _write(m, location, session_job(spark), mutations, [])


@contextlib.contextmanager
def _mutation(
    metastore: str | None, warehouse: str | None, table: str
) -> Iterator[tuple[TableMutation, dict[str, str]]]:
    """The open mutation txn and the options that find the metastore (for the data source and the tasks)."""
    location = {k: v for k, v in (("metastore", metastore), ("warehouse", warehouse)) if v is not None}
    url, wh = metastore_location(location)
    with TableMutation(client(url, wh), table) as m:
        yield m, {"metastore": url, "warehouse": wh}


def _read_target(
    spark: SparkSession, m: TableMutation, location: dict[str, str], columns: Sequence[str]
) -> DataFrame:
    """ROW__ID, ``columns`` and the partition name of every row at the txn's snapshot, through the data
    source (whose filter push-down prunes partitions)."""
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


def _where(rows: DataFrame, condition: str | SparkColumn | None) -> DataFrame:
    from pyspark.sql import functions as F

    if condition is None:
        return rows
    return rows.where(F.expr(condition) if isinstance(condition, str) else condition)


def _bucket_of_row_id() -> SparkColumn:
    """``decode_writer_ids`` in Spark SQL: the bucket of a V1 bucket property; V0 holds the bucket itself."""
    from pyspark.sql import functions as F

    prop = F.col(f"{ROW_ID}.bucketid")
    return F.when(F.shiftright(prop, 29) == 1, F.shiftright(prop, 16).bitwiseAND(0xFFF)).otherwise(prop)


def _write(
    m: TableMutation, location: dict[str, str], job: JobSettings, mutations: DataFrame, keys: Sequence[str]
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
    stage = WriteStage(m.acid_table, location["metastore"], location["warehouse"], tuple(keys), job)
    return _commit(m, ordered.mapInArrow(stage, SUMMARY_DDL))


def _commit(m: TableMutation, reports: DataFrame) -> dict[str, int]:
    """Run the job whose tasks report their :class:`MutationSummary` (:data:`SUMMARY_DDL`), move the files of
    the attempts Spark took into the table and commit them; every attempt's directory goes, whatever the
    outcome (those of attempts Spark did not take never reach the table)."""
    try:
        with driver_errors():
            rows = reports.collect()
        return m.commit(
            publish(m.acid_table, [(MutationSummary.from_json(r.summary), r.staged) for r in rows])
        )
    finally:
        assert m.acid_table.write_id is not None
        with contextlib.suppress(OSError):
            remove_attempts(m.table.location, m.acid_table.write_id)


def publish(table: AcidTable, reports: Sequence[tuple[MutationSummary, str]]) -> list[MutationSummary]:
    """Move each reported attempt's files from its own directory into the table (:func:`publish_staged`);
    the summaries naming them there, which the commit records."""
    fs, _ = table_filesystem(table.table.location)
    return [publish_staged(fs, summary, staged) for summary, staged in reports]
