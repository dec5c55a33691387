"""Mutation rows computed from target rows (with their ROW__IDs) and source rows: pure Arrow, no metastore.

The Python merge runs :class:`Changes` once over whole tables; a Spark merge ships it (it pickles) to tasks that
run it over each joined batch. Either way the result is a table of mutations — ``ROW__ID``, the table's data
columns, ``__part`` (an index into a list of partition values) and ``__op`` — which
:func:`acidstream.mutate.apply.apply_mutations` orders and writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.errors import BucketIdException, InvalidObjectException, SerializationError
from acidstream.metastore.models import TableDefinition
from acidstream.mutate.apply import DELETE, INSERT, OP, UPDATE
from acidstream.mutate.bucket_id import BucketIdResolver
from acidstream.mutate.ordering import PartitionValues
from acidstream.mutate.record_id import ROW_ID
from acidstream.read.planning import partition_value_table

MatchedAction = Literal["update", "delete"] | None
#: Typed partition values (a row of ``partition_value_table``) → the partition's values as the metastore names them.
KnownPartitions = Mapping[tuple[Any, ...], PartitionValues]
#: Each mutation's partition: an index into the list of partition values that goes with the rows.
PART = "__part"


@dataclass(frozen=True)
class MergeActions:
    """What a merge does with matched rows, source rows matching nothing, and target rows matching nothing."""

    when_matched: MatchedAction = "update"
    when_not_matched: Literal["insert"] | None = "insert"
    when_not_matched_by_source: Literal["delete"] | None = None

    def __post_init__(self) -> None:
        _check_choice("when_matched", self.when_matched, ("update", "delete", None))
        _check_choice("when_not_matched", self.when_not_matched, ("insert", None))
        _check_choice("when_not_matched_by_source", self.when_not_matched_by_source, ("delete", None))


class Changes:
    """Builds one table's mutation rows; knows its definition and bucketing, nothing else."""

    def __init__(self, table: TableDefinition) -> None:
        self.table = table
        self._resolver = BucketIdResolver(table)

    # --- the source ----------------------------------------------------------------------------------------

    def source_columns(self, names: Sequence[str], on: Sequence[str]) -> list[str]:
        """The source's column names lower-cased (as the table names them); unknown or duplicate columns and
        keys the source lacks are refused, naming them."""
        known = {c.name for c in (*self.table.columns, *self.table.partition_keys)}
        lowered = [str(n).lower() for n in names]
        unknown = [n for n in lowered if n not in known]
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
        return lowered

    def align_source(self, source: pa.Table, on: Sequence[str]) -> pa.Table:
        """Source columns renamed to the table's (case-insensitive) and cast to its types."""
        lowered = self.source_columns(source.column_names, on)
        types = {c.name: c.type.to_arrow() for c in (*self.table.columns, *self.table.partition_keys)}
        source = source.rename_columns(lowered)
        return pa.table({n: cast_column(source.column(n), types[n], n) for n in lowered})

    def target_columns(
        self, source_columns: Sequence[str], on: Sequence[str], actions: MergeActions
    ) -> list[str]:
        """What a merge reads of the target besides ROW__IDs: the keys, and for updates the columns the
        source lacks (they keep their value) and the bucketed columns it has (they must keep theirs)."""
        keys = [k.lower() for k in on]
        if actions.when_matched != "update":
            return keys
        missing = [c.name for c in self.table.columns if c.name not in source_columns]
        # an update must leave bucketed columns as they are: the source's values are checked against these
        bucketed = [c for c in self.table.bucket_columns if c in source_columns]
        return [*dict.fromkeys([*keys, *missing, *bucketed])]

    # --- merge ---------------------------------------------------------------------------------------------

    def merge(
        self,
        target: pa.Table,
        parts: list[PartitionValues],
        source: pa.Table,
        t_idx: npt.NDArray[np.int64],
        s_idx: npt.NDArray[np.int64],
        actions: MergeActions,
        known_partitions: Callable[[], KnownPartitions],
    ) -> list[pa.Table]:
        """The mutations of a merge of ``source`` (aligned) into ``target`` (read with ROW__ID and ``__part``),
        given the matching pairs (``target[t_idx[i]]`` matches ``source[s_idx[i]]``); ``parts`` is extended
        with the partitions of inserted rows."""
        pieces: list[pa.Table] = []
        if actions.when_matched == "update" and len(t_idx):
            pieces.append(self.updates(target, parts, source, t_idx, s_idx))
        elif actions.when_matched == "delete" and len(t_idx):
            pieces.append(self.marked(target.take(pa.array(t_idx)), DELETE))
        if actions.when_not_matched == "insert":
            inserted = np.setdiff1d(np.arange(source.num_rows), s_idx, assume_unique=False)
            if len(inserted):
                pieces.append(self.inserts(source.take(pa.array(inserted)), parts, known_partitions()))
        if actions.when_not_matched_by_source == "delete":
            orphans = np.setdiff1d(np.arange(target.num_rows), t_idx, assume_unique=False)
            if len(orphans):
                pieces.append(self.marked(target.take(pa.array(orphans)), DELETE))
        return pieces

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
        part_codes = target.column(PART).take(t_take)
        self._check_same_partition(part_codes, parts, source, s_take)
        self._check_same_bucket(target, t_take, source, s_take)
        columns = {
            c.name: (source if c.name in source.column_names else target)
            .column(c.name)
            .take(s_take if c.name in source.column_names else t_take)
            for c in self.table.columns
        }
        rows = pa.table({ROW_ID: target.column(ROW_ID).take(t_take), **columns, PART: part_codes})
        return with_op(rows, UPDATE)

    def marked(self, target: pa.Table, op: int = DELETE) -> pa.Table:
        """Target rows as mutations ``op`` that need only their ROW__ID (deletes): the data columns the target
        rows carry are kept (they name the row in errors), the others are null."""
        n = target.num_rows
        columns = {
            c.name: target.column(c.name) if c.name in target.column_names else pa.nulls(n, c.type.to_arrow())
            for c in self.table.columns
        }
        rows = pa.table({ROW_ID: target.column(ROW_ID), **columns, PART: target.column(PART)})
        return with_op(rows, op)

    def inserts(self, source: pa.Table, parts: list[PartitionValues], known: KnownPartitions) -> pa.Table:
        """New rows with their bucket attached and their partition (from the source's partition columns)."""
        n = source.num_rows
        columns = {
            c.name: source.column(c.name) if c.name in source.column_names else pa.nulls(n, c.type.to_arrow())
            for c in self.table.columns
        }
        codes = self._insert_partitions(source, parts, known)
        rows = self._resolver.attach_batch(pa.table(columns))
        rows = pa.table({ROW_ID: rows.column(ROW_ID), **columns, PART: pa.array(codes)})
        return with_op(rows, INSERT)

    # --- update --------------------------------------------------------------------------------------------

    def check_assignments(self, assignments: Mapping[str, Any]) -> dict[str, Any]:
        """``set={column: value}`` with lower-cased names; partition keys and bucketed columns are refused:
        rows never move."""
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

    # --- partitions ----------------------------------------------------------------------------------------

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
            i = _first_change(target_values, source_values)
            if i is not None:
                raise InvalidObjectException(
                    f"merge would move a row from {key.name}={target_values[i]} to {source_values[i]}: "
                    "rows never move between partitions (delete and insert it instead)"
                )

    def _check_same_bucket(
        self, target: pa.Table, t_take: pa.Array, source: pa.Table, s_take: pa.Array
    ) -> None:
        """A matched source row with other values in a bucketed column than its target row's would move the row.

        Values are compared, not hashes: a row stays in the bucket its ROW__ID names, wherever the writer that
        placed it put it (Hive's SQL and its streaming client hash the columns in different orders)."""
        for name in self.table.bucket_columns:
            if name not in source.column_names or name not in target.column_names:
                continue
            before, after = target.column(name).take(t_take), source.column(name).take(s_take)
            i = _first_change(before, after)
            if i is not None:
                row_id = target.column(ROW_ID).take(t_take)[i].as_py()
                raise BucketIdException(
                    f"merge would change the bucketed column {name} of the row with ROW__ID {row_id} from "
                    f"{before[i]} to {after[i]}: rows never move between buckets (delete and insert it instead)"
                )

    def _insert_partitions(
        self, source: pa.Table, parts: list[PartitionValues], known: KnownPartitions
    ) -> npt.NDArray[np.int32]:
        """Each new row's partition code in ``parts`` (extended with new partitions)."""
        keys = self.table.partition_keys
        if not keys:
            return np.full(source.num_rows, _add(parts, ()), dtype=np.int32)
        absent = [k.name for k in keys if k.name not in source.column_names]
        if absent:
            raise SerializationError(f"inserted rows need the partition columns {absent}", field=absent[0])
        codes, distinct = _distinct_rows(source.select([k.name for k in keys]))
        mapping = np.array(
            [_add(parts, known.get(row) or _partition_text(row, keys)) for row in distinct], dtype=np.int32
        )
        return mapping[codes]


