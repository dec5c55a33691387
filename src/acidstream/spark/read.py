"""Reading ACID tables into Spark.

Two paths (numbers from bench/bench_spark.py on 2 busy cores, same data, best of 3):

* 2M rows in a few large files: plain ``spark.read.orc`` of the event files 1.8 s, :func:`read_table`
  2.0–2.7 s (68–95 %), the Python data source 2.0–2.4 s (77–89 %): about even; the JVM path uses no
  Python worker memory and scales with executors.
* 200k rows in 1,000 small streaming files (the main job's table): Python data source 0.9 s,
  :func:`read_table` 9–13 s (one JVM scan per partition directory, unioned, then the anti-join).
  Small files favour the Python data source; compaction makes them few and large again.


* ``spark.read.format("acidstream")`` — a Python data source: (partition, bucket) read tasks packed into
  Spark partitions of ~64 MB (``partitionBytes`` option; at least 4 when there are enough), each merged in Python/Arrow by :class:`~acidstream.read.bucket_read.BucketReader` and handed to Spark
  as Arrow batches. Partition filters are pushed down (pruning before any file is listed); the snapshot is
  taken once, when the query is planned, on the driver host. Python data sources cannot prune columns, so
  projection is the ``columns`` option.
* :func:`read_table` — bulk data through Spark's JVM ORC reader with write-id validity and the delete
  anti-join applied in Spark (``acidstream.spark.jvm_read``), plus the Python data source only for files of
  streaming batches still open (their readable length comes from a side file, which the JVM reader cannot
  honour). Both halves read the one plan taken on the driver, so they see the same snapshot.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
)

from acidstream.acid.partitions import make_part_name
from acidstream.acid.writeids import ValidWriteIdList
from acidstream.errors import InvalidObjectException
from acidstream.read.planning import BucketTask, ScanPlan
from acidstream.spark.options import ResolvedTable, client, location_options, metastore_location
from acidstream.spark.types import spark_arrow_schema, to_spark_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from acidstream.acid.types import Column
    from acidstream.metastore import MetastoreFacade

#: Internal option: read exactly these tasks (base64 pickle), at their snapshot, instead of planning.
TASKS_OPTION = "_acidstream_tasks"
#: Internal option: add a last column holding each row's partition name exactly as the metastore names it
#: (``""`` for an unpartitioned table): typed partition values may not print back to the same name.
PARTITION_NAME_OPTION = "_acidstream_partition_name"
PARTITION_NAME = "__partition_name"


def selected_columns(table: Any, columns: Sequence[str] | str | None) -> list[Column]:
    """Table columns then partition keys, or the named ones in the given order."""
    every = [*table.columns, *table.partition_keys]
    if columns is None or columns == "":
        return every
    names = [c.strip().lower() for c in (columns.split(",") if isinstance(columns, str) else columns)]
    by_name = {c.name: c for c in every}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise InvalidObjectException(f"{table.full_name} has no columns {unknown}")
    return [by_name[n] for n in names]


def partition_expression(f: Filter, partition_names: Sequence[str]) -> pc.Expression | None:
    """An Arrow expression over partition values equivalent to Spark's filter, or None if not one."""
    attribute = getattr(f, "attribute", None)
    if not attribute or len(attribute) != 1 or attribute[0].lower() not in partition_names:
        return None
    field = pc.field(attribute[0].lower())
    value = getattr(f, "value", None)
    if isinstance(f, EqualTo):
        return field == value
    if isinstance(f, EqualNullSafe):
        return field.is_null() if value is None else field == value
    if isinstance(f, In):
        return field.isin(list(value or ()))
    if isinstance(f, IsNull):
        return field.is_null()
    if isinstance(f, IsNotNull):
        return field.is_valid()
    if isinstance(f, GreaterThan):
        return field > value
    if isinstance(f, GreaterThanOrEqual):
        return field >= value
    if isinstance(f, LessThan):
        return field < value
    if isinstance(f, LessThanOrEqual):
        return field <= value
    return None


#: Bucket tasks are packed into Spark partitions of about this many file bytes...
TARGET_PARTITION_BYTES = 64 << 20
#: ...but into at least this many partitions (when there are enough tasks), to keep both cores busy.
MIN_PARTITIONS = 4


