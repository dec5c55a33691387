"""Merge, update and delete by key on any transactional table: one txn each, Hive's mutation files underneath.

Each operation locks the table (shared-write), reads the rows it needs with their ROW__IDs at the txn's own
snapshot, computes the mutations in Arrow (a hash join on the keys for merge), and writes them through one
:class:`MutatorCoordinator` in the seed's order. Conflicts are detected per partition: a concurrent
update or delete of the same partition committed first makes the commit raise ``WriteConflictException``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.tabular import as_table
from acidstream.acid.writeids import ValidTxnList
from acidstream.errors import InvalidObjectException, SerializationError, StreamingException
from acidstream.metastore.identity import client_identity
from acidstream.metastore.models import LockComponent, LockLevel, LockType, OperationType
from acidstream.mutate.apply import DELETE, INSERT, OP, UPDATE, apply_mutations
from acidstream.mutate.bucket_id import BucketIdResolver
from acidstream.mutate.client import table_write
from acidstream.mutate.coordinator import MutatorCoordinator
from acidstream.mutate.record_id import ROW_ID
from acidstream.mutate.table import AcidTable, MutationSummary, TableType, plain_definition
from acidstream.read.planning import partition_value_table
from acidstream.txn import Transaction, TxnHeartbeat

if TYPE_CHECKING:
    from acidstream.catalog import Metastore, Table
    from acidstream.read.scan import TableScan

MatchedAction = Literal["update", "delete"] | None
#: Told each step of a mutation as it starts ("reading db.t", "writing ...", "committing"), for a progress display.
Progress = Callable[[str], None]
PartitionValues = tuple[str | None, ...]


def merge(
    metastore: Metastore,
    table_name: str,
    source: Any,
    on: Sequence[str],
    *,
    when_matched: MatchedAction = "update",
    when_not_matched: Literal["insert"] | None = "insert",
    when_not_matched_by_source: Literal["delete"] | None = None,
    progress: Progress | None = None,
) -> dict[str, int]:
    """Apply ``source`` (Arrow table or pandas frame) to the table, matching rows on the ``on`` columns.

    Matched target rows are updated with the source's columns (columns the source lacks keep their value) or
    deleted; source rows matching nothing are inserted; target rows no source row matches are deleted if
    asked. Null keys never match. Two source rows matching one target row is an error, as in SQL's MERGE.
    Returns the number of rows inserted, updated and deleted. ``progress`` is told each step as it starts.
    """
    _check_choice("when_matched", when_matched, ("update", "delete", None))
    _check_choice("when_not_matched", when_not_matched, ("insert", None))
    _check_choice("when_not_matched_by_source", when_not_matched_by_source, ("delete", None))
    with TableMutation(metastore, table_name, progress) as m:
        src = m.align_source(as_table(source), on)
        missing = [c.name for c in m.table.columns if c.name not in src.column_names]
        extra = missing if when_matched == "update" else []
        target, parts = m.read_target([*dict.fromkeys([*on, *extra])])
        t_idx, s_idx = _match(target, src, on)
        n_target, n_source = target.num_rows, src.num_rows
        pieces: list[pa.Table] = []
        if when_matched == "update" and len(t_idx):
            pieces.append(m.updates(target, parts, src, t_idx, s_idx))
        elif when_matched == "delete" and len(t_idx):
            pieces.append(m.deletes(target.take(pa.array(t_idx))))
        if when_not_matched == "insert":
            inserted = np.setdiff1d(np.arange(n_source), s_idx, assume_unique=False)
            if len(inserted):
                pieces.append(m.inserts(src.take(pa.array(inserted)), parts))
        if when_not_matched_by_source == "delete":
            orphans = np.setdiff1d(np.arange(n_target), t_idx, assume_unique=False)
            if len(orphans):
                pieces.append(m.deletes(target.take(pa.array(orphans))))
        m.write(pieces, parts)
        return m.commit()


def delete(metastore: Metastore, table_name: str, filter: pc.Expression | None = None) -> dict[str, int]:
    """Delete the rows matching ``filter`` (an Arrow expression over any columns, partition keys included;
    None: every row). Returns the counts."""
    with TableMutation(metastore, table_name) as m:
        target, parts = m.read_target([], filter)
        m.write([m.deletes(target)] if target.num_rows else [], parts)
        return m.commit()


def update(
    metastore: Metastore, table_name: str, filter: pc.Expression | None, set: Mapping[str, Any]
) -> dict[str, int]:
    """Set columns of the rows matching ``filter``: each value is a constant or an Arrow expression over the
    row's columns (``pc.field("balance") - 10``). Partition and bucketed columns cannot change: rows never move.
    """
    with TableMutation(metastore, table_name) as m:
        changes = m.check_assignments(set)
        data = [c.name for c in m.table.columns]
        keys = [k.name for k in m.table.partition_keys]
        target, parts = m.read_target([*data, *keys], filter)
        if target.num_rows:
            columns = {c: target.column(c) for c in data}
            for name, value in changes.items():
                columns[name] = evaluate_assignment(value, target, m.column_type(name), name)
            rows = pa.table({ROW_ID: target.column(ROW_ID), **columns, "__part": target.column("__part")})
            m.write([m.with_op(rows, UPDATE)], parts)
        return m.commit()


class TableMutation:
    """One table's mutation txn: locks, its snapshot, one coordinator, the commit (or abort on error)."""

    def __init__(self, metastore: Metastore, table_name: str, progress: Progress | None = None) -> None:
        self.metastore = metastore
        self._progress: Progress = progress or (lambda step: None)
        self.table: Table = metastore.table(table_name)
        if not self.table.is_transactional:
            raise InvalidObjectException(
                f"{self.table.full_name} is not a full-ACID table: it cannot be mutated"
            )
        self._txn: Transaction | None = None
        self._heartbeat: TxnHeartbeat | None = None
        self._coordinator: MutatorCoordinator | None = None
        self._resolver = BucketIdResolver(self.table)

    def __enter__(self) -> TableMutation:
        user, host = client_identity()
        name = self.table.full_name
        txn = self._txn = Transaction.open(
            self.metastore, [name], agent_info=f"acidstream-mutation:{user}@{host}"
        )
        try:
            txn.lock(
                [
                    LockComponent(
                        LockType.SHARED_WRITE,
                        LockLevel.TABLE,
                        self.table.db,
                        self.table.name,
                        operation=OperationType.UPDATE,
                        is_dynamic_partition_write=True,  # components per partition, from what is written
                    )
                ]
            )
            txn.begin()
            txn.snapshot()  # after the lock: rows committed by the txn we waited for are read
            self._heartbeat = TxnHeartbeat(
                self.metastore, lambda: [txn], name=f"acidstream-mutation-{txn.txn_id}"
            )
            self._heartbeat.start()
            acid = AcidTable(
                self.table.db,
                self.table.name,
                TableType.SINK,
                definition=plain_definition(self.table),
                txn_id=txn.txn_id,
                write_id=txn.write_id(name),
            )
            self._coordinator = MutatorCoordinator(acid, metastore=self.metastore, statement_id=0)
        except BaseException:
            self._end()
            raise
        return self

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
            with contextlib.suppress(StreamingException):  # the error that brought us here matters more
                self._txn.abort()

    @property
    def snapshot(self) -> ValidTxnList:
        assert self._txn is not None
        return self._txn.snapshot()

    # --- reading ----------------------------------------------------------------------------------------------

    def scan(self, columns: Sequence[str], filter: pc.Expression | None = None) -> TableScan:
        return self.table.scan(columns=columns, filter=filter, with_row_id=True, snapshot=self.snapshot)

    def read_target(
        self, columns: Sequence[str], filter: pc.Expression | None = None
    ) -> tuple[pa.Table, list[PartitionValues]]:
        """ROW__ID and ``columns`` of the rows at the txn's snapshot, with ``__part``: the index of each
        row's partition (its values as the metastore names them) in the returned list."""
        parts: dict[PartitionValues, int] = {}
        batches = []
        scan = self.scan(columns, filter)
        rows = 0
        self._progress(f"reading {self.table.full_name}")
        for values, batch in scan.partition_batches():
            code = parts.setdefault(values, len(parts))
            batches.append(
                batch.append_column("__part", pa.array(np.full(batch.num_rows, code, dtype=np.int32)))
            )
            rows += batch.num_rows
            self._progress(f"reading {self.table.full_name}: {rows:,} rows")
        schema = scan.schema.append(pa.field("__part", pa.int32()))
        return pa.Table.from_batches(batches, schema=schema), list(parts)

    # --- mutations ------------------------------------------------------------------------------------------

    def align_source(self, source: pa.Table, on: Sequence[str]) -> pa.Table:
        """Source columns renamed to the table's (case-insensitive) and cast to its types; unknown columns and
        keys are refused, naming them."""
        types = {c.name: c.type.to_arrow() for c in (*self.table.columns, *self.table.partition_keys)}
        lowered = [str(n).lower() for n in source.column_names]
        unknown = [n for n in lowered if n not in types]
        if unknown:
            raise SerializationError(
                f"source columns {unknown} are not in {self.table.full_name}", field=unknown[0]
            )
        if len(set(lowered)) != len(lowered):
            raise SerializationError("source has duplicate column names (names are case-insensitive)")
        bad_keys = [k for k in on if k.lower() not in lowered]
        if not on or bad_keys:
            raise SerializationError(
                f"merge keys {list(on)} must be source columns", field=(bad_keys or [""])[0]
            )
        source = source.rename_columns(lowered)
        return pa.table({n: _cast(source.column(n), types[n], n) for n in lowered})

    def updates(
        self,
        target: pa.Table,
        parts: list[PartitionValues],
        source: pa.Table,
        t_idx: npt.NDArray[np.int64],
        s_idx: npt.NDArray[np.int64],
    ) -> pa.Table:
        """New versions of matched rows: source values, target values for columns the source lacks."""
        t_take, s_take = pa.array(t_idx), pa.array(s_idx)
        part_codes = target.column("__part").take(t_take)
        self._check_same_partition(part_codes, parts, source, s_take)
        columns = {
            c.name: (source if c.name in source.column_names else target)
            .column(c.name)
            .take(s_take if c.name in source.column_names else t_take)
            for c in self.table.columns
        }
        rows = pa.table({ROW_ID: target.column(ROW_ID).take(t_take), **columns, "__part": part_codes})
        return self.with_op(rows, UPDATE)

    def deletes(self, target: pa.Table) -> pa.Table:
        nulls = {c.name: pa.nulls(target.num_rows, c.type.to_arrow()) for c in self.table.columns}
        rows = pa.table({ROW_ID: target.column(ROW_ID), **nulls, "__part": target.column("__part")})
        return self.with_op(rows, DELETE)

    def inserts(self, source: pa.Table, parts: list[PartitionValues]) -> pa.Table:
        """New rows with their bucket attached and their partition (from the source's partition columns)."""
        n = source.num_rows
        columns = {
            c.name: source.column(c.name) if c.name in source.column_names else pa.nulls(n, c.type.to_arrow())
            for c in self.table.columns
        }
        codes = self._insert_partitions(source, parts)
        rows = self._resolver.attach_batch(pa.table(columns))
        rows = pa.table({ROW_ID: rows.column(ROW_ID), **columns, "__part": pa.array(codes)})
        return self.with_op(rows, INSERT)

    def with_op(self, rows: pa.Table, op: int) -> pa.Table:
        return rows.append_column(OP, pa.array(np.full(rows.num_rows, op, dtype=np.int8)))

    def check_assignments(self, assignments: Mapping[str, Any]) -> dict[str, Any]:
        names = {c.name for c in self.table.columns}
        keys = {k.name for k in self.table.partition_keys}
        bucketed = set(self.table.bucket_columns)
        checked = {}
        for name, value in assignments.items():
            col = name.lower()
            if col in keys:
                raise InvalidObjectException(f"{col} is a partition key: rows never move between partitions")
            if col in bucketed:
                raise InvalidObjectException(f"{col} is a bucketed column: rows never move between buckets")
            if col not in names:
                raise InvalidObjectException(f"{self.table.full_name} has no column {name!r}")
            checked[col] = value
        if not checked:
            raise InvalidObjectException("update needs at least one column to set")
        return checked

    def column_type(self, name: str) -> pa.DataType:
        return next(c.type.to_arrow() for c in self.table.columns if c.name == name)

    def write(self, pieces: Sequence[pa.Table], parts: list[PartitionValues]) -> None:
        """Every mutation, partition by partition, through the coordinator."""
        if not pieces:
            return
        assert self._coordinator is not None
        schema = pieces[0].schema
        mutations = pa.concat_tables([p.cast(schema) for p in pieces])
        codes = mutations.column("__part").to_numpy()
        order = np.argsort(codes, kind="stable")
        mutations, codes = mutations.take(pa.array(order)).drop_columns(["__part"]), codes[order]
        starts = np.concatenate([[0], np.flatnonzero(np.diff(codes)) + 1, [len(codes)]])
        for start, end in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True):
            self._progress(f"writing changes: {start:,} of {len(codes):,}")
            apply_mutations(self._coordinator, parts[int(codes[start])], mutations.slice(start, end - start))

    def commit(self) -> dict[str, int]:
        assert self._txn is not None and self._coordinator is not None
        summary: MutationSummary = self._coordinator.close()
        self._progress("committing")
        write = table_write(self.metastore, self._coordinator.table, [summary])
        self._txn.commit(writes=[write] if write is not None else ())
        return {"inserted": summary.inserted, "updated": summary.updated, "deleted": summary.deleted}

    # --- partitions -----------------------------------------------------------------------------------------

    def _check_same_partition(
        self, codes: pa.Array, parts: list[PartitionValues], source: pa.Table, s_take: pa.Array
    ) -> None:
        """A matched source row that names another partition than its target row's would move the row."""
        keys = [k for k in self.table.partition_keys if k.name in source.column_names]
        if not keys:
            return
        typed = partition_value_table(self.table.partition_keys, parts)
        for key in keys:
            target_values = typed.column(key.name).take(codes)
            source_values = source.column(key.name).take(s_take)
            same = pc.fill_null(pc.equal(target_values, source_values), False)
            both_null = pc.and_(pc.is_null(target_values), pc.is_null(source_values))
            moved = pc.invert(pc.or_(same, both_null))
            if pc.any(moved).as_py():
                i = pc.index(moved, True).as_py()
                raise InvalidObjectException(
                    f"merge would move a row from {key.name}={target_values[i]} to {source_values[i]}: "
                    "rows never move between partitions (delete and insert it instead)"
                )

    def _insert_partitions(self, source: pa.Table, parts: list[PartitionValues]) -> npt.NDArray[np.int32]:
        """Each new row's partition code in ``parts`` (extended with new partitions)."""
        keys = self.table.partition_keys
        if not keys:
            return np.full(source.num_rows, _add(parts, ()), dtype=np.int32)
        absent = [k.name for k in keys if k.name not in source.column_names]
        if absent:
            raise SerializationError(f"inserted rows need the partition columns {absent}", field=absent[0])
        codes, distinct = _distinct_rows(source.select([k.name for k in keys]))
        known = self._known_partitions()
        mapping = np.array(
            [_add(parts, known.get(row) or _partition_text(row, keys)) for row in distinct], dtype=np.int32
        )
        return mapping[codes]

    def _known_partitions(self) -> dict[tuple[Any, ...], PartitionValues]:
        """The table's partitions by typed values, so a source value finds its partition's exact name."""
        existing = [tuple(p.values) for p in self.metastore.list_partitions(self.table.full_name)]
        typed = partition_value_table(self.table.partition_keys, existing).to_pylist()
        return {tuple(row.values()): values for row, values in zip(typed, existing, strict=True)}


