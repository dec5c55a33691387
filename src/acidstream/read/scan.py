"""``TableScan``: the rows of an ACID table visible at one snapshot, as Arrow.

The snapshot is taken once when the scan is planned (default: everything committed now), so a scan of a table
being streamed into sees a consistent state, whatever commits happen while it reads. The scan is registered as a
snapshot reader in the metastore while it may read the files it listed (see ``read/registration.py``), so
compaction never deletes them under it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.evolution import text_length
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.errors import InvalidObjectException
from acidstream.metastore.models import ReaderRegistration
from acidstream.read.bucket_read import ROW_ID, ROW_ID_TYPE, BucketReader
from acidstream.read.listing import listed_once
from acidstream.read.planning import (
    BucketTask,
    ScanPlan,
    partition_value_table,
    plan_partition,
    select_partitions,
)
from acidstream.read.prefetch import prefetching, task_files
from acidstream.read.registration import ScanRegistration
from acidstream.read.threads import in_order
from acidstream.runtime import ShortSwitchInterval, each_in, prepare_process
from acidstream.storage import table_filesystem

if TYPE_CHECKING:
    import pandas as pd

    from acidstream.metastore import MetastoreFacade, TableHandle
    from acidstream.metastore.models import TableDefinition

DEFAULT_BATCH_ROWS = 131072
#: Buckets are read side by side only when they hold this much of the columns read on average: each costs its
#: thread about a millisecond of hand-overs, which a scan of many tiny buckets (a commit into hundreds of
#: partitions) would pay over and over (measured: 572 buckets of 2 rows, 0.33 s read one after the other, 0.78 s
#: in threads), and a narrow read of wide files (a merge reading its keys) decodes too little per file for a
#: second thread to gain more than the hand-overs and the GIL cost it.
THREADED_MIN_BYTES = 1 << 20
#: Buckets are cut into parts (runs of files, runs of a large file's stripes) so that each thread gets about this
#: many: the last of five buckets on two threads no longer runs alone, and a part's thread, at most two batches
#: ahead of the caller, is not left waiting for the caller to reach the rest of its bucket.
_PARTS_PER_THREAD = 8
#: a scan makes a few pyarrow calls per file and stripe: beside a busy Python thread each could wait 5 ms
_SHORT_SWITCH = ShortSwitchInterval()


class TableScan:
    """A planned read; build it with ``table.scan(...)`` or ``TableScan(metastore, table, ...)``.

    ``columns``: data and partition columns in any order (default: all data columns, then partition keys).
    ``partition_filter``: ``{key: value}`` (values of the key's type or their text; None = the default
    partition) or an Arrow expression over typed partition keys; it prunes partitions before any listing.
    ``filter``: an Arrow expression over any column, ``ROW__ID`` included; columns it needs but ``columns``
    lacks are read for it and dropped. ``snapshot``: a ValidTxnList (``ms.snapshot()``: the same point in time
    for every table scanned with it), a ValidWriteIdList of this table or its text (default: what is committed
    now). ``batch_rows`` bounds every batch ``to_batches`` yields. ``read_threads``: how many buckets are read
    side by side (default: one per core; 1 reads them one after the other, for callers already running several
    scans at once; buckets of less than a MiB on average are read one after the other anyway); the batches
    come in the same order either way.
    """

    def __init__(
        self,
        metastore: MetastoreFacade,
        table: TableHandle,
        *,
        columns: Sequence[str] | None = None,
        partition_filter: Mapping[str, Any] | pc.Expression | None = None,
        filter: pc.Expression | None = None,
        with_row_id: bool = False,
        snapshot: ValidWriteIdList | ValidTxnList | str | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        read_threads: int | None = None,
        agent_info: str = "scan",
    ) -> None:
        prepare_process()
        if read_threads is not None and read_threads < 1:
            raise ValueError(f"read_threads must be at least 1, got {read_threads}")
        self.metastore = metastore
        self.table = table
        self.with_row_id = with_row_id
        self.partition_filter = partition_filter
        self.filter = filter
        self.batch_rows = batch_rows
        self.read_threads = read_threads or os.cpu_count() or 1
        data_names = [c.name for c in table.columns]
        part_names = [k.name for k in table.partition_keys]
        wanted = [c.lower() for c in columns] if columns is not None else data_names + part_names
        unknown = [c for c in wanted if c not in data_names and c not in part_names]
        if unknown:
            raise InvalidObjectException(f"{table.full_name} has no columns {unknown}")
        self.columns = wanted
        self.filter_fields = filter_only_fields(self._all_fields(), self.schema, filter)
        self._registration: ScanRegistration | None = None
        self._agent_info = agent_info  # what the reader registration says of the reader
        with _SHORT_SWITCH:
            self.write_ids, self.txns = self._resolve_snapshot(snapshot)
        self._plan: ScanPlan | None = None

    def _resolve_snapshot(
        self, snapshot: ValidWriteIdList | ValidTxnList | str | None
    ) -> tuple[ValidWriteIdList, ValidTxnList | None]:
        """The scan's snapshot: a ValidTxnList (one point in time for several tables, ``ms.snapshot()``) or
        this table's ValidWriteIdList. The scan registers as a reader either way (see ``read.registration``),
        and takes the registration's txn list for the visibility of compactions' outputs: a compaction
        published in place (``base_N_vT``) is used once txn T committed, whatever write ids it holds."""
        write_ids = None
        if snapshot is not None and not isinstance(snapshot, ValidTxnList):
            write_ids = ValidWriteIdList.parse(snapshot) if isinstance(snapshot, str) else snapshot
            if write_ids.table is not None and write_ids.table.lower() != self.table.full_name.lower():
                raise ValueError(f"snapshot {write_ids} is for {write_ids.table}, not {self.table.full_name}")
        registered = self._register(snapshot if isinstance(snapshot, ValidTxnList) else None)
        return (registered.write_ids if write_ids is None else write_ids), registered.txns

    def _register(self, snapshot: ValidTxnList | None) -> ReaderRegistration:
        self._registration = ScanRegistration(
            self.metastore, self.table.full_name, agent_info=self._agent_info, snapshot=snapshot
        )
        return self._registration.registration

    @property
    def reader_id(self) -> int | None:
        """The id of the scan's current registration (None once released)."""
        held = self._registration
        return None if held is None or held.released else held.reader_id

    def close(self) -> None:
        """Release the registration: compaction may now delete files this scan listed (idempotent)."""
        if self._registration is not None:
            self._registration.release()

    def detach_registration(self, lease: float | None = None) -> ScanPlan:
        """The plan, and its registration handed to whoever reads its tasks (a Spark job): they heartbeat
        ``plan.reader_id``; it expires once they stop for longer than its lease (the metastore client's
        ``reader_lease``, or ``lease`` seconds)."""
        plan = self.plan_files()
        assert self._registration is not None
        self._registration.detach(lease)
        self._registration = None
        self._plan = None
        return plan

    def __enter__(self) -> TableScan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _all_fields(self) -> pa.Schema:
        """Every column a filter may name: data, partition keys and ROW__ID."""
        fields = [
            pa.field(c.name, c.type.to_arrow()) for c in (*self.table.columns, *self.table.partition_keys)
        ]
        return pa.schema([*fields, pa.field(ROW_ID, ROW_ID_TYPE)])

    @property
    def schema(self) -> pa.Schema:
        fields = [pa.field(ROW_ID, ROW_ID_TYPE)] if self.with_row_id else []
        by_name = {c.name: c for c in (*self.table.columns, *self.table.partition_keys)}
        fields += [pa.field(n, by_name[n].type.to_arrow()) for n in self.columns]
        return pa.schema(fields)

    def plan_files(self) -> ScanPlan:
        """Directory selection for every selected partition, at this scan's snapshot (computed once per
        registration: after a release the scan registers and lists again)."""
        if self._plan is not None and self.reader_id is not None:
            return self._plan
        with _SHORT_SWITCH:
            if self.reader_id is None:
                self._register(None)
            self._plan = self._planned()
        return self._plan

    def _planned(self) -> ScanPlan:
        fs, table_dir = table_filesystem(self.table.location)
        tasks: list[BucketTask] = []
        obsolete: list[str] = []
        targets: list[tuple[tuple[str, ...], str, str]]
        if not self.table.partition_keys:
            targets = [((), "", table_dir)]
        else:
            parts = [
                (tuple(p.values), p.name, table_filesystem(p.location)[1])
                for p in self.metastore.list_partitions(self.table.full_name)
            ]
            targets = select_partitions(self.table.partition_keys, parts, self.partition_filter)
        # on an object store, one listing of the table (of each partition chosen, under a filter) answers the
        # planner; a plan made again below lists afresh
        roots = [table_dir] if self.partition_filter is None else [location for _, _, location in targets]
        listed = listed_once(fs, roots)
        planned = {
            name: plan_partition(listed, location, self.write_ids, self.txns, values, name)
            for values, name, location in targets
        }
        assert self._registration is not None
        ignored: dict[str, frozenset[str]] = {}
        while True:  # until no compaction may have moved output in while a partition was listed
            found = self._registration.ignored_outputs(planned.keys())
            if found == ignored:
                break
            ignored = {k: found.get(k, frozenset()) | ignored.get(k, frozenset()) for k in {*found, *ignored}}
            for values, name, location in targets:
                if name in found:
                    planned[name] = plan_partition(
                        fs, location, self.write_ids, self.txns, values, name, ignore=ignored[name]
                    )
        for part_tasks, state in planned.values():
            tasks.extend(part_tasks)
            if state is not None:
                obsolete.extend(state.obsolete)
        return ScanPlan(
            self.table.full_name,
            tuple(self.table.columns),
            tuple(self.table.partition_keys),
            self.write_ids,
            tuple(tasks),
            tuple(obsolete),
            self._registration.reader_id,
        )

    def _readers(self) -> Iterator[BucketReader]:
        """One reader per planned bucket task, in plan order."""
        plan = self.plan_files()
        return bucket_readers(
            self.table,
            plan.tasks,
            plan.write_ids,
            self.schema,
            with_row_id=self.with_row_id,
            batch_rows=self.batch_rows,
            filter_expr=self.filter,
            filter_fields=self.filter_fields,
        )

    def _reader_batches(self) -> Generator[tuple[BucketReader, pa.RecordBatch]]:
        """Each bucket's batches with their reader, in plan order; buckets read side by side in up to
        ``read_threads`` threads (see ``read.threads``). Closing it stops the threads."""
        readers = list(self._readers())
        total = sum(r.read_bytes for r in readers)
        if self.read_threads > 1 and readers and total / len(readers) >= THREADED_MIN_BYTES:
            part_bytes = max(THREADED_MIN_BYTES, total // (self.read_threads * _PARTS_PER_THREAD))
            parts = [part for reader in readers for part in reader.split(part_bytes)]
            if len(parts) > 1:
                sources = [functools.partial(_tagged, part) for part in parts]
                yield from in_order(sources, self.read_threads, section=_SHORT_SWITCH)
                return
        for reader in readers:
            for batch in reader.batches():
                yield reader, batch

    def _batches(self) -> Iterator[pa.RecordBatch]:
        tagged = self._reader_batches()
        try:
            yield from each_in(_SHORT_SWITCH, (batch for _, batch in tagged))
        finally:
            tagged.close()  # no thread reads on once the registration is released
            self.close()

    def partition_batches(self) -> Iterator[tuple[tuple[str | None, ...], pa.RecordBatch]]:
        """The batches of :meth:`to_batches`, each with its rows' partition values as the metastore names
        them (strings; ``()`` for an unpartitioned table): what a writer of mutations of those rows needs to
        find their directory, where typed values may not print back to the same name."""
        tagged = self._reader_batches()
        try:
            yield from each_in(_SHORT_SWITCH, ((r.task.partition_values, b) for r, b in tagged))
        finally:
            tagged.close()
            self.close()

    def to_batches(self) -> pa.RecordBatchReader:
        """A streaming reader of batches of at most ``batch_rows`` rows: memory stays bounded by one
        bucket's delete keys plus one stripe, whatever the table's size."""
        return pa.RecordBatchReader.from_batches(self.schema, self._batches())

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_batches(list(self._batches()), schema=self.schema)

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame; pandas is the ``pandas`` extra."""
        try:
            import pandas  # noqa: F401  (pyarrow's own error would not say how to get it)
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(
                "TableScan.to_pandas needs pandas: pip install 'acidstream[pandas]'", name="pandas"
            ) from exc
        return self.to_arrow().to_pandas()

    def count(self) -> int:
        """Visible rows; without a filter only the ACID columns needed for visibility are decoded."""
        try:
            with _SHORT_SWITCH:
                return sum(reader.count() for reader in self._readers())
        finally:
            self.close()


def bucket_readers(
    table: TableDefinition,
    tasks: Iterable[BucketTask],
    write_ids: ValidWriteIdList,
    schema: pa.Schema,
    *,
    with_row_id: bool,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    filter_expr: pc.Expression | None = None,
    filter_fields: Sequence[pa.Field] = (),
) -> Iterator[BucketReader]:
    """A reader of each bucket task at ``write_ids``, yielding ``schema``'s columns: a scan's, or a worker's
    given some tasks of a plan made elsewhere (a bucket of a Spark merge). On an object store their files
    are fetched ahead, several at a time (:mod:`acidstream.read.prefetch`)."""
    tasks = list(tasks)
    fs = prefetching(table_filesystem(table.location)[0], task_files(tasks))
    data_fields = [c.name for c in table.columns]
    wanted = set(schema.names) | {f.name for f in filter_fields}
    part_names = [k.name for k in table.partition_keys if k.name in wanted]
    typed_cache: dict[tuple[str | None, ...], dict[str, pa.Scalar]] = {}
    for task in tasks:
        scalars = typed_cache.get(task.partition_values)
        if scalars is None:
            typed = partition_value_table(table.partition_keys, [task.partition_values])
            scalars = {n: typed.column(n)[0] for n in part_names}
            typed_cache[task.partition_values] = scalars
        yield BucketReader(
            fs,
            task,
            write_ids,
            data_fields=data_fields,
            partition_arrays=scalars,
            output_schema=schema,
            with_row_id=with_row_id,
            filter_expr=filter_expr,
            batch_rows=batch_rows,
            filter_fields=filter_fields,
            char_widths={c.name: c.type.length for c in table.columns if c.type.name == "char"},
            text_lengths={c.name: n for c in table.columns if (n := text_length(c)) is not None},
        )


def _tagged(reader: BucketReader) -> Iterator[tuple[BucketReader, pa.RecordBatch]]:
    return ((reader, batch) for batch in reader.batches())


def filter_only_fields(
    all_fields: pa.Schema, output: pa.Schema, expr: pc.Expression | None
) -> tuple[pa.Field, ...]:
    """Columns ``expr`` references that ``output`` lacks: the scan reads them for the filter, then drops them.

    pyarrow exposes no field list for an expression, so each candidate is tested by binding ``expr`` to an
    empty table without it. A reference to a column the table does not have raises here, before any read.
    """
    if expr is None:
        return ()
    try:
        all_fields.empty_table().filter(expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError) as exc:
        raise InvalidObjectException(f"filter {expr} does not apply to the table's columns: {exc}") from None
    needed = []
    for f in all_fields:
        if f.name in output.names:
            continue
        without = pa.schema([g for g in all_fields if g.name != f.name])
        try:
            without.empty_table().filter(expr)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError):
            needed.append(f)
    return tuple(needed)