@dataclass(frozen=True)
class ReadPiece:
    """What one Spark task reads: some bucket tasks at the query's snapshot (none: an empty table)."""

    tasks: tuple[BucketTask, ...]
    write_ids: ValidWriteIdList
    reader_id: int | None = None  # the scan's registration, heartbeated while the task reads


def pack_tasks(
    tasks: Sequence[BucketTask], target_bytes: int = TARGET_PARTITION_BYTES, min_groups: int = MIN_PARTITIONS
) -> list[tuple[BucketTask, ...]]:
    """Group bucket tasks so per-task overhead (a Python worker round trip) does not dominate small files.

    Largest first onto the lightest group: groups end up within one task's size of each other.
    """
    if not tasks:
        return []
    sizes = [sum(f.length for f in (*t.insert_files, *t.delete_files)) for t in tasks]
    count = min(len(tasks), max(min_groups, -(-sum(sizes) // target_bytes)))
    groups: list[list[BucketTask]] = [[] for _ in range(count)]
    loads = [0] * count
    for size, task in sorted(zip(sizes, tasks, strict=True), key=lambda st: -st[0]):
        lightest = loads.index(min(loads))
        groups[lightest].append(task)
        loads[lightest] += size
    return [tuple(g) for g in groups]


def encode_tasks(tasks: Sequence[BucketTask], write_ids: ValidWriteIdList, reader_id: int | None) -> str:
    return base64.b64encode(pickle.dumps((tuple(tasks), write_ids, reader_id))).decode()


def decode_tasks(text: str) -> tuple[tuple[BucketTask, ...], ValidWriteIdList, int | None]:
    tasks, write_ids, reader_id = pickle.loads(base64.b64decode(text))
    return tasks, write_ids, reader_id


class AcidReader(DataSourceReader):
    """Plans once (snapshot + directory listing) in the planner; each task merges one bucket."""

    def __init__(
        self,
        target: ResolvedTable,
        columns: Sequence[Column],
        *,
        with_row_id: bool,
        snapshot: str | None,
        tasks: str | None,
        batch_rows: int,
        target_bytes: int = TARGET_PARTITION_BYTES,
        with_partition_name: bool = False,
        reader_tag: str | None = None,
    ) -> None:
        self.target = target
        self.reader_tag = reader_tag
        self.columns = list(columns)
        self.with_row_id = with_row_id
        self.with_partition_name = with_partition_name
        self.snapshot = snapshot
        self.tasks = tasks
        self.batch_rows = batch_rows
        self.target_bytes = target_bytes
        self.partition_filter: pc.Expression | None = None

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Prune partitions with every filter on partition columns; Spark still re-checks all of them."""
        names = [k.name for k in self.target.table.partition_keys]
        for f in filters:
            expr = partition_expression(f, names)
            if expr is not None:
                self.partition_filter = (
                    expr if self.partition_filter is None else self.partition_filter & expr
                )
            yield f

    def partitions(self) -> list[InputPartition]:
        if self.tasks is not None:
            tasks, write_ids, reader_id = decode_tasks(self.tasks)
        else:
            plan = self._plan()
            tasks, write_ids, reader_id = plan.tasks, plan.write_ids, plan.reader_id
        groups = pack_tasks(tasks, self.target_bytes) or [()]
        return [InputPartition(ReadPiece(group, write_ids, reader_id)) for group in groups]

    def _plan(self) -> ScanPlan:
        ms = self.target.metastore()
        table = ms.table(self.target.name)
        scan = table.scan(
            columns=[c.name for c in self.columns],
            partition_filter=self.partition_filter,
            with_row_id=self.with_row_id,
            snapshot=self.snapshot,
            agent_info=reader_agent_info(self.reader_tag),
        )
        plan: ScanPlan = scan.detach_registration()  # the tasks' reads keep it alive (or unregister_readers)
        return plan

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from acidstream.read.registration import heartbeating

        self.target.in_worker()  # a Spark Python worker: acidstream settings, and the job's stores
        piece: ReadPiece = partition.value
        batches = read_tasks(
            self.target,
            piece.tasks,
            piece.write_ids,
            self.columns,
            self.with_row_id,
            self.batch_rows,
            self.with_partition_name,
        )
        if piece.reader_id is None:
            yield from batches
        else:
            yield from heartbeating(self.target.metastore(), piece.reader_id, batches)


def read_tasks(
    target: ResolvedTable,
    tasks: Iterable[BucketTask],
    write_ids: ValidWriteIdList,
    columns: Sequence[Column],
    with_row_id: bool,
    batch_rows: int,
    with_partition_name: bool = False,
) -> Iterator[pa.RecordBatch]:
    """The visible rows of each bucket task in turn, as Arrow batches typed the way Spark expects."""
    from acidstream.read.bucket_read import ROW_ID, ROW_ID_TYPE
    from acidstream.read.scan import bucket_readers

    table = target.table
    part_names = [k.name for k in table.partition_keys]
    fields = [pa.field(ROW_ID, ROW_ID_TYPE)] if with_row_id else []
    fields += [pa.field(c.name, c.type.to_arrow()) for c in columns]
    spark_schema = spark_arrow_schema(columns, with_row_id)
    readers = bucket_readers(
        table, tasks, write_ids, pa.schema(fields), with_row_id=with_row_id, batch_rows=batch_rows
    )
    for reader in readers:
        name = make_part_name(part_names, reader.task.partition_values) if part_names else ""
        for batch in reader.batches():
            batch = to_spark_batch(batch, spark_schema)
            if with_partition_name:
                batch = batch.append_column(PARTITION_NAME, pa.repeat(pa.scalar(name), batch.num_rows))
            yield batch


def split_for_jvm(plan: ScanPlan) -> tuple[ScanPlan, list[BucketTask]]:
    """(tasks the JVM reader may read, tasks only Python can read); each keeps the bucket's delete files.

    Python gets files of still-open streaming batches (readable length from a side file) and original
    (non-ACID) files (synthetic ROW__IDs need row positions across the bucket).
    """
    closed: list[BucketTask] = []
    still_open: list[BucketTask] = []
    for task in plan.tasks:
        done = tuple(f for f in task.insert_files if not (f.open_batch or f.original))
        pending = tuple(f for f in task.insert_files if f.open_batch or f.original)
        if done:
            closed.append(replace(task, insert_files=done))
        if pending:
            still_open.append(replace(task, insert_files=pending))
    return replace(plan, tasks=tuple(closed)), still_open


def read_table(
    spark: SparkSession,
    table: str,
    *,
    metastore: str | None = None,
    warehouse: str | None = None,
    columns: Sequence[str] | None = None,
    partition_filter: Mapping[str, Any] | pc.Expression | None = None,
    with_row_id: bool = False,
    snapshot: ValidWriteIdList | str | None = None,
) -> DataFrame:
    """``table`` at one snapshot taken now: JVM ORC reader for closed files, Python only for open batches."""
    from acidstream.spark.jvm_read import read_plan

    options = location_options(metastore, warehouse)
    url, wh = metastore_location(options)
    ms = client(url, wh)
    handle = ms.table(table)
    scan = handle.scan(
        columns=columns, partition_filter=partition_filter, with_row_id=with_row_id, snapshot=snapshot
    )
    # JVM tasks do not heartbeat: the registration lives a txn timeout, or until this driver process ends
    plan = scan.detach_registration(lease=ms.txn_timeout)
    if plan.reader_id is not None:
        atexit.register(_forget_reader, ms, plan.reader_id)
    closed, still_open = split_for_jvm(plan)
    frame = read_plan(spark, closed, columns=scan.columns, with_row_id=with_row_id)
    if not still_open:
        return frame
    side = (
        spark.read.format("acidstream")
        .options(**options)
        .option("columns", ",".join(scan.columns))
        .option("withRowId", str(with_row_id).lower())
        .option(TASKS_OPTION, encode_tasks(still_open, plan.write_ids, plan.reader_id))
        .load(handle.full_name)
    )
    return frame.unionByName(side)


def reader_agent_info(tag: str | None) -> str:
    """The agent info of a Spark read's registration: ``spark-scan``, or ``spark-scan:<tag>`` with the
    ``readerTag`` option, which ``Metastore.unregister_readers`` ends in one call once the reads are over."""
    return "spark-scan" if tag is None else f"spark-scan:{tag}"


def _forget_reader(ms: MetastoreFacade, reader_id: int) -> None:
    """At the driver's exit: its DataFrames read no more, so the cleaner need not wait for them."""
    with contextlib.suppress(Exception):  # a closed client or a metastore gone: the lease ends it
        ms.unregister_reader(reader_id)
