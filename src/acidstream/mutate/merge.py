"""Merge, update and delete by key on any transactional table: one txn each, Hive's mutation files underneath.

Each operation locks the table (shared-write), reads the rows it needs with their ROW__IDs at the txn's own
snapshot, computes the mutations in Arrow (a hash join on the keys for merge), and writes them through one
:class:`MutatorCoordinator` in the Mutation API's order. Conflicts are detected per partition: a concurrent
update or delete of the same partition committed first makes the commit raise ``WriteConflictException``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.tabular import as_table
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.errors import AcidStreamError, InvalidObjectException, SerializationError
from acidstream.metastore.backend import Capability
from acidstream.metastore.identity import client_identity
from acidstream.metastore.models import LockComponent, LockLevel, LockType, OperationType
from acidstream.metastore.probe import MetastoreProbe
from acidstream.mutate.apply import UPDATE
from acidstream.mutate.bucket_merge import BucketMerge, splits_by_bucket
from acidstream.mutate.changes import (
    PART,
    Changes,
    KnownPartitions,
    MatchedAction,
    MergeActions,
    PartitionValues,
    cast_column,
    known_partitions,
    with_op,
)
from acidstream.mutate.client import table_write
from acidstream.mutate.coordinator import MutatorCoordinator
from acidstream.mutate.forked import TxnProbe, merge_forked, merge_workers
from acidstream.mutate.matching import Progress, match_keys, partition_coded, rows_at, write_changes
from acidstream.mutate.record_id import ROW_ID
from acidstream.mutate.table import AcidTable, MutationSummary, TableType
from acidstream.read.scan import TableScan
from acidstream.storage import check_location
from acidstream.txn import MetastoreTxn, TxnHeartbeat

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade, TableHandle

log = logging.getLogger(__name__)

#: How often a mutation that lost its turn to a conflicting commit queues again in a new txn (when the metastore
#: cannot hand its lock over to a new txn).
REOPEN_ATTEMPTS = 5


def merge(
    metastore: MetastoreFacade,
    table_name: str,
    source: Any,
    on: Sequence[str],
    *,
    when_matched: MatchedAction = "update",
    when_not_matched: Literal["insert"] | None = "insert",
    when_not_matched_by_source: Literal["delete"] | None = None,
    progress: Progress | None = None,
    workers: int | None = None,
) -> dict[str, int]:
    """Apply ``source`` (Arrow table or pandas frame) to the table, matching rows on the ``on`` columns.

    Matched target rows are updated with the source's columns (columns the source lacks keep their value) or
    deleted; source rows matching nothing are inserted; target rows no source row matches are deleted if
    asked. Null keys never match. Two source rows of one key are an error, whether the key matches or not.
    Returns the number of rows inserted, updated and deleted. ``progress`` is told each step as it starts.

    ``workers``: processes merging side by side (None: one per core for a table of 16 MiB or more). They are
    used where matches stay within buckets (the table bucketed on key columns, unmatched target rows kept) on a
    local filesystem: see :mod:`acidstream.mutate.forked`. ``workers=1`` merges in this process only; None uses
    workers only once the process's fork server has started (the first such merge starts it).
    """
    actions = MergeActions(when_matched, when_not_matched, when_not_matched_by_source)
    with TableMutation(metastore, table_name, progress) as m:
        src = m.changes.align_source(as_table(source), on)
        columns = m.changes.target_columns(src.column_names, on, actions)
        with m.scan(columns) as scan:  # registered as a reader until every worker has read
            if splits_by_bucket(m.changes.table, on, actions) and workers != 1:
                split = m.bucket_merge(scan, actions, on, columns)  # read below if it stays in this process
                count = merge_workers(workers, split, m.table.location)
                if count > 1:
                    m.progress(f"merging {m.table.full_name} in {count} processes")
                    txn = TxnProbe(MetastoreProbe.of(metastore), m.txn_id)
                    summaries = merge_forked(split, m.acid_table, src, count, m.coordinator(), txn)
                    return m.commit(summaries)
            target, parts = m.read_scanned(scan)
        t_idx, s_idx = match_keys(target, src, on)
        if actions.when_not_matched_by_source is None:  # only matched target rows matter: keep just those
            target, t_idx = rows_at(target, t_idx), np.arange(len(t_idx))
        else:
            target = target.combine_chunks()
        m.write(m.changes.merge(target, parts, src, t_idx, s_idx, actions, m.known_partitions), parts)
        return m.commit()


def delete(
    metastore: MetastoreFacade, table_name: str, filter: pc.Expression | None = None
) -> dict[str, int]:
    """Delete the rows matching ``filter`` (an Arrow expression over any columns, partition keys included;
    None: every row). Returns the counts."""
    with TableMutation(metastore, table_name) as m:
        target, parts = m.read_target([], filter)
        m.write([m.changes.marked(target)] if target.num_rows else [], parts)
        return m.commit()


def update(
    metastore: MetastoreFacade, table_name: str, filter: pc.Expression | None, set: Mapping[str, Any]
) -> dict[str, int]:
    """Set columns of the rows matching ``filter``: each value is a constant or an Arrow expression over the
    row's columns (``pc.field("balance") - 10``). Partition and bucketed columns cannot change: rows never move.
    """
    with TableMutation(metastore, table_name) as m:
        changes = m.changes.check_assignments(set)
        data = [c.name for c in m.table.columns]
        keys = [k.name for k in m.table.partition_keys]
        target, parts = m.read_target([*data, *keys], filter)
        if target.num_rows:
            columns = {c: target.column(c) for c in data}
            for name, value in changes.items():
                columns[name] = evaluate_assignment(value, target, m.changes.column_type(name), name)
            rows = pa.table({ROW_ID: target.column(ROW_ID), **columns, PART: target.column(PART)})
            m.write([with_op(rows, UPDATE)], parts)
        return m.commit()


class TableMutation:
    """One table's mutation txn: locks, its snapshot, the commit (or abort on error); in-process writes go
    through one coordinator (statement 0), writers elsewhere (Spark tasks) hand their summaries to :meth:`commit`."""

    def __init__(self, metastore: MetastoreFacade, table_name: str, progress: Progress | None = None) -> None:
        self.metastore = metastore
        self.progress: Progress = progress or (lambda step: None)
        self.table: TableHandle = metastore.table(table_name)
        if not self.table.is_transactional:
            raise InvalidObjectException(
                f"{self.table.full_name} is not a full-ACID table: it cannot be mutated"
            )
        self.changes = Changes(self.table.definition())
        self._txn: MetastoreTxn | None = None
        self._heartbeat: TxnHeartbeat | None = None
        self._acid: AcidTable | None = None
        self._coordinator: MutatorCoordinator | None = None
        self._known: KnownPartitions | None = None
        #: Partitions the metastore had at this txn's start (read from, or listed): the commit need not add them.
        self._existing: set[PartitionValues] = set()

    def __enter__(self) -> TableMutation:
        txn = self._txn = self._locked_txn()
        name = self.table.full_name
        try:
            txn.begin()
            txn.snapshot()  # after the lock: rows committed by the txn we waited for are read
            self._heartbeat = TxnHeartbeat(
                self.metastore, lambda: [txn], name=f"acidstream-mutation-{txn.txn_id}"
            )
            self._heartbeat.start()
            self._acid = AcidTable(
                self.table.db,
                self.table.name,
                TableType.SINK,
                definition=self.changes.table,
                txn_id=txn.txn_id,
                write_id=txn.write_id(name),
            )
        except BaseException:
            self._end()
            raise
        return self

    def _locked_txn(self) -> MetastoreTxn:
        """A txn holding the table's shared-write lock whose commit no txn that committed meanwhile dooms.

        Writers of a table take turns through that lock. One that waited for it would lose its commit to the
        writer it waited for (first committer wins: that writer committed after this txn started), although it
        reads after it. So, as Hive 4 re-plans a statement whose snapshot went stale while it waited, it goes
        on in a new txn that inherits the lock (and so its turn); the statement has read and written nothing yet.
        A backend that cannot hand a lock over (a Hive Metastore) gets a new txn that queues again, up to
        ``REOPEN_ATTEMPTS`` times.
        """
        check_location(self.table.location)  # before the txn: a missing bucket is said at once
        user, host = client_identity()
        name = self.table.full_name
        agent_info = f"acidstream-mutation:{user}@{host}"
        lock = LockComponent(
            LockType.SHARED_WRITE,
            LockLevel.TABLE,
            self.table.db,
            self.table.name,
            operation=OperationType.UPDATE,
            is_dynamic_partition_write=True,  # components per partition, from what is written
        )
        for attempt in range(REOPEN_ATTEMPTS + 1):
            txn = MetastoreTxn.open(self.metastore, [name], agent_info=agent_info)
            try:
                txn.lock([lock])
                if attempt == REOPEN_ATTEMPTS:  # still losing to other writers: the commit's check decides
                    return txn
                winner = self.metastore.get_latest_txnid_in_conflict(txn.txn_id, name)
                if not winner:
                    return txn
                if not self.metastore.supports(Capability.TXN_REPLACEMENT):
                    log.info(
                        "%s: txnid:%d committed while txnid:%d waited: reopening", name, winner, txn.txn_id
                    )
                    txn.abort()  # queue again in a new txn, as Hive 4 re-executes a statement gone stale
                    continue
                txn_id, write_id = self.metastore.replace_txn(txn.txn_id, name, agent_info=agent_info)
            except BaseException:
                with contextlib.suppress(AcidStreamError):
                    txn.abort()
                raise
            log.info(
                "%s: txnid:%d committed while txnid:%d waited: going on as txnid:%d",
                name,
                winner,
                txn.txn_id,
                txn_id,
            )
            return MetastoreTxn(self.metastore, txn_id, agent_info=agent_info, write_ids={name: write_id})
        raise AssertionError("the last attempt returns")

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._end()

    def _end(self) -> None:
        """Abort unless committed; stop heartbeats."""
        if self._heartbeat is not None:
            self._heartbeat.stop()
        if self._coordinator is not None:
            self._coordinator.abort()
        if self._txn is not None:
            with contextlib.suppress(AcidStreamError):  # the error that brought us here matters more
                self._txn.abort()

    @property
    def acid_table(self) -> AcidTable:
        """The table with the txn's write id: what coordinators (here or on workers) write with."""
        assert self._acid is not None, "enter the TableMutation first"
        return self._acid

    @property
    def txn_id(self) -> int:
        assert self._txn is not None, "enter the TableMutation first"
        return self._txn.txn_id

    @property
    def snapshot(self) -> ValidTxnList:
        assert self._txn is not None
        return self._txn.snapshot()

    def valid_write_ids(self) -> ValidWriteIdList:
        """The table's write ids at the txn's snapshot (what a reader elsewhere reads the target at)."""
        assert self._txn is not None
        return self._txn.valid_write_ids(self.table.full_name)

    def known_partitions(self) -> KnownPartitions:
        """The table's partitions by typed values (listed once per txn)."""
        if self._known is None:
            existing = [tuple(p.values) for p in self.metastore.list_partitions(self.table.full_name)]
            self._existing.update(existing)
            self._known = known_partitions(self.table, existing)
        return self._known

    def inserted_partitions(self, actions: MergeActions) -> KnownPartitions:
        """What a merge's inserts check their partitions against: the table's partitions if it inserts (listed
        now), else none."""
        return self.known_partitions() if actions.when_not_matched == "insert" else {}

    def bucket_merge(
        self, scan: TableScan, actions: MergeActions, keys: Sequence[str], columns: Sequence[str]
    ) -> BucketMerge:
        """The plan of a merge split by bucket over ``scan``'s files (planned here, once: reading ``scan``
        afterwards reads the same files)."""
        plan = scan.plan_files()
        return BucketMerge(
            self.changes,
            actions,
            tuple(keys),
            tuple(columns),
            plan.write_ids,
            plan.tasks,
            self.inserted_partitions(actions),
        )

    # --- reading ----------------------------------------------------------------------------------------------

    def scan(self, columns: Sequence[str], filter: pc.Expression | None = None) -> TableScan:
        return TableScan(
            self.metastore,
            self.table,
            columns=columns,
            filter=filter,
            with_row_id=True,
            snapshot=self.snapshot,
        )

    def read_target(
        self, columns: Sequence[str], filter: pc.Expression | None = None
    ) -> tuple[pa.Table, list[PartitionValues]]:
        """ROW__ID and ``columns`` of the rows at the txn's snapshot, with ``__part``: the index of each
        row's partition (its values as the metastore names them) in the returned list."""
        return self.read_scanned(self.scan(columns, filter))

    def read_scanned(self, scan: TableScan) -> tuple[pa.Table, list[PartitionValues]]:
        """:meth:`read_target` of a scan made with :meth:`scan` (planned already or not)."""
        self.progress(f"reading {self.table.full_name}")

        def counted() -> Iterator[tuple[PartitionValues, pa.RecordBatch]]:
            rows = 0
            for values, batch in scan.partition_batches():
                rows += batch.num_rows
                self.progress(f"reading {self.table.full_name}: {rows:,} rows")
                yield values, batch

        target, parts = partition_coded(counted(), scan.schema)
        self._existing.update(parts)
        return target, parts

    # --- writing and committing -----------------------------------------------------------------------------

    with_op = staticmethod(with_op)

    def coordinator(self) -> MutatorCoordinator:
        """This process's coordinator (statement 0), made on first use; :meth:`commit` closes it."""
        if self._coordinator is None:
            self._coordinator = MutatorCoordinator(
                self.acid_table, metastore=self.metastore, statement_id=0, check_buckets=False
            )
        return self._coordinator

    def write(self, pieces: Sequence[pa.Table], parts: list[PartitionValues]) -> None:
        """Every mutation, partition by partition, through this process's coordinator."""
        if pieces:
            write_changes(self.coordinator(), pieces, parts, self.progress)

    def commit(self, summaries: Sequence[MutationSummary] = ()) -> dict[str, int]:
        """Commit what this process's coordinator and the given ``summaries`` (coordinators elsewhere, with
        their own statement ids) wrote; returns the counts."""
        assert self._txn is not None
        self.progress("committing")
        mine = [self._coordinator.close()] if self._coordinator is not None else []
        every = [*mine, *summaries]
        write = table_write(self.metastore, self.acid_table, every, existing=self._existing)
        self._txn.commit(writes=[write] if write is not None else ())
        return {
            "inserted": sum(s.inserted for s in every),
            "updated": sum(s.updated for s in every),
            "deleted": sum(s.deleted for s in every),
        }


def evaluate_assignment(value: Any, rows: pa.Table, target: pa.DataType, name: str) -> pa.ChunkedArray:
    """A SET value for every row: an Arrow expression evaluated over the rows, or a constant."""
    if isinstance(value, pc.Expression):
        import pyarrow.dataset as ds

        result = ds.dataset(rows).to_table(columns={name: value}).column(name)
    else:
        try:
            result = (
                pa.chunked_array([pa.array([value] * rows.num_rows)])
                if rows.num_rows
                else pa.chunked_array([], target)
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise SerializationError(f"cannot use {value!r} for {name}: {exc}", field=name) from exc
    return cast_column(result, target, name)
