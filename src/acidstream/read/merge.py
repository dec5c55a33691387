"""Read one bucket of one partition at a snapshot: valid insert events minus committed delete events.

Semantics of Hive's vectorised ACID reader (hive-acid-format.md §6.5): an insert event is visible iff its
``currentTransaction`` is valid; a delete event applies iff its own ``currentTransaction`` is valid and its
``(originalTransaction, bucket, rowId)`` equals the row's, comparing the full signed bucket property. Delete
keys of one bucket are held in memory (as Hive's ColumnizedDeleteEventRegistry does); insert files stream
batch by batch, so memory stays bounded by one bucket's deletes plus one batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.orc as po

from acidstream.acid.codec import BucketCodec
from acidstream.acid.orc import iter_event_batches, read_events
from acidstream.acid.writeids import RangeResponse, ValidWriteIdList
from acidstream.read.planning import BucketTask, FileSlice

ROW_ID = "ROW__ID"
ROW_ID_TYPE = pa.struct([("writeid", pa.int64()), ("bucketid", pa.int32()), ("rowid", pa.int64())])
_KEY_COLUMNS = ["originalTransaction", "bucket", "rowId"]
_KEY_DTYPE = np.dtype([("o", ">i8"), ("b", ">i4"), ("r", ">i8")])


def event_keys(original: pa.Array, bucket: pa.Array, row_id: pa.Array) -> pa.FixedSizeBinaryArray:
    """Pack each (originalTransaction, bucket, rowId) into 20 bytes so Arrow's hash kernels can match them."""
    packed = np.empty(len(original), dtype=_KEY_DTYPE)
    packed["o"] = original.to_numpy(zero_copy_only=False)
    packed["b"] = bucket.to_numpy(zero_copy_only=False)
    packed["r"] = row_id.to_numpy(zero_copy_only=False)
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(20), len(packed), [None, pa.py_buffer(packed.tobytes())]
    )


def valid_mask(write_ids: ValidWriteIdList, current: pa.Array) -> np.ndarray:
    """Vectorised ``isWriteIdValid`` over a column of write ids."""
    values = current.to_numpy(zero_copy_only=False)
    mask = values <= write_ids.high_watermark
    if write_ids.exceptions:
        mask &= ~np.isin(values, np.asarray(write_ids.exceptions, dtype=np.int64))
    return np.asarray(mask)


def load_delete_keys(
    fs: pafs.FileSystem, files: Sequence[FileSlice], write_ids: ValidWriteIdList
) -> pa.FixedSizeBinaryArray | None:
    """Keys of every delete event of the bucket that is itself committed in the snapshot."""
    parts: list[pa.FixedSizeBinaryArray] = []
    for piece in files:
        events = read_events(fs, piece.path, length=piece.length, include_row=False)
        if events.num_rows == 0:
            continue
        events = events.combine_chunks()
        if write_ids.is_write_id_range_valid(piece.min_write_id, piece.max_write_id) is not RangeResponse.ALL:
            events = events.filter(
                pa.array(valid_mask(write_ids, events.column("currentTransaction").chunk(0)))
            )
        if events.num_rows:
            cols = [
                events.column(c).chunk(0) if events.column(c).num_chunks else pa.array([])
                for c in _KEY_COLUMNS
            ]
            parts.append(event_keys(*cols))
    if not parts:
        return None
    return pa.concat_arrays(parts)


