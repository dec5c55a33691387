"""What Spark runs on its executors for a merge, update or delete: the ``mapInArrow`` functions (the classes
with ``__call__(self, batches)``), which Spark pickles on the driver and calls in its Python workers, with the
helpers they call and the Spark schemas of the rows they yield (which the driver declares).

They must stay picklable (frozen dataclasses of picklable fields: no open connection, lock or Spark object)
and this module must import nothing driver-only (no SparkSession, DataFrame or txn of the driver's): a task
opens what it needs itself, its metastore client from the URL and warehouse it carries, after setting the
job's store settings it carries (an executor's Python worker knows nothing of the driver's process).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.codec import decode_writer_ids
from acidstream.acid.partitions import make_part_name, parse_part_name
from acidstream.acid.runs import runs
from acidstream.metastore.models import TableDefinition
from acidstream.mutate.apply import INSERT, OP, apply_mutations
from acidstream.mutate.bucket_merge import BucketMerge
from acidstream.mutate.changes import (
    PART,
    Changes,
    KnownPartitions,
    MergeActions,
    PartitionValues,
    duplicate_match,
)
from acidstream.mutate.coordinator import MutatorCoordinator
from acidstream.mutate.record_id import ROW_ID, row_id_arrays
from acidstream.mutate.table import AcidTable, MutationSummary
from acidstream.spark.errors import task_errors
from acidstream.spark.options import JobSettings, ResolvedTable, client
from acidstream.spark.read import PARTITION_NAME, read_tasks
from acidstream.spark.task_write import attempt_dir, discard_if_ended, statement_id_for
from acidstream.spark.types import schema_ddl, spark_arrow_schema, to_spark_batch
from acidstream.storage import table_filesystem

if TYPE_CHECKING:
    from acidstream.acid.types import Column
    from acidstream.acid.writeids import ValidWriteIdList
    from acidstream.read.planning import BucketTask

#: A matched target row a merge leaves as it is: it goes through the shuffle only so that a second source row
#: matching it is found (and refused), then tasks drop it.
MATCHED = 3
#: Each mutation's bucket (decoded from its ROW__ID): with the partition name, what Spark groups by.
BUCKET = "__bucket"
#: The task a source row goes to in a merge split by bucket (``by_bucket.bucket_tasks``).
TASK = "__task"
#: What a writing task reports: its coordinator's summary as JSON, and the attempt's own directory its files
#: are in until the driver moves them into the table (:mod:`acidstream.acid.attempts`).
SUMMARY_DDL = "summary string, staged string"
#: The joined rows :class:`MergeStage` takes: the source's and the target's columns prefixed, and a flag that
#: is set (not null) where a source row is present.
SOURCE_PREFIX = "__s_"
TARGET_PREFIX = "__t_"
SOURCE_PRESENT = "__s_present"
#: Rows a read task gathers before keeping those of the pushed keys: the keys are hashed once per this many.
KEY_FILTER_ROWS = 1 << 20


def source_ddl(table: TableDefinition, names: Sequence[str]) -> str:
    """The Spark schema of source rows on their way to their bucket's task: the source's columns typed as
    the table's, the bucket and the task."""
    by_name = {c.name: c for c in (*table.columns, *table.partition_keys)}
    return f"{schema_ddl([by_name[n] for n in names], False)}, `{BUCKET}` int, `{TASK}` int"


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
    job: JobSettings
    shipped: tuple[pa.Table, ...] | None = None

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition, attempt = _task_attempt()
        self.job.in_worker()
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
            metastore = client(self.url, self.warehouse)
            statement_id = statement_id_for(partition)
            staging = attempt_staging(self.table, statement_id, attempt)
            coordinator = _coordinator(self.table, metastore, statement_id, staging)
            try:
                self.split.write_buckets(coordinator, source, buckets.to_numpy())
                summary = coordinator.close()
            except BaseException:
                coordinator.abort()
                raise
            report = _report(self.table, metastore, summary, staging)
        yield report


