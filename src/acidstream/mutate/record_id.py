"""``RecordIdentifier``: a row's ``ROW__ID`` (write id, encoded bucket property, row id), and its Arrow form.

The bucket is the 32-bit bucket property exactly as ``ROW__ID.bucketid`` holds it (``BucketCodec`` V1 packs
the bucket and statement ids), because delete events match rows on the full value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from acidstream.acid.codec import BucketCodec, decode_writer_id, decode_writer_ids
from acidstream.read.bucket_read import ROW_ID, ROW_ID_TYPE

__all__ = ["ROW_ID", "ROW_ID_TYPE", "RecordIdentifier", "row_id_arrays"]


class RecordIdentifier(NamedTuple):
    """Hive's ``RecordIdentifier``: ``(writeid, bucketid, rowid)``, ordered as ACID files sort events."""

    write_id: int
    bucket_id: int
    row_id: int

    @property
    def bucket(self) -> int:
        """The bucket (writer) id the property encodes."""
        return decode_writer_id(self.bucket_id)

    @classmethod
    def for_insert(cls, bucket: int) -> RecordIdentifier:
        """What :class:`BucketIdResolver` attaches to a new record: only its bucket counts."""
        return cls(-1, BucketCodec.V1.encode(bucket), -1)

    @classmethod
    def of(cls, value: Any) -> RecordIdentifier:
        """From a RecordIdentifier, a (write_id, bucket_id, row_id) sequence or a ``ROW__ID`` struct dict."""
        if isinstance(value, RecordIdentifier):
            return value
        if isinstance(value, Mapping):
            return cls(int(value["writeid"]), int(value["bucketid"]), int(value["rowid"]))
        write_id, bucket_id, row_id = value
        return cls(int(write_id), int(bucket_id), int(row_id))

    def __str__(self) -> str:
        return f"{{writeid:{self.write_id}, bucketid:{self.bucket_id}, rowid:{self.row_id}}}"


def row_id_arrays(
    column: pa.Array | pa.ChunkedArray,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """A ``ROW__ID`` struct column as numpy (write ids, bucket properties, row ids, decoded buckets).

    Nulls are refused: a mutation without a ROW__ID cannot be placed.
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not pa.types.is_struct(column.type) or {f.name for f in column.type} != set(ROW_ID_TYPE.names):
        raise ValueError(f"{ROW_ID} must be a struct<writeid, bucketid, rowid>, not {column.type}")
    if column.null_count:
        raise ValueError(f"{ROW_ID} must not be null")
    column = column.cast(ROW_ID_TYPE)
    write_ids, props, row_ids = (column.field(name) for name in ROW_ID_TYPE.names)
    if write_ids.null_count or props.null_count or row_ids.null_count:
        raise ValueError(f"{ROW_ID} fields must not be null")
    p = props.to_numpy()
    return write_ids.to_numpy(), p, row_ids.to_numpy(), decode_writer_ids(p)
