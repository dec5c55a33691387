"""The ``acidstream`` Spark format: one Python data source for batch reads, batch writes and streaming writes."""

from __future__ import annotations

import getpass
from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamWriter, DataSourceWriter

from acidstream.errors import SerializationError, TransactionError
from acidstream.spark.batch_write import OVERWRITE_REFUSED, AcidBatchWriter
from acidstream.spark.options import (
    JobSettings,
    ResolvedTable,
    client,
    flag,
    location_options,
    metastore_location,
    resolve,
    session_job,
)
from acidstream.spark.read import (
    PARTITION_NAME,
    PARTITION_NAME_OPTION,
    TARGET_PARTITION_BYTES,
    TASKS_OPTION,
    AcidReader,
    selected_columns,
)
from acidstream.spark.stream_write import AcidStreamWriter
from acidstream.spark.types import schema_ddl

DEFAULT_BATCH_ROWS = 65536


class AcidDataSource(DataSource):
    """Options: ``metastore`` (URL), ``warehouse`` (dir), the table as ``load``/``save``/``start`` path.

    Read options: ``columns`` (comma list; projection), ``withRowId`` (adds ``ROW__ID`` first),
    ``snapshot`` (a ValidWriteIdList string), ``partitionBytes`` (file bytes per Spark task), ``batchRows``. Stream options: ``checkpointLocation`` or ``sinkId``,
    ``sinkTakeover``.

    ``job``: the registering session's settings (:func:`register` registers a subclass that carries them, since
    Spark calls the source's methods in Python workers that know nothing of the driver's process).
    """

    job: JobSettings = JobSettings()

    @classmethod
    def name(cls) -> str:
        return "acidstream"

    def _target(self, writable: bool = False) -> ResolvedTable:
        return resolve(self.options, writable=writable, job=self.job)

    def schema(self) -> str:
        target = self._target()
        columns = selected_columns(target.table, self.options.get("columns"))
        ddl = schema_ddl(columns, flag(self.options, "withRowId"))
        if flag(self.options, PARTITION_NAME_OPTION):
            ddl = ", ".join(d for d in (ddl, f"`{PARTITION_NAME}` string") if d)
        return ddl

    def reader(self, schema: Any) -> DataSourceReader:
        target = self._target()
        return AcidReader(
            target,
            selected_columns(target.table, self.options.get("columns")),
            with_row_id=flag(self.options, "withRowId"),
            snapshot=self.options.get("snapshot") or None,
            tasks=self.options.get(TASKS_OPTION) or None,
            batch_rows=int(self.options.get("batchRows") or DEFAULT_BATCH_ROWS),
            target_bytes=int(self.options.get("partitionBytes") or TARGET_PARTITION_BYTES),
            with_partition_name=flag(self.options, PARTITION_NAME_OPTION),
            reader_tag=self.options.get("readerTag") or None,
        )

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise TransactionError(OVERWRITE_REFUSED)
        target = self._target(writable=True)
        check_write_schema(target, [f.name for f in schema.fields])
        return AcidBatchWriter(target, f"acidstream-spark-batch:{getpass.getuser()}")

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        if overwrite:
            raise TransactionError('the acidstream sink only appends: use outputMode("append")')
        target = self._target(writable=True)
        check_write_schema(target, [f.name for f in schema.fields])
        return AcidStreamWriter(target, self.options)


def check_write_schema(target: ResolvedTable, names: list[str]) -> None:
    """Fail at planning, not in every task: unknown columns, or missing dynamic-partition columns."""
    table = target.table
    lowered = [n.lower() for n in names]
    known = {c.name for c in (*table.columns, *table.partition_keys)}
    unknown = [n for n, low in zip(names, lowered, strict=True) if low not in known]
    if unknown:
        raise SerializationError(f"columns {unknown} are not in {table.full_name} (columns: {sorted(known)})")
    missing = [k.name for k in table.partition_keys if k.name not in lowered]
    if missing:
        raise SerializationError(
            f"{table.full_name} is partitioned by {[k.name for k in table.partition_keys]}: the DataFrame must "
            f"carry the partition columns {missing} (dynamic partitioning)"
        )


def register(spark: SparkSession) -> SparkSession:
    """Register the ``acidstream`` format (again: to ship changed settings) and enable the filter push-down it
    relies on. The format carries the job's settings as this process reads them now (:func:`job_settings` of the
    session's configuration and of ``configure_stores``): register after configuring the stores."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    # a class made here is pickled whole, with its settings (AcidDataSource itself is pickled by name)
    source = type("AcidJobDataSource", (AcidDataSource,), {"job": session_job(spark)})
    spark.dataSource.register(source)
    return spark


def register_views(
    spark: SparkSession,
    tables: Sequence[str] | None = None,
    *,
    metastore: str | None = None,
    warehouse: str | None = None,
    reader_tag: str | None = None,
) -> dict[str, str]:
    """Temp views for ``spark.sql``, view name → ``db.table``: ``db.t`` becomes view ``t`` (``db_t`` where two
    databases share a table name); ``tables=None`` means every table of every database. With ``reader_tag``,
    the views' reads carry it (the ``readerTag`` option), for their owner to end their registrations.

    Views are defined in SQL (``USING acidstream``), so each query on one plans afresh and reads the snapshot
    current when it starts — Hive's guarantee — whereas a DataFrame keeps the snapshot of its first planning.
    """
    register(spark)
    options = location_options(metastore, warehouse)
    url, wh = metastore_location(options)
    if tables is None:
        ms = client(url, wh)
        tables = [f"{db}.{t}" for db in ms.list_databases() for t in ms.list_tables(db)]
    short = [name.rsplit(".", 1)[-1] for name in tables]
    views: dict[str, str] = {}
    for name, view in zip(tables, short, strict=True):
        if short.count(view) > 1:
            view = name.replace(".", "_")
        pairs = [("path", name), ("metastore", url), ("warehouse", wh)]
        if reader_tag:
            pairs.append(("readerTag", reader_tag))
        settings = ", ".join(f"{k} '{_sql_string(v)}'" for k, v in pairs)
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW `{view}` USING acidstream OPTIONS ({settings})")
        views[view] = name
    return views


def _sql_string(value: str) -> str:
    """The body of a Spark SQL single-quoted literal."""
    return value.replace("\\", "\\\\").replace("'", "\\'")