class BucketReader:
    """Yields the visible rows of one :class:`BucketTask` shaped as ``output_schema``."""

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
    ) -> None:
        self.fs = fs
        self.task = task
        self.write_ids = write_ids
        self.data_fields = list(data_fields)
        self.partition_scalars = partition_arrays
        self.output_schema = output_schema
        self.with_row_id = with_row_id
        self.filter_expr = filter_expr
        self.batch_rows = batch_rows

    def batches(self) -> Iterator[pa.RecordBatch]:
        deletes = load_delete_keys(self.fs, self.task.delete_files, self.write_ids)
        original_row_base = 0
        for piece in self.task.insert_files:
            if piece.original:
                for batch, rows in self._original_batches(piece, original_row_base):
                    original_row_base += rows
                    out = self._finish(batch, deletes, validity_needed=False)
                    if out is not None:
                        yield out
                continue
            fully_valid = (
                self.write_ids.is_write_id_range_valid(piece.min_write_id, piece.max_write_id)
                is RangeResponse.ALL
            )
            for batch in iter_event_batches(
                self.fs, piece.path, length=piece.length, batch_rows=self.batch_rows
            ):
                out = self._finish(batch, deletes, validity_needed=not fully_valid)
                if out is not None:
                    yield out

    def _original_batches(self, piece: FileSlice, row_base: int) -> Iterator[tuple[pa.RecordBatch, int]]:
        """A non-ACID file as events with Hive's synthetic ROW__IDs (write id 0, rowIds across the bucket)."""
        with self.fs.open_input_file(piece.path) as handle:
            table = po.ORCFile(handle).read()
        n = table.num_rows
        bucket = BucketCodec.V1.encode(piece.bucket_id, 0)
        row_struct = (
            pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], names=table.column_names)
            if n
            else pa.array([], pa.struct([]))
        )
        events = pa.RecordBatch.from_arrays(
            [
                pa.array(np.zeros(n, dtype=np.int32)),
                pa.array(np.zeros(n, dtype=np.int64)),
                pa.array(np.full(n, bucket, dtype=np.int32)),
                pa.array(np.arange(row_base, row_base + n, dtype=np.int64)),
                pa.array(np.zeros(n, dtype=np.int64)),
                row_struct,
            ],
            names=["operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row"],
        )
        yield events, n

    def _finish(
        self, events: pa.RecordBatch, deletes: pa.FixedSizeBinaryArray | None, *, validity_needed: bool
    ) -> pa.RecordBatch | None:
        if events.num_rows == 0:
            return None
        mask: np.ndarray | None = None
        if validity_needed:
            mask = valid_mask(self.write_ids, events.column("currentTransaction"))
        if deletes is not None:
            keys = event_keys(*(events.column(c) for c in _KEY_COLUMNS))
            alive = ~pc.is_in(keys, value_set=deletes).to_numpy(zero_copy_only=False)
            mask = alive if mask is None else mask & alive
        if mask is not None:
            if not mask.any():
                return None
            if not mask.all():
                events = events.filter(pa.array(mask))
        return self._shape(events)

    def _shape(self, events: pa.RecordBatch) -> pa.RecordBatch | None:
        n = events.num_rows
        row = events.column("row")
        arrays: list[pa.Array] = []
        for f in self.output_schema:
            if f.name == ROW_ID:
                arrays.append(
                    pa.StructArray.from_arrays(
                        [
                            events.column("originalTransaction"),
                            events.column("bucket"),
                            events.column("rowId"),
                        ],
                        fields=list(ROW_ID_TYPE),
                    )
                )
            elif f.name in self.partition_scalars:
                arrays.append(pa.repeat(self.partition_scalars[f.name], n).cast(f.type))
            else:
                arrays.append(_row_field(row, f, self.data_fields.index(f.name)))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.output_schema)
        if self.filter_expr is not None:
            filtered = pa.Table.from_batches([batch]).filter(self.filter_expr)
            if filtered.num_rows == 0:
                return None
            batch = filtered.combine_chunks().to_batches()[0]
        return batch


def _row_field(row: pa.StructArray, target: pa.Field, position: int) -> pa.Array:
    """A user column out of the ``row`` struct, by name when present, else by position (Hive reads ORC
    positionally: files from other writers may name fields ``_col0``...)."""
    row_type: pa.StructType = row.type
    index = row_type.get_field_index(target.name)
    if index < 0:
        index = position
    values = row.field(index)
    if values.type != target.type:
        values = values.cast(target.type)
    return values
