"""Original (non-ACID) files as insert events with Hive's synthetic ROW__IDs.

A file written before the table became transactional holds plain rows. Hive reads them as events of write id
0 whose ``bucket`` is ``BucketCodec.V1.encode(bucket id of the file name, 0)`` and whose ``rowId`` counts rows
across all original files of the bucket in path order, so deletes written against those ids apply
(docs/format.md, Reading a snapshot).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.acid.codec import BucketCodec
from acidstream.acid.orc.events import EVENT_FIELDS
from acidstream.acid.orc.reader import iter_orc_stripes
from acidstream.read.planning import FileSlice


def original_events(
    fs: pafs.FileSystem, piece: FileSlice, first_row_id: int, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """Events of one original file, stripe by stripe in slices of at most ``batch_rows`` rows."""
    bucket = BucketCodec.V1.encode(piece.bucket_id, 0)
    row_id = first_row_id
    for stripe in iter_orc_stripes(fs, piece.path):
        for start in range(0, stripe.num_rows, batch_rows):
            rows = stripe.slice(start, batch_rows)
            yield _as_events(rows, bucket, row_id)
            row_id += rows.num_rows


def _as_events(rows: pa.RecordBatch, bucket: int, first_row_id: int) -> pa.RecordBatch:
    n = rows.num_rows
    zeros = pa.array(np.zeros(n, dtype=np.int64))
    row = pa.StructArray.from_arrays(rows.columns, names=rows.schema.names) if rows.num_columns else None
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.zeros(n, dtype=np.int32)),
            zeros,
            pa.array(np.full(n, bucket, dtype=np.int32)),
            pa.array(np.arange(first_row_id, first_row_id + n, dtype=np.int64)),
            zeros,
            row if row is not None else pa.repeat(pa.scalar({}, pa.struct([])), n),
        ],
        names=list(EVENT_FIELDS),
    )