def _add(parts: list[PartitionValues], values: PartitionValues) -> int:
    if values in parts:
        return parts.index(values)
    parts.append(values)
    return len(parts) - 1


def _partition_text(row: tuple[Any, ...], keys: Sequence[Any]) -> PartitionValues:
    """A new partition's values as text (None: the default partition)."""
    out: list[str | None] = []
    for value, key in zip(row, keys, strict=True):
        if value is None:
            out.append(None)
        else:
            out.append(pa.scalar(value, key.type.to_arrow()).cast(pa.string()).as_py())
    return tuple(out)


def _distinct_rows(table: pa.Table) -> tuple[npt.NDArray[np.int64], list[tuple[Any, ...]]]:
    """(code per row, the distinct rows as tuples): one dictionary encoding per column, no per-row Python."""
    codes = np.zeros(table.num_rows, dtype=np.int64)
    dictionaries = []
    for column in table.columns:
        encoded = pc.dictionary_encode(column.combine_chunks())
        size = len(encoded.dictionary) + 1  # the last code stands for null
        codes = codes * size + pc.fill_null(encoded.indices, size - 1).to_numpy().astype(np.int64)
        dictionaries.append([*encoded.dictionary.to_pylist(), None])
    used, inverse = np.unique(codes, return_inverse=True)
    rows = []
    for code in used.tolist():
        values = []
        for dictionary in reversed(dictionaries):
            code, index = divmod(code, len(dictionary))
            values.append(dictionary[index])
        rows.append(tuple(reversed(values)))
    return inverse.astype(np.int64), rows


