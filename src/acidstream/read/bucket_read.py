"""Read one bucket of one partition at a snapshot: valid insert events minus committed delete events.

Semantics of Hive's vectorised ACID reader: an insert event is visible iff its ``currentTransaction`` is
valid; a delete event (see :mod:`acidstream.read.deletes`) hides the row with the same
``(originalTransaction, bucket, rowId)`` (docs/format.md, Reading a snapshot). Insert files stream batch by
batch, and only the event columns a batch needs are decoded: ``currentTransaction`` only when the file's
write-id range is not wholly valid, the key columns only when deletes or ROW__IDs are wanted, ``row`` only
when a data column is. Memory stays bounded by one bucket's delete keys plus one stripe.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from acidstream.acid.evolution import convert, table_columns, truncate
from acidstream.acid.orc import iter_event_batches
from acidstream.acid.orc.events import KEY_FIELDS
from acidstream.acid.writeids import RangeResponse, ValidWriteIdList
from acidstream.read.deletes import Bools, DeleteSet, key_arrays, valid_mask
from acidstream.read.originals import original_events
from acidstream.read.planning import BucketTask, FileSlice

ROW_ID = "ROW__ID"
ROW_ID_TYPE = pa.struct([("writeid", pa.int64()), ("bucketid", pa.int32()), ("rowid", pa.int64())])


class BucketReader:
    """Yields the visible rows of one :class:`BucketTask` shaped as ``output_schema``.

    ``filter_expr`` is evaluated on ``output_schema`` plus ``filter_fields`` (columns the filter needs but the
    caller did not project; they are read, used and dropped). ``with_row_id`` is implied by a ``ROW__ID``
    field in either schema and kept for callers that pass it. ``char_widths`` names the ``char(n)`` columns:
    Hive's ``HiveChar`` is the value padded with spaces to n characters, whether or not the file stored the
    padding (Hive's ORC writer does, acidstream's does not). ``text_lengths`` names the ``char(n)`` and
    ``varchar(n)`` columns: longer values (in files written before the column was narrowed) are cut to n.
    """

    def __init__(
        self,
        fs: pafs.FileSystem,
        task: BucketTask,
        write_ids: ValidWriteIdList,
        *,
        data_fields: Sequence[str],
        partition_arrays: dict[str, pa.Scalar],
        output_schema: pa.Schema,
        with_row_id: bool,
        filter_expr: pc.Expression | None,
        batch_rows: int,
        filter_fields: Sequence[pa.Field] = (),
        char_widths: Mapping[str, int] | None = None,
        text_lengths: Mapping[str, int] | None = None,
    ) -> None:
        self.fs = fs
        self.task = task
        self.write_ids = write_ids
        self.data_names = list(data_fields)
        self.data_positions = {name: i for i, name in enumerate(data_fields)}
        self.partition_scalars = partition_arrays
        self.output_schema = output_schema
        self.filter_expr = filter_expr
        self.batch_rows = batch_rows
        self.char_widths = dict(char_widths or {})
        self.text_lengths = dict(text_lengths or {})
        extra = [f for f in filter_fields if f.name not in output_schema.names]
        self.read_schema = pa.schema([*output_schema, *extra]) if extra else output_schema
        names = set(self.read_schema.names)
        self.with_row_id = with_row_id or ROW_ID in names
        self.needs_row = bool(names & self.data_positions.keys())
        # Only the children of ``row`` holding these are decoded; _table_row puts them in this order.
        self.row_positions = sorted(self.data_positions[n] for n in names & self.data_positions.keys())
        self._projected_index = {pos: i for i, pos in enumerate(self.row_positions)}
        self._deletes = _BucketDeletes(fs, task.delete_files, write_ids)

    @property
    def read_bytes(self) -> int:
        """Bytes of ORC this reader decodes, about: its files' bytes scaled by :attr:`_column_share`."""
        files = sum(f.read_bytes for f in (*self.task.insert_files, *self.task.delete_files))
        return int(files * self._column_share)

    @property
    def _column_share(self) -> float:
        """The share of a file's bytes this reader decodes: that of the data columns it reads (at least one
        column's: ACID columns and delete keys are read whatever the projection)."""
        return max(len(self.row_positions), 1) / max(len(self.data_positions), 1)

    def split(self, part_bytes: int) -> list[BucketReader]:
        """This bucket's read cut into parts of about ``part_bytes`` of :attr:`read_bytes`, which read one after
        the other yield exactly this reader's batches: runs of consecutive files, a large file cut into runs of
        its stripes. The parts share one load of the bucket's delete events, so they can run side by side
        in threads. A bucket with original (non-ACID) files stays whole: their synthetic row ids count rows
        from the bucket's first original file."""
        pieces = self.task.insert_files
        if any(p.original for p in pieces):
            return [self]
        file_bytes = max(int(part_bytes / self._column_share), 1)
        groups: list[list[FileSlice]] = []
        filled = file_bytes  # bytes in the last group of whole small files
        for piece in pieces:
            cuts = -(-piece.length // file_bytes)
            if cuts > 1:
                groups.extend([replace(piece, part=(k, cuts))] for k in range(cuts))
                filled = file_bytes
                continue
            if filled >= file_bytes:
                groups.append([])
                filled = 0
            groups[-1].append(piece)
            filled += piece.length
        if len(groups) == 1:
            return [self]
        parts = []
        for group in groups:
            part = copy.copy(self)
            part.task = replace(self.task, insert_files=tuple(group))
            parts.append(part)
        return parts

    # --- public -------------------------------------------------------------------------------------------

    def batches(self) -> Iterator[pa.RecordBatch]:
        for events, mask in self._visible_events():
            batch = self._shape(events)
            if mask is not None:
                batch = batch.filter(pa.array(mask))
            if self.filter_expr is not None:
                batch = batch.filter(self.filter_expr)
            if batch.num_rows == 0:
                continue
            if self.read_schema is not self.output_schema:
                batch = batch.select(self.output_schema.names)
            yield batch

    def count(self) -> int:
        """Visible rows (after the filter); without a filter no data column is decoded."""
        if self.filter_expr is not None:
            return sum(b.num_rows for b in self.batches())
        total = 0
        for events, mask in self._visible_events(need_row=False):
            total += events.num_rows if mask is None else int(np.count_nonzero(mask))
        return total

    # --- events and masks ---------------------------------------------------------------------------------

    def _visible_events(self, need_row: bool | None = None) -> Iterator[tuple[pa.RecordBatch, Bools | None]]:
        """Each event batch with its visibility mask (None: every row visible); wholly hidden batches skipped."""
        deletes = self._deletes.get()
        want_row = self.needs_row if need_row is None else need_row
        next_original_row = 0
        for piece in self.task.insert_files:
            if piece.original:
                for events in original_events(self.fs, piece, next_original_row, self.batch_rows):
                    next_original_row += events.num_rows
                    events = self._table_row(events)
                    mask = self._mask(piece, events, deletes, check_validity=False)
                    if mask is None or mask.any():
                        yield events, mask
                continue
            check_validity = (
                not piece.base
                and self.write_ids.is_write_id_range_valid(piece.min_write_id, piece.max_write_id)
                is not RangeResponse.ALL
            )
            # Rows keep the originalTransaction they were inserted with: a file only holds ids of its range.
            hits = (
                deletes
                if deletes is not None and deletes.may_hit(piece.min_write_id, piece.max_write_id)
                else None
            )
            columns = _event_columns(want_row, self.with_row_id or hits is not None, check_validity)
            for events in iter_event_batches(
                self.fs,
                piece.path,
                length=piece.length,
                part=piece.part,
                columns=columns,
                batch_rows=self.batch_rows,
                row_fields=self.row_positions,
                row_names=self.data_names,
            ):
                if events.num_rows == 0:
                    continue
                events = self._table_row(events)
                mask = self._mask(piece, events, hits, check_validity=check_validity)
                if mask is None or mask.any():
                    yield events, mask

    def _mask(
        self, piece: FileSlice, events: pa.RecordBatch, deletes: DeleteSet | None, *, check_validity: bool
    ) -> Bools | None:
        mask: Bools | None = None
        if check_validity:
            (current,) = key_arrays(piece.path, events, ["currentTransaction"])
            valid = valid_mask(self.write_ids, current)
            if not valid.all():
                mask = valid
                if not valid.any():
                    return mask
        if deletes is not None:
            original, bucket, row_id = key_arrays(piece.path, events, KEY_FIELDS)
            alive = deletes.alive(original, bucket, row_id)
            if alive is not None:
                mask = alive if mask is None else mask & alive
        return mask

    # --- output shape -------------------------------------------------------------------------------------

    def _shape(self, events: pa.RecordBatch) -> pa.RecordBatch:
        n = events.num_rows
        if not len(self.read_schema):
            # n rows, no columns (built without pa.scalar({}), whose conversion imports pandas)
            return pa.RecordBatch.from_struct_array(pa.nulls(n, pa.struct([])))
        arrays: list[pa.Array] = []
        for f in self.read_schema:
            if f.name == ROW_ID:
                arrays.append(
                    pa.StructArray.from_arrays(
                        [events.column(name) for name in KEY_FIELDS], fields=list(ROW_ID_TYPE)
                    )
                )
            elif f.name in self.partition_scalars:
                arrays.append(pa.repeat(self.partition_scalars[f.name], n).cast(f.type))
            else:
                values = _row_field(events, f, self._projected_index[self.data_positions[f.name]])
                width = self.char_widths.get(f.name)
                values = truncate(values, self.text_lengths.get(f.name))
                arrays.append(values if width is None else pc.utf8_rpad(values, width=width, padding=" "))
        return pa.RecordBatch.from_arrays(arrays, schema=self.read_schema)

    def _table_row(self, events: pa.RecordBatch) -> pa.RecordBatch:
        """``events`` with ``row`` holding the table's columns at ``row_positions``, found in the file's as
        Hive 4 finds them (:func:`acidstream.acid.evolution.table_columns`: by position in files that name
        fields ``_col0``..., else by name); a column the file lacks (added, or renamed since) is all NULL."""
        at = events.schema.get_field_index("row")
        row: pa.StructArray = events.column(at) if at >= 0 else pa.nulls(events.num_rows, pa.struct([]))
        children = table_columns(row, self.data_names, self.row_positions)
        fields = [
            pa.field(self.data_names[p], c.type) for p, c in zip(self.row_positions, children, strict=True)
        ]
        shaped = (
            pa.StructArray.from_arrays(children, fields=fields)
            if fields
            else pa.nulls(events.num_rows, pa.struct([]))
        )
        return events.set_column(at, "row", shaped) if at >= 0 else events.append_column("row", shaped)


class _BucketDeletes:
    """A bucket's committed delete events, loaded once by whichever of its parts (threads) needs them first."""

    def __init__(self, fs: pafs.FileSystem, files: Sequence[FileSlice], write_ids: ValidWriteIdList) -> None:
        self._load = functools.partial(DeleteSet.load, fs, files, write_ids)
        self._lock = threading.Lock()
        self._loaded: list[DeleteSet | None] = []

    def get(self) -> DeleteSet | None:
        with self._lock:
            if not self._loaded:
                self._loaded.append(self._load())
            return self._loaded[0]


def _event_columns(want_row: bool, want_keys: bool, check_validity: bool) -> list[str]:
    """The event columns to decode; at least one, so that batches still count rows."""
    columns = [*KEY_FIELDS] if want_keys else []
    if check_validity:
        columns.append("currentTransaction")
    if want_row:
        columns.append("row")
    return columns or ["operation"]


def _row_field(events: pa.RecordBatch, target: pa.Field, index: int) -> pa.Array:
    """A user column out of the table-shaped ``row`` (:meth:`BucketReader._table_row`), cast to the table's
    type when the column was changed since the file was written (docs/format.md, Schema evolution)."""
    return convert(events.column("row").field(index), target.type)