def known_partitions(
    table: TableDefinition, existing: Sequence[Sequence[str | None]]
) -> dict[tuple[Any, ...], PartitionValues]:
    """The table's partitions by typed values, so a source value finds its partition's exact name."""
    values = [tuple(v) for v in existing]
    typed = partition_value_table(table.partition_keys, values).to_pylist()
    return {tuple(row.values()): v for row, v in zip(typed, values, strict=True)}


def with_op(rows: pa.Table, op: int) -> pa.Table:
    return rows.append_column(OP, pa.array(np.full(rows.num_rows, op, dtype=np.int8)))


def duplicate_match(who: str, key: Mapping[str, Any]) -> InvalidObjectException:
    """The error of a merge whose source matches one target row twice (SQL's MERGE cardinality rule)."""
    return InvalidObjectException(
        f"{who} both match the target row with {dict(key)}: a merge updates a row at most once "
        "(deduplicate the source)"
    )


def duplicate_key(who: str, key: Mapping[str, Any]) -> InvalidObjectException:
    """The error of a merge whose source holds a key twice, matched or not: a merge by key takes each key once,
    so it never inserts two rows of one key (Hive's MERGE would insert both of a key no target row has)."""
    return InvalidObjectException(
        f"{who} both hold the key {dict(key)}: a merge takes each key at most once (deduplicate the source)"
    )


def cast_column(column: pa.ChunkedArray, target: pa.DataType, name: str) -> pa.ChunkedArray:
    if column.type == target:
        return column
    try:
        return pc.cast(column, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SerializationError(f"cannot convert {column.type} to {target}: {exc}", field=name) from exc


def _first_change(before: pa.ChunkedArray | pa.Array, after: pa.ChunkedArray | pa.Array) -> int | None:
    """The first position where ``after`` differs from ``before`` (two nulls are alike), or None; ``before`` is
    compared as ``after``'s type (a Spark task's target rows come as Spark's types: UTC microseconds)."""
    if before.type != after.type:
        before = before.cast(after.type)
    same = pc.fill_null(pc.equal(before, after), False)
    both_null = pc.and_(pc.is_null(before), pc.is_null(after))
    changed = pc.invert(pc.or_(same, both_null))
    return pc.index(changed, True).as_py() if pc.any(changed).as_py() else None


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


def _check_choice(name: str, value: object, allowed: tuple[object, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, not {value!r}")
