"""A streaming merge of event files into one sequence sorted by ``(originalTransaction, bucket, rowId)``.

Hive's ``OrcRawRecordMerger`` merges row by row through a priority queue. Here whole batches move: at each step
the smallest "last key of the current batch" over the open inputs bounds what can be emitted, every input gives
up its prefix up to that bound, and the pieces are sorted together only when more than one input contributed.
Event files of different write-id ranges do not overlap (rows keep the write id they were inserted with), so
usually one input contributes and nothing is sorted; an input is opened only once the merge reaches the lowest
write id it can hold, so memory stays at about one batch per overlapping input.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from acidstream.acid.orc.events import KEY_FIELDS, unsorted_at
from acidstream.errors import AcidFormatError

Key = tuple[int, int, int]


@dataclass(frozen=True)
class SortedSource:
    """Event batches sorted by key, whose ``originalTransaction`` values are all ``>= min_write_id``."""

    path: str
    min_write_id: int
    batches: Iterator[pa.RecordBatch]


def keys_of(
    batch: pa.RecordBatch | pa.Table,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    o, b, r = (batch.column(n) for n in KEY_FIELDS)
    return (
        np.asarray(o.to_numpy(zero_copy_only=False), dtype=np.int64),
        np.asarray(b.to_numpy(zero_copy_only=False), dtype=np.int32),
        np.asarray(r.to_numpy(zero_copy_only=False), dtype=np.int64),
    )


def sorted_order(batch: pa.RecordBatch | pa.Table) -> npt.NDArray[np.intp] | None:
    """Row order that sorts ``batch`` by key, then ``currentTransaction`` descending, deletes before inserts
    (Hive's ``ReaderKey`` order); None when it is sorted already."""
    o, b, r = keys_of(batch)
    if unsorted_at(o, b, r) < 0:
        return None
    current = np.asarray(batch.column("currentTransaction").to_numpy(zero_copy_only=False), dtype=np.int64)
    operation = np.asarray(batch.column("operation").to_numpy(zero_copy_only=False), dtype=np.int32)
    return np.lexsort((-operation, -current, r, b, o))


def _count_le(
    o: npt.NDArray[np.int64], b: npt.NDArray[np.int32], r: npt.NDArray[np.int64], bound: Key
) -> int:
    """Rows of a sorted run whose key is at most ``bound`` (a prefix of the run)."""
    bo, bb, br = bound
    le = (o < bo) | ((o == bo) & ((b < bb) | ((b == bb) & (r <= br))))
    if le.all():
        return len(o)
    return int(np.argmin(le))


class _Cursor:
    """The unconsumed rest of one source's current batch, checked to continue the source's order."""

    def __init__(self, source: SortedSource) -> None:
        self.source = source
        self.last_seen: Key | None = None
        self.batch: pa.RecordBatch | None = None
        self._advance()

    def _advance(self) -> None:
        self.batch = None
        for batch in self.source.batches:
            if batch.num_rows == 0:
                continue
            o, b, r = keys_of(batch)
            if unsorted_at(o, b, r) >= 0 or (
                self.last_seen is not None and (int(o[0]), int(b[0]), int(r[0])) < self.last_seen
            ):
                raise AcidFormatError(
                    f"{self.source.path}: events are not sorted by (originalTransaction, bucket, rowId)"
                )
            if int(o[0]) < self.source.min_write_id:
                raise AcidFormatError(
                    f"{self.source.path}: originalTransaction {int(o[0])} is below the directory's "
                    f"write id range (from {self.source.min_write_id})"
                )
            self.batch, self.o, self.b, self.r = batch, o, b, r
            self.last_seen = (int(o[-1]), int(b[-1]), int(r[-1]))
            return

    @property
    def done(self) -> bool:
        return self.batch is None

    @property
    def last_key(self) -> Key:
        assert self.last_seen is not None
        return self.last_seen

    def take_through(self, bound: Key) -> pa.RecordBatch | None:
        """Remove and return the rows up to ``bound`` of the current batch (loading the next when it empties)."""
        assert self.batch is not None
        n = len(self.o) if self.last_key <= bound else _count_le(self.o, self.b, self.r, bound)
        if n == 0:
            return None
        taken = self.batch.slice(0, n)
        if n == self.batch.num_rows:
            self._advance()
        else:
            self.batch = self.batch.slice(n)
            self.o, self.b, self.r = self.o[n:], self.b[n:], self.r[n:]
        return taken


def merge_sorted(sources: Sequence[SortedSource]) -> Iterator[pa.RecordBatch]:
    """All events of ``sources`` in key order, as batches (each at most the sum of one batch per source)."""
    pending = sorted(sources, key=lambda s: s.min_write_id)
    active: list[_Cursor] = []

    def activate(source: SortedSource) -> None:
        cursor = _Cursor(source)
        if not cursor.done:
            active.append(cursor)

    while active or pending:
        if not active:
            activate(pending.pop(0))
            continue
        bound = min(c.last_key for c in active)
        while pending and pending[0].min_write_id <= bound[0]:
            activate(pending.pop(0))
            bound = min(c.last_key for c in active)
        pieces = [p for p in (c.take_through(bound) for c in active) if p is not None]
        active = [c for c in active if not c.done]
        if len(pieces) == 1:
            yield pieces[0]
            continue
        table = pa.Table.from_batches(pieces)
        order = sorted_order(table)
        merged = table if order is None else table.take(order)
        yield from merged.combine_chunks().to_batches()
