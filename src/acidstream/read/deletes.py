"""The committed delete events of one bucket, and the anti-join of insert events against them.

See docs/format.md, Reading a snapshot.

A delete event applies iff its own ``currentTransaction`` is valid in the snapshot and its
``(originalTransaction, bucket, rowId)`` equals the row's, comparing the full signed bucket property. Like
Hive's ``ColumnizedDeleteEventRegistry`` every applicable key of the bucket is held in memory, here grouped
by ``(originalTransaction, bucket)`` with one sorted ``rowId`` array per group: insert batches almost always
carry a single such pair (one write id of one writer), so matching is one binary search per row, with no
hashing and no per-row Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.acid.codec import decode_writer_ids
from acidstream.acid.orc import read_events
from acidstream.acid.orc.events import KEY_FIELDS, unsorted_at
from acidstream.acid.writeids import RangeResponse, ValidWriteIdList
from acidstream.errors import CorruptFileError
from acidstream.read.planning import FileSlice

Int64s = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


def valid_mask(write_ids: ValidWriteIdList, current: pa.Array | Int64s) -> Bools:
    """Vectorised ``isWriteIdValid`` over a column of write ids."""
    values = current if isinstance(current, np.ndarray) else current.to_numpy(zero_copy_only=False)
    mask = values <= write_ids.high_watermark
    if write_ids.exceptions:
        mask &= ~np.isin(values, np.asarray(write_ids.exceptions, dtype=np.int64))
    return np.asarray(mask, dtype=np.bool_)


def check_bucket_ids(path: str, bucket_id: int, buckets: npt.NDArray[np.int32]) -> None:
    """Every event of ``bucket_N`` must carry writer id N (``checkBucketId``); anything else is corruption.

    Applying such deletes to bucket N would silently miss (or hit) the wrong rows, so the read fails.
    """
    writers = decode_writer_ids(buckets)
    bad = writers != bucket_id
    if bad.any():
        found = int(writers[np.argmax(bad)])
        raise CorruptFileError(
            path,
            "Corrupted records with different bucket ids from the containing bucket file found! "
            f"Expected bucket id {bucket_id}, however found {found}",
        )


def key_arrays(path: str, events: pa.Table | pa.RecordBatch, names: Sequence[str]) -> list[npt.NDArray]:
    """Metadata columns as numpy arrays; a null in one is corruption (Hive never writes one)."""
    out = []
    for name in names:
        column = events.column(name)
        if column.null_count:
            raise CorruptFileError(path, f"null values in the ACID column {name!r}")
        out.append(column.to_numpy())
    return out


@dataclass(frozen=True)
class DeleteSet:
    """Applicable delete keys of one bucket: ``(originalTransaction, bucket)`` → sorted rowIds (a row deleted
    by several txns appears several times; membership does not care)."""

    groups: dict[tuple[int, int], Int64s]

    @classmethod
    def load(
        cls, fs: pafs.FileSystem, files: Sequence[FileSlice], write_ids: ValidWriteIdList
    ) -> DeleteSet | None:
        """Read the key columns of every delete file; None when no committed delete event exists."""
        parts: list[tuple[Int64s, npt.NDArray[np.int32], Int64s]] = []
        for piece in files:
            events = read_events(
                fs, piece.path, length=piece.length, columns=[*KEY_FIELDS, "currentTransaction"]
            )
            if events.num_rows == 0:
                continue
            original, bucket, row_id, current = key_arrays(
                piece.path, events, [*KEY_FIELDS, "currentTransaction"]
            )
            check_bucket_ids(piece.path, piece.bucket_id, bucket)
            if (
                write_ids.is_write_id_range_valid(piece.min_write_id, piece.max_write_id)
                is not RangeResponse.ALL
            ):
                keep = valid_mask(write_ids, current)
                original, bucket, row_id = original[keep], bucket[keep], row_id[keep]
            if len(original):
                parts.append((original, bucket, row_id))
        if not parts:
            return None
        original = np.concatenate([p[0] for p in parts])
        bucket = np.concatenate([p[1] for p in parts])
        row_id = np.concatenate([p[2] for p in parts])
        if unsorted_at(original, bucket, row_id) >= 0:  # each file is sorted; several files need a merge
            order = np.lexsort((row_id, bucket, original))
            original, bucket, row_id = original[order], bucket[order], row_id[order]
        new_group = (original[1:] != original[:-1]) | (bucket[1:] != bucket[:-1])
        starts = np.flatnonzero(np.concatenate([[True], new_group]))
        ends = np.append(starts[1:], len(original))
        groups = {(int(original[s]), int(bucket[s])): row_id[s:e] for s, e in zip(starts, ends, strict=True)}
        return cls(groups)

    def may_hit(self, min_write_id: int, max_write_id: int) -> bool:
        """Whether any delete targets rows inserted by write ids in the range (else skip the key columns)."""
        return any(min_write_id <= o <= max_write_id for o, _ in self.groups)

    def alive(self, original: Int64s, bucket: npt.NDArray[np.int32], row_id: Int64s) -> Bools | None:
        """Mask of rows no delete event hits, or None when none is hit (the common case for most batches)."""
        n = len(original)
        if n == 0:
            return None
        lo, hi = original.min(), original.max()
        if lo == hi and bucket.min() == bucket.max():
            deleted = self.groups.get((int(lo), int(bucket[0])))
            if deleted is None:
                return None
            hit = _sorted_isin(row_id, deleted)
            return ~hit if hit.any() else None
        mask: Bools | None = None
        for (o, b), deleted in self.groups.items():
            if o < lo or o > hi:
                continue
            rows = np.flatnonzero((original == o) & (bucket == b))
            if not len(rows):
                continue
            hit = _sorted_isin(row_id[rows], deleted)
            if hit.any():
                if mask is None:
                    mask = np.ones(n, dtype=np.bool_)
                mask[rows[hit]] = False
        return mask


def _sorted_isin(values: Int64s, sorted_keys: Int64s) -> Bools:
    """``np.isin`` for a sorted right side.

    Insert events of one write id carry consecutive rowIds, so a batch is usually one run ``r0..r0+n-1``:
    then the hits are a slice of the deletes found by two binary searches, with no per-row search.
    """
    n = len(values)
    first, last = int(values[0]), int(values[-1])
    if last - first == n - 1 and bool(np.all(values[1:] > values[:-1])):
        lo, hi = np.searchsorted(sorted_keys, [first, last + 1])
        hit = np.zeros(n, dtype=np.bool_)
        hit[sorted_keys[lo:hi] - first] = True
        return hit
    pos = np.searchsorted(sorted_keys, values)
    pos[pos == len(sorted_keys)] = 0
    return np.asarray(sorted_keys[pos] == values, dtype=np.bool_)
