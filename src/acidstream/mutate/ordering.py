"""Hive's Mutation API ordering rules (``SequenceValidator``, ``GroupingValidator``), checked on arrival.

Within a (partition, bucket) group, updates and deletes must come in ascending ROW__ID order — ACID files sort
events by (writeid, bucketid, rowid), and a delete delta written out of order silently misses rows. Groups
must not come back once left: their files are closed. Both checks are O(1) per record, and vectorised over a
batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from acidstream.errors import GroupRevisitedException, RecordSequenceException
from acidstream.mutate.record_id import RecordIdentifier

PartitionValues = tuple[str | None, ...]


class SequenceValidator:
    """Strictly ascending ROW__IDs within one group; :meth:`reset` at each new group."""

    def __init__(self) -> None:
        self.last: RecordIdentifier | None = None

    def reset(self) -> None:
        self.last = None

    def check(self, record_id: RecordIdentifier, where: str) -> None:
        """Accept ``record_id`` or raise :class:`RecordSequenceException` naming it and its predecessor."""
        if self.last is not None and record_id <= self.last:
            raise RecordSequenceException(
                f"Records not in sequence in {where}: ROW__ID {record_id} follows {self.last} "
                "(updates and deletes of a group must ascend by writeid, bucketid, rowid)"
            )
        self.last = record_id

    def check_batch(
        self,
        write_ids: npt.NDArray[np.int64],
        props: npt.NDArray[np.int32],
        row_ids: npt.NDArray[np.int64],
        where: str,
    ) -> None:
        """:meth:`check` for every key of a batch, in order (one vectorised pass)."""
        n = len(write_ids)
        if n == 0:
            return
        w, b, r = write_ids, props.astype(np.int64), row_ids
        if self.last is not None:
            w = np.concatenate([[self.last.write_id], w])
            b = np.concatenate([[self.last.bucket_id], b])
            r = np.concatenate([[self.last.row_id], r])
        # compared, not subtracted: a difference of two int64 keys can overflow
        w0, w1, b0, b1, r0, r1 = w[:-1], w[1:], b[:-1], b[1:], r[:-1], r[1:]
        ascending = (w1 > w0) | ((w1 == w0) & ((b1 > b0) | ((b1 == b0) & (r1 > r0))))
        if not ascending.all():
            i = int(np.argmin(ascending))
            before = RecordIdentifier(int(w[i]), int(b[i]), int(r[i]))
            after = RecordIdentifier(int(w[i + 1]), int(b[i + 1]), int(r[i + 1]))
            raise RecordSequenceException(
                f"Records not in sequence in {where}: ROW__ID {after} follows {before} "
                "(updates and deletes of a group must ascend by writeid, bucketid, rowid)"
            )
        self.last = RecordIdentifier(int(w[-1]), int(b[-1]), int(r[-1]))


class GroupingValidator:
    """Each (partition, bucket) group is visited once: consecutive mutations of a group are one visit."""

    def __init__(self) -> None:
        self._visited: dict[PartitionValues, set[int]] = {}
        self._current: tuple[PartitionValues, int] | None = None

    @property
    def groups(self) -> int:
        return sum(len(b) for b in self._visited.values())

    def enter(self, partition: Sequence[str | None], bucket: int) -> bool:
        """Move to the group; False if it is the current one, True if it is new. Raises
        :class:`GroupRevisitedException` for a group left earlier."""
        key = (tuple(partition), bucket)
        if key == self._current:
            return False
        buckets = self._visited.setdefault(key[0], set())
        if bucket in buckets:
            raise GroupRevisitedException(
                f"Group out of sequence: partition {list(key[0])} bucket {bucket} was left earlier (now in "
                f"{_describe(self._current)}); mutations must be grouped by partition, then bucket"
            )
        buckets.add(bucket)
        self._current = key
        return True


def _describe(group: tuple[PartitionValues, int] | None) -> str:
    return "no group" if group is None else f"partition {list(group[0])} bucket {group[1]}"