@dataclass(frozen=True)
class ReadStage:
    """Spark partition ``i`` in (a row of ``spark.range``), the rows of ``groups[i]``'s bucket tasks out (a
    ``mapInArrow`` function); with ``keys``, only rows whose key columns hold values among those."""

    target: ResolvedTable
    columns: tuple[Column, ...]
    write_ids: ValidWriteIdList
    groups: tuple[tuple[BucketTask, ...], ...]
    keys: pa.Table | None
    batch_rows: int = 65536

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        self.target.in_worker()
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


def mutation_ddl(table: TableDefinition) -> str:
    """The Spark schema of mutation rows: ROW__ID, the data columns, partition name, bucket, operation."""
    return f"{schema_ddl(table.columns, True)}, `{PARTITION_NAME}` string, `{BUCKET}` int, `{OP}` tinyint"


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
        s_present = pc.is_valid(batch.column(SOURCE_PRESENT)).to_numpy(zero_copy_only=False)
        rows = pa.Table.from_batches([batch])
        target_rows = rows.filter(pa.array(t_present))
        codes, parts = _partition_codes(target_rows.column(PARTITION_NAME), self.changes.table)
        target = pa.table(
            {
                ROW_ID: target_rows.column(ROW_ID),
                **{c: target_rows.column(TARGET_PREFIX + c) for c in self.target_columns},
                PART: codes,
            }
        )
        source_rows = rows.filter(pa.array(s_present))
        source = self.changes.align_source(
            pa.table({c: source_rows.column(SOURCE_PREFIX + c) for c in self.source_columns}), self.keys
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
    job: JobSettings

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition, attempt = _task_attempt()
        self.job.in_worker()
        with task_errors():
            metastore = client(self.url, self.warehouse)
            statement_id = statement_id_for(partition)
            staging = attempt_staging(self.table, statement_id, attempt)
            summary = write_mutations(self.table, metastore, statement_id, staging, batches, self.keys)
            report = None if summary is None else _report(self.table, metastore, summary, staging)
        if report is not None:
            yield report


def _task_attempt() -> tuple[int, int]:
    """(Spark partition id, attempt number) of the running task; (0, 0) outside one."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return (context.partitionId(), context.attemptNumber()) if context is not None else (0, 0)


def attempt_staging(table: AcidTable, statement_id: int, attempt: int) -> str:
    """The directory of this task attempt's own, where its coordinator writes: two attempts of one task (a
    retry, a speculative copy) never touch each other's files, nor the table's."""
    assert table.write_id is not None
    _, table_dir = table_filesystem(table.table.location)
    return attempt_dir(table_dir, table.write_id, statement_id, attempt)


def _coordinator(table: AcidTable, metastore: Any, statement_id: int, staging: str) -> MutatorCoordinator:
    """A coordinator writing below ``staging`` rows routed by their ROW__IDs (the driver checked the columns)."""
    return MutatorCoordinator(
        table, metastore=metastore, statement_id=statement_id, check_buckets=False, staging=staging
    )


def _report(table: AcidTable, metastore: Any, summary: MutationSummary, staging: str) -> pa.RecordBatch:
    """A writing task's one row of :data:`SUMMARY_DDL`, once its files are whole; an attempt that outlived its
    txn's end (a losing copy) deletes them, as nothing else will."""
    assert table.write_id is not None
    fs, _ = table_filesystem(table.table.location)
    discard_if_ended(fs, staging, metastore, table.qualified_name, table.write_id)
    return pa.RecordBatch.from_pydict({"summary": [summary.to_json()], "staged": [staging]})


def write_mutations(
    table: AcidTable,
    metastore: Any,
    statement_id: int,
    staging: str,
    batches: Iterable[pa.RecordBatch],
    keys: Sequence[str] = (),
) -> MutationSummary | None:
    """Write ordered mutation rows (:func:`mutation_ddl`) through one coordinator, below the attempt's
    ``staging`` directory; None if there were none.

    Two mutations of one ROW__ID (adjacent, being sorted) mean two source rows matched one target row: refused,
    naming the row by ``keys``.
    """
    coordinator: MutatorCoordinator | None = None
    last: tuple[str, int, int, int] | None = None
    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            if coordinator is None:
                coordinator = _coordinator(table, metastore, statement_id, staging)
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
