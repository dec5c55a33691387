"""``MutatorCoordinator``: applies ordered inserts, updates and deletes to one table inside a mutation txn.

Mutations arrive grouped by (partition, bucket) and, within a group, updates and deletes ascend by ROW__ID
(Mutation API rules, validated here, failing fast with Hive's exceptions). Each group gets one insert file
``delta_W_W_SSSS/bucket_B`` and one delete file ``delete_delta_W_W_SSSS/bucket_B``, written as it goes; files of
groups left are closed together, up to ``CLOSE_TOGETHER`` at a time (a change set touches many buckets with a
few rows each, and encoding their rows in one go shares pyarrow's set-up between files), so memory stays
bounded by one stripe per open file. An update is Hive's split update: a delete event for the old ROW__ID plus
an insert event with the new values, in the same bucket.

A record inserted or updated through Hive's API must sit in the bucket its bucketed columns hash to, as Hive's
``MutatorCoordinator`` checks: in either order Hive's writers hash them (``CLUSTERED BY`` order as Hive's SQL,
the table's column order as Hive's streaming client), so rows either placed are accepted. acidstream's own
merge, update and delete route every row by its ``ROW__ID`` alone, as Hive's UPDATE does, and turn the check off.

The statement id ``SSSS`` keeps the files of coordinators on other processes or hosts apart: each writes with
its own and the txn commits them all; the coordinator itself makes no metastore writes unless the table was
added with ``create_partitions``. Two runs of one coordinator's work (a Spark task and its speculative copy or
retry) share a statement id: each then writes below a ``staging`` directory of its own (hidden, see
:mod:`acidstream.acid.attempts`), and the committer moves the files of the one it takes into the partitions
(:func:`publish_staged`).
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.acid.bucketing import BucketKeyOrder
from acidstream.acid.codec import MAX_STATEMENT_ID, BucketCodec
from acidstream.acid.names import bucket_file, delete_delta_dir, delta_dir
from acidstream.acid.orc import AcidWriter, WriterOptions
from acidstream.acid.orc.sharded import encode_sharded
from acidstream.acid.orc.writer import prepare_directory_once
from acidstream.acid.partitions import DEFAULT_PARTITION_NAME, make_part_name, partition_path
from acidstream.acid.runs import runs
from acidstream.acid.tabular import as_table, to_record_batch
from acidstream.errors import (
    AcidStreamError,
    BucketIdException,
    PartitionCreationException,
    SerializationError,
    WorkerException,
)
from acidstream.mutate.bucket_id import BucketIdResolver
from acidstream.mutate.ordering import GroupingValidator, PartitionValues, SequenceValidator
from acidstream.mutate.record_id import ROW_ID, ROW_ID_TYPE, RecordIdentifier, row_id_arrays
from acidstream.mutate.table import AcidTable, MutationSummary, PartitionMutations, TableType
from acidstream.read.planning import remote_pool
from acidstream.runtime import file_pool
from acidstream.storage import local_path, table_filesystem

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

#: Records buffered by the per-record calls before they are written as one batch.
DEFAULT_BUFFER_RECORDS = 8192
#: Files of groups left that are closed together (see :meth:`MutatorCoordinator._close_left`).
CLOSE_TOGETHER = 64


class Op(enum.Enum):
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"


@dataclass
class _Group:
    """The (partition, bucket) being written and its two files, opened on first use."""

    partition: PartitionValues
    bucket: int
    mutations: PartitionMutations
    inserts: AcidWriter | None = None
    deletes: AcidWriter | None = None


@dataclass
class _Pending:
    """Records of one operation and group from the per-record calls, not yet written."""

    op: Op
    partition: PartitionValues
    bucket: int
    record_ids: list[RecordIdentifier] = field(default_factory=list)
    records: list[Mapping[str, Any]] = field(default_factory=list)


class MutatorCoordinator:
    """Writes one table's mutations for one txn; build it with :meth:`builder`. Not thread-safe.

    After a failed batch call (or any I/O error) the coordinator refuses further work: the txn must be aborted.
    A record refused by a per-record call changes nothing, as in Hive. ``check_buckets=False``: rows are
    routed by their ``ROW__ID`` alone (the caller made sure no bucketed column changes). ``staging``: files go
    to ``<staging>/<partition name>/`` instead of the partitions' directories (the summary names them there,
    with each partition's own location), for :func:`publish_staged` to move in.
    """

    def __init__(
        self,
        table: AcidTable,
        *,
        metastore: MetastoreFacade | None = None,
        statement_id: int | None = None,
        delete_delta_if_exists: bool = False,
        buffer_records: int = DEFAULT_BUFFER_RECORDS,
        check_buckets: bool = True,
        staging: str | None = None,
    ) -> None:
        if table.table_type is not TableType.SINK:
            raise WorkerException(f"{table.qualified_name} is a source table: it takes no mutations")
        if table.write_id is None:
            raise WorkerException(
                f"{table.qualified_name} has no write id: open the txn (client.new_transaction()) first"
            )
        if table.create_partitions and metastore is None:
            raise WorkerException(
                f"{table.qualified_name} was added with create_partitions: the coordinator needs a metastore"
            )
        self.table = table
        self.definition = table.table
        self.write_id = table.write_id
        self.statement_id = table.next_statement_id() if statement_id is None else statement_id
        if not 0 <= self.statement_id <= MAX_STATEMENT_ID:
            raise WorkerException(f"statement id must be in 0..{MAX_STATEMENT_ID}, got {self.statement_id}")
        self._metastore = metastore
        self._delete_existing = delete_delta_if_exists
        self._staging = staging.rstrip("/") if staging else None
        self._buffer_records = buffer_records
        self._fs, self._table_dir = table_filesystem(self.definition.location)
        try:
            self._options = WriterOptions(compression=self.definition.orc_compression)
        except ValueError as exc:
            raise WorkerException(f"{table.qualified_name}: table property 'orc.compress': {exc}") from exc
        self._columns = self.definition.columns
        self._row_schema = pa.schema([c.to_arrow() for c in self._columns])
        self._known_fields = {c.name for c in self._columns} | {
            k.name for k in self.definition.partition_keys
        }
        self._check_buckets_on = check_buckets
        resolvers = [BucketIdResolver(self.definition, order) for order in BucketKeyOrder]
        #: Hive's placements of a row: one resolver when both orders name the columns alike
        self._resolvers = [
            r for i, r in enumerate(resolvers) if r.columns not in (p.columns for p in resolvers[:i])
        ]
        self._grouping = GroupingValidator()
        self._sequence = SequenceValidator()
        self._group: _Group | None = None
        self._left: list[tuple[AcidWriter, PartitionMutations]] = []  # files of groups left, still open
        self._pending: _Pending | None = None
        self._locations: dict[PartitionValues, tuple[str, str]] = {}  # values -> (name, directory)
        self._created: set[PartitionValues] = set()
        self._ready_dirs: set[str] = set()
        self._summary = MutationSummary(table.qualified_name, self.write_id, self.statement_id)
        self._failed: BaseException | None = None
        self._closed = False

    @staticmethod
    def builder() -> MutatorCoordinatorBuilder:
        return MutatorCoordinatorBuilder()

    def __repr__(self) -> str:
        return f"MutatorCoordinator({self.table.qualified_name}, write id {self.write_id}, stmt {self.statement_id})"

    def __enter__(self) -> MutatorCoordinator:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    # --- per-record calls (Hive's API) ---------------------------------------------------------------------

    def insert(self, partition_values: Sequence[Any] | None, record: Mapping[str, Any]) -> None:
        """A new record; only the bucket of its ``ROW__ID`` counts (see :class:`BucketIdResolver`)."""
        self._record(Op.INSERT, partition_values, record)

    def update(self, partition_values: Sequence[Any] | None, record: Mapping[str, Any]) -> None:
        """Replace the row ``record["ROW__ID"]`` with every column of ``record``."""
        self._record(Op.UPDATE, partition_values, record)

    def delete(self, partition_values: Sequence[Any] | None, record: Mapping[str, Any]) -> None:
        """Delete the row ``record["ROW__ID"]`` (the other fields are ignored)."""
        self._record(Op.DELETE, partition_values, record)

    def _record(self, op: Op, partition_values: Sequence[Any] | None, record: Mapping[str, Any]) -> None:
        self._check_usable()
        values = self._partition_values(partition_values)
        record_id = _record_id(record)
        bucket = record_id.bucket
        pending = self._pending
        if pending is not None and (pending.op, pending.partition, pending.bucket) != (op, values, bucket):
            self._write_pending()
        if self._group is None or (self._group.partition, self._group.bucket) != (values, bucket):
            self._enter(values, bucket)  # raises GroupRevisitedException before anything changes
        if op is not Op.DELETE:
            fields = {str(k).lower() for k in record}
            unknown = fields - self._known_fields - {ROW_ID.lower()}
            if unknown:
                raise SerializationError(
                    f"record has columns {sorted(unknown)} the table lacks", field=min(unknown)
                )
            missing = [c.name for c in self._columns if c.name not in fields] if op is Op.UPDATE else []
            if missing:
                raise SerializationError(
                    f"an update replaces the whole row: the record lacks columns {missing}", field=missing[0]
                )
        if op is not Op.INSERT:
            self._sequence.check(record_id, self._where(values, bucket))
        if self._pending is None:
            self._pending = _Pending(op, values, bucket)
        self._pending.record_ids.append(record_id)
        self._pending.records.append(record)
        if len(self._pending.records) >= self._buffer_records:
            self._write_pending()

    def flush(self) -> None:
        """Write records buffered by the per-record calls (close does it too)."""
        self._check_usable()
        self._write_pending()

    # --- columnar calls -------------------------------------------------------------------------------------

    def insert_batch(self, partition_values: Sequence[Any] | None, data: Any) -> None:
        """Rows of an Arrow table / pandas frame with a ``ROW__ID`` column (bucket attached, e.g. by
        :meth:`BucketIdResolver.attach_batch`); consecutive rows of a bucket form its group."""
        self._batch(Op.INSERT, partition_values, data)

    def update_batch(self, partition_values: Sequence[Any] | None, data: Any) -> None:
        """New values of whole rows (every column) identified by their ``ROW__ID``, ascending per bucket."""
        self._batch(Op.UPDATE, partition_values, data)

    def delete_batch(self, partition_values: Sequence[Any] | None, data: Any) -> None:
        """Rows identified by a ``ROW__ID`` column (other columns ignored), ascending per bucket."""
        self._batch(Op.DELETE, partition_values, data)

    def _batch(self, op: Op, partition_values: Sequence[Any] | None, data: Any) -> None:
        self._check_usable()
        self._write_pending()
        try:
            table = as_table(data)
            values = self._partition_values(partition_values)
            self._write_table(op, values, table)
        except BaseException as exc:
            self._failed = exc
            raise

    def _write_table(
        self,
        op: Op,
        values: PartitionValues,
        table: pa.Table,
        *,
        first_index: int = 0,
        sequenced: bool = False,
    ) -> None:
        """Write ``table`` (ROW__ID and, unless deleting, data columns) as ``op``, run by run of one bucket.
        ``sequenced``: the per-record calls checked the ROW__ID order already."""
        if table.num_rows == 0:
            return
        names = {n.lower(): n for n in table.column_names}
        if ROW_ID.lower() not in names:
            raise WorkerException(
                f"{op.value} of {self.table.qualified_name}: the rows have no {ROW_ID} column"
            )
        try:
            write_ids, props, row_ids, buckets = row_id_arrays(table.column(names[ROW_ID.lower()]))
        except ValueError as exc:
            raise WorkerException(f"{op.value} of {self.table.qualified_name}: {exc}") from exc
        rows = None if op is Op.DELETE else self._rows(op, table, names, first_index)
        for start, end in runs(buckets):
            bucket = int(buckets[start])
            if self._group is None or (self._group.partition, self._group.bucket) != (values, bucket):
                self._enter(values, bucket)
            where = self._where(values, bucket)
            if op is not Op.INSERT and not sequenced:
                self._sequence.check_batch(write_ids[start:end], props[start:end], row_ids[start:end], where)
            run = None if rows is None else rows.slice(start, end - start)
            if run is not None and self._check_buckets_on:
                self._check_buckets(
                    run, buckets[start:end], write_ids, props, row_ids, start, first_index, where
                )
            self._apply(op, values, run, write_ids[start:end], props[start:end], row_ids[start:end])

    def _rows(self, op: Op, table: pa.Table, names: dict[str, str], first_index: int) -> pa.RecordBatch:
        """The data columns in the table's order and types (partition key columns are dropped)."""
        keys = {k.name for k in self.definition.partition_keys}
        data = table.select([n for low, n in names.items() if low != ROW_ID.lower() and low not in keys])
        if op is Op.UPDATE:
            missing = [c.name for c in self._columns if c.name not in names]
            if missing:
                raise SerializationError(
                    f"an update replaces the whole row: columns {missing} are missing", field=missing[0]
                )
        return to_record_batch(data, self._row_schema, first_index=first_index)

    def _check_buckets(
        self,
        rows: pa.RecordBatch,
        expected: npt.NDArray[np.int32],
        write_ids: npt.NDArray[np.int64],
        props: npt.NDArray[np.int32],
        row_ids: npt.NDArray[np.int64],
        start: int,
        first_index: int,
        where: str,
    ) -> None:
        computed = self._resolvers[0].compute_bucket_ids(rows)
        wrong = np.flatnonzero(computed != expected)
        for other in self._resolvers[1:]:  # rows Hive's other writer placed: only the ones the first refused
            if len(wrong):
                wrong = wrong[other.compute_bucket_ids(rows.take(pa.array(wrong))) != expected[wrong]]
        if len(wrong):
            i = int(wrong[0])
            record_id = RecordIdentifier(
                int(write_ids[start + i]), int(props[start + i]), int(row_ids[start + i])
            )
            streaming = ", nor is it Hive streaming's" if len(self._resolvers) > 1 else ""
            raise BucketIdException(
                f"record {first_index + start + i} in {where}: ROW__ID {record_id} is in bucket {expected[i]} but its "
                f"bucketed columns {list(self.definition.bucket_columns)} hash to bucket {computed[i]} (Hive SQL's "
                f"placement{streaming}): rows never move between buckets (an update must not change bucketed "
                "columns)"
            )

    # --- writing --------------------------------------------------------------------------------------------

    def _write_pending(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None or not pending.records:
            return
        try:
            table = self._pending_table(pending)
            self._write_table(pending.op, pending.partition, table, sequenced=True)
        except BaseException as exc:
            self._failed = exc
            raise

    def _pending_table(self, pending: _Pending) -> pa.Table:
        ids = pending.record_ids
        arrays: dict[str, pa.Array] = {
            ROW_ID: pa.array(
                [{"writeid": r.write_id, "bucketid": r.bucket_id, "rowid": r.row_id} for r in ids],
                type=ROW_ID_TYPE,
            )
        }
        if pending.op is not Op.DELETE:
            lowered = [{str(k).lower(): v for k, v in r.items()} for r in pending.records]
            for c in self._columns:
                if pending.op is Op.UPDATE or any(c.name in r for r in lowered):
                    arrays[c.name] = _column(c.name, c.to_arrow().type, lowered)
        return pa.table(arrays)

    def _apply(
        self,
        op: Op,
        values: PartitionValues,
        rows: pa.RecordBatch | None,
        write_ids: npt.NDArray[np.int64],
        props: npt.NDArray[np.int32],
        row_ids: npt.NDArray[np.int64],
    ) -> None:
        group = self._group
        assert group is not None
        n = len(write_ids)
        try:
            if op is not Op.INSERT:
                keys = pa.table(
                    {"originalTransaction": write_ids, "bucket": props, "rowId": row_ids},
                )
                self._deletes(group).delete(self.write_id, keys)
            if rows is not None:
                if (
                    op is Op.INSERT
                    and values
                    and values not in self._created
                    and self.table.create_partitions
                ):
                    self._create_partition(values)
                prop = BucketCodec.V1.encode(group.bucket, self.statement_id)
                self._inserts(group).insert(self.write_id, prop, rows)
        except FileExistsError as exc:
            raise self._taken(exc) from exc
        except (OSError, ValueError) as exc:
            raise WorkerException(f"{op.value} in {self._where(values, group.bucket)} failed: {exc}") from exc
        counts = group.mutations
        if op is Op.INSERT:
            counts.inserted += n
        elif op is Op.UPDATE:
            counts.updated += n
        else:
            counts.deleted += n

    def _inserts(self, group: _Group) -> AcidWriter:
        if group.inserts is None:
            group.inserts = self._writer(group, delta_dir(self.write_id, self.write_id, self.statement_id))
        return group.inserts

    def _deletes(self, group: _Group) -> AcidWriter:
        if group.deletes is None:
            group.deletes = self._writer(
                group, delete_delta_dir(self.write_id, self.write_id, self.statement_id)
            )
        return group.deletes

    def _writer(self, group: _Group, directory: str) -> AcidWriter:
        """The group's file in ``directory``, which is made (with its version file) once per coordinator."""
        location = f"{self._directory(group.partition)}/{directory}"
        path = f"{location}/{bucket_file(group.bucket)}"
        try:
            prepare_directory_once(self._fs, location, self._ready_dirs)
        except OSError as exc:
            raise WorkerException(f"cannot create {location}: {exc}") from exc
        if self._delete_existing:
            with contextlib.suppress(FileNotFoundError):
                self._fs.delete_file(
                    path
                )  # left by an earlier attempt of this statement (Hive's deleteDeltaIfExists)
        # Created in the background: a file's creation (~0.4 ms in the kernel) overlaps the mutations' Python
        # work, and the writer waits for it only when it first writes (at the group's close).
        return AcidWriter(
            self._fs,
            path,
            self._columns,
            options=self._options,
            side_file=False,
            directory_ready=True,
            create_in=file_pool(),
        )

    def _directory(self, values: PartitionValues) -> str:
        """Where the files of partition ``values`` go: its directory, or its place below ``staging``."""
        name, location = self._location(values)
        return location if self._staging is None else staged_partition(self._staging, name)

    def _taken(self, exc: FileExistsError) -> WorkerException:
        """What a writer's file being there already means (raised when the writer first writes)."""
        return WorkerException(
            f"{exc}: another coordinator of this txn wrote statement {self.statement_id} of that bucket "
            "(give each coordinator its own statement id), or an earlier attempt did (build with "
            "delete_delta_if_exists())"
        )

    # --- groups and partitions ------------------------------------------------------------------------------

    def _enter(self, values: PartitionValues, bucket: int) -> None:
        """Leave the current group (closing its files) for (values, bucket), which must be new."""
        self._grouping.enter(values, bucket)  # raises for a revisited group
        self._close_group()
        name, location = self._location(values)
        self._group = _Group(values, bucket, self._summary.partition(name, values, location))
        self._sequence.reset()

    def _close_group(self, *, last: bool = False) -> None:
        """Leave the current group; its files close with the next :data:`CLOSE_TOGETHER` (all: ``last``)."""
        group, self._group = self._group, None
        if group is not None:
            self._left.extend((w, group.mutations) for w in (group.inserts, group.deletes) if w is not None)
        if self._left and (last or len(self._left) >= CLOSE_TOGETHER):
            self._close_left()

    def _close_left(self) -> None:
        """Close the files of the groups left: the rows they buffer encoded side by side (inserted rows of many
        files share pyarrow's files, :func:`encode_sharded`), then each file's stripes and tail written."""
        left = self._left
        taken = [(w, t) for w, _ in left if (t := w.take_pending_events()) is not None]
        encoded = {id(w): e for (w, _), e in zip(taken, encode_sharded(taken), strict=True)}

        def finish(writer: AcidWriter) -> None:
            chunk = encoded.get(id(writer))
            try:
                writer.flush_encoded([chunk] if chunk is not None else [])
            except FileExistsError as exc:
                raise self._taken(exc) from exc
            writer.close()

        writers = [w for w, _ in left]
        if len(writers) > 1 and local_path(self._fs, "/") is None:
            # On HDFS or S3 a close sends the file (a round trip or two, waiting on the store): side by side.
            # Every close ends before the first failure (in order) is raised, so abort() races none of them.
            closing = [remote_pool().submit(finish, w) for w in writers]
            futures.wait(closing)
            for done in closing:
                done.result()
        else:
            for writer in writers:
                finish(writer)
        for writer, mutations in left:
            mutations.files.append(writer.path)
            written = writer.written_prefix
            mutations.checksums[writer.path] = (written.length, written.crc32)
        self._left = []

    def _location(self, values: PartitionValues) -> tuple[str, str]:
        """(partition name, directory): the metastore's location if it has the partition, else Hive's layout."""
        found = self._locations.get(values)
        if found is not None:
            return found
        keys = [k.name for k in self.definition.partition_keys]
        if not keys:
            found = ("", self._table_dir)
        else:
            name = make_part_name(keys, list(values))
            partition = None
            if self._metastore is not None:
                partition = self._metastore.get_partition(self.table.qualified_name, list(values))
            if partition is not None:
                self._created.add(values)
                found = (name, table_filesystem(partition.location)[1])
            else:
                found = (name, partition_path(self._table_dir, keys, list(values)))
        self._locations[values] = found
        return found

    def _create_partition(self, values: PartitionValues) -> None:
        assert self._metastore is not None
        try:
            self._metastore.add_partition(self.table.qualified_name, list(values), if_not_exists=True)
        except AcidStreamError as exc:
            raise PartitionCreationException(
                f"cannot create partition {list(values)} of {self.table.qualified_name}: {exc}"
            ) from exc
        self._created.add(values)

    def _partition_values(self, partition_values: Sequence[Any] | None) -> PartitionValues:
        # null and '' are Hive's default partition, as streaming names it
        values = tuple(
            DEFAULT_PARTITION_NAME if v is None or v == "" else str(v) for v in (partition_values or ())
        )
        keys = self.definition.partition_keys
        if len(values) != len(keys):
            raise WorkerException(
                f"{self.table.qualified_name} is partitioned by {[k.name for k in keys]}: "
                f"partition values {list(values)} do not fit"
            )
        return values

    def _where(self, values: PartitionValues, bucket: int) -> str:
        part = f"partition {list(values)} " if values else ""
        return f"{self.table.qualified_name} {part}bucket {bucket}"

    # --- end ------------------------------------------------------------------------------------------------

    @property
    def summary(self) -> MutationSummary:
        """What was written so far (complete once closed)."""
        return self._summary

    def close(self) -> MutationSummary:
        """Write what is buffered and close every file; the summary is what the txn commits (in-process it is
        also handed to the AcidTable, which the client's commit reads). Idempotent."""
        if self._closed:
            return self._summary
        self._check_usable()
        try:
            self._write_pending()
            self._close_group(last=True)
        except BaseException as exc:
            self._failed = exc
            self.abort()
            raise
        self._closed = True
        self.table.record_summary(self._summary)
        return self._summary

    def abort(self) -> None:
        """Discard: buffered records are dropped and open files removed (closed ones stay, invisible once the
        txn aborts)."""
        self._closed = True
        self._pending = None
        group, self._group = self._group, None
        left, self._left = self._left, []
        writers = [w for w, _ in left]
        if group is not None:
            writers += [w for w in (group.inserts, group.deletes) if w is not None]
        for writer in writers:
            with contextlib.suppress(AcidStreamError, OSError):
                writer.abort_close()

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise WorkerException(
                f"{self!r} failed earlier ({self._failed}); abort the transaction"
            ) from self._failed
        if self._closed:
            raise WorkerException(f"{self!r} is closed")


class MutatorCoordinatorBuilder:
    """Hive's ``MutatorCoordinatorBuilder`` with snake_case names."""

    def __init__(self) -> None:
        self._metastore: MetastoreFacade | str | None = None
        self._warehouse: str | None = None
        self._table: AcidTable | None = None
        self._statement_id: int | None = None
        self._delete_existing = False
        self._buffer_records = DEFAULT_BUFFER_RECORDS

    def with_metastore(
        self, metastore: MetastoreFacade | str, warehouse: str | None = None
    ) -> MutatorCoordinatorBuilder:
        """A :class:`Metastore` or its URL; needed for partition locations and ``create_partitions``."""
        self._metastore, self._warehouse = metastore, warehouse
        return self

    def with_table(self, table: AcidTable) -> MutatorCoordinatorBuilder:
        self._table = table
        return self

    def with_statement_id(self, statement_id: int) -> MutatorCoordinatorBuilder:
        """Each coordinator of a table in one txn needs its own (default: the next one of this AcidTable
        object; coordinators on other processes should be given theirs, e.g. a task's partition id)."""
        self._statement_id = statement_id
        return self

    def delete_delta_if_exists(self) -> MutatorCoordinatorBuilder:
        """Replace files an earlier attempt of the same statement left (a retried task)."""
        self._delete_existing = True
        return self

    def with_buffer_records(self, n: int) -> MutatorCoordinatorBuilder:
        if n < 1:
            raise WorkerException(f"buffer size must be >= 1, got {n}")
        self._buffer_records = n
        return self

    def build(self) -> MutatorCoordinator:
        if self._table is None:
            raise WorkerException("with_table(AcidTable) is required")
        metastore = self._metastore
        if isinstance(metastore, str):
            if self._warehouse is None:
                raise WorkerException("with_metastore(url) needs warehouse=... (where the table files live)")
            from acidstream.metastore import MetastoreFacade

            metastore = MetastoreFacade.connect(metastore, warehouse=self._warehouse)
        return MutatorCoordinator(
            self._table,
            metastore=metastore,
            statement_id=self._statement_id,
            delete_delta_if_exists=self._delete_existing,
            buffer_records=self._buffer_records,
        )


def staged_partition(staging: str, name: str) -> str:
    """Where a coordinator writing below ``staging`` puts the files of partition ``name`` (``""``: the table's)."""
    return f"{staging}/{name}" if name else staging


def publish_staged(fs: pafs.FileSystem, summary: MutationSummary, staging: str) -> MutationSummary:
    """Move the files a coordinator wrote below ``staging`` into their partitions' directories on ``fs`` (a
    rename on local disks and HDFS, a copy on S3), each directory made with its version file; the summary
    naming them there."""
    moved = MutationSummary(summary.table, summary.write_id, summary.statement_id)
    made: set[str] = set()
    for name, part in summary.partitions.items():
        staged = staged_partition(staging.rstrip("/"), name)
        into = moved.partition(name, part.values, part.location)
        into.inserted, into.updated, into.deleted = part.inserted, part.updated, part.deleted
        for path in part.files:
            if not path.startswith(f"{staged}/"):
                raise WorkerException(f"{path} is not below the staging directory {staged}")
            target = f"{part.location}{path[len(staged) :]}"
            try:
                prepare_directory_once(fs, target.rsplit("/", 1)[0], made)
                fs.move(path, target)
            except OSError as exc:
                raise WorkerException(f"cannot move {path} into the table as {target}: {exc}") from exc
            into.files.append(target)
            if path in part.checksums:
                into.checksums[target] = part.checksums[path]
    return moved


def _record_id(record: Mapping[str, Any]) -> RecordIdentifier:
    value = record.get(ROW_ID)
    if value is None:
        value = next((v for k, v in record.items() if str(k).upper() == ROW_ID), None)
    if value is None:
        raise WorkerException(f"record has no {ROW_ID}: {dict(record)!r:.200}")
    try:
        return RecordIdentifier.of(value)
    except (TypeError, ValueError, KeyError) as exc:
        raise WorkerException(
            f"record's {ROW_ID} {value!r} is not (writeid, bucketid, rowid): {exc}"
        ) from exc


def _column(name: str, arrow_type: pa.DataType, records: list[dict[str, Any]]) -> pa.Array:
    values = [r.get(name) for r in records]
    try:
        return pa.array(values, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
        for i, v in enumerate(values):
            try:
                pa.array([v], type=arrow_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                raise SerializationError(
                    f"cannot convert {v!r:.100} to {arrow_type}: {exc}", record_index=i, field=name
                ) from exc
        raise SerializationError(f"cannot convert to {arrow_type}: {exc}", field=name) from exc