def _match(
    target: pa.Table, source: pa.Table, on: Sequence[str]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(target index, source index) of every matching pair; null keys never match; a target row matched by
    two source rows is an error naming the key."""
    keys = [k.lower() for k in on]

    def keyed(table: pa.Table, index: str) -> pa.Table:
        t = pa.table({**{k: table.column(k) for k in keys}, index: pa.array(np.arange(table.num_rows))})
        valid = None
        for k in keys:
            ok = pc.is_valid(t.column(k))
            valid = ok if valid is None else pc.and_(valid, ok)
        return t.filter(valid) if valid is not None else t

    joined = keyed(target, "__t").join(keyed(source, "__s"), keys=keys, join_type="inner", use_threads=True)
    t_idx = joined.column("__t").to_numpy()
    s_idx = joined.column("__s").to_numpy()
    counts = np.bincount(t_idx, minlength=target.num_rows) if len(t_idx) else np.zeros(0, dtype=np.int64)
    if len(counts) and counts.max() > 1:
        row = int(np.argmax(counts > 1))
        rows = sorted(s_idx[t_idx == row].tolist())[:2]
        key = {k: target.column(k)[row].as_py() for k in keys}
        raise InvalidObjectException(
            f"source rows {rows[0]} and {rows[1]} both match the target row with {key}: a merge updates a row "
            "at most once (deduplicate the source)"
        )
    order = np.argsort(t_idx, kind="stable")
    return t_idx[order], s_idx[order]


def _cast(column: pa.ChunkedArray, target: pa.DataType, name: str) -> pa.ChunkedArray:
    if column.type == target:
        return column
    try:
        return pc.cast(column, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SerializationError(f"cannot convert {column.type} to {target}: {exc}", field=name) from exc


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
    return _cast(result, target, name)


def _check_choice(name: str, value: object, allowed: tuple[object, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, not {value!r}")
