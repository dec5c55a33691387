"""A merge split by bucket, for workers that each hold some buckets' source rows.

When the table is bucketed on merge keys only, a source row and every target row with its keys hash to the same
bucket, whatever their partitions: matches never cross buckets. That holds only where Hive's writers agree on
the bucket of a key: a table whose ``CLUSTERED BY`` order is not its columns' order holds rows of one key in
two buckets (Hive's SQL hashes the columns in the one order, its streaming client in the other), so it is
merged whole. A worker given the source rows of some buckets
then reads just those buckets' target rows (at the txn's snapshot, from the plan the driver made), matches and
builds mutations with the Python merge's own code, and writes them through a coordinator of its own — one pass,
no join across workers. A merge that deletes unmatched target rows needs every bucket's target rows, whether or
not the source has rows there, so it is not split this way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from acidstream.acid.bucketing import BucketKeyOrder
from acidstream.acid.runs import runs
from acidstream.acid.writeids import ValidWriteIdList
from acidstream.metastore.models import TableDefinition
from acidstream.mutate.bucket_id import BucketIdResolver
from acidstream.mutate.changes import Changes, KnownPartitions, MergeActions
from acidstream.mutate.coordinator import MutatorCoordinator
from acidstream.mutate.matching import match_keys, partition_coded, rows_at, write_changes
from acidstream.read.bucket_read import ROW_ID, ROW_ID_TYPE
from acidstream.read.planning import BucketTask
from acidstream.read.scan import bucket_readers


def splits_by_bucket(table: TableDefinition, keys: Sequence[str], actions: MergeActions) -> bool:
    """Whether a merge on ``keys`` with ``actions`` can run as :class:`BucketMerge`: the table is bucketed on
    columns that are all keys, in an order all of Hive's writers hash alike, and unmatched target rows are left
    alone."""
    bucketed = {c.lower() for c in table.bucket_columns}
    names = [c.name for c in table.columns]
    orders = {tuple(order.columns(names, table.bucket_columns)) for order in BucketKeyOrder}
    return (
        table.num_buckets > 1
        and bool(bucketed)
        and bucketed <= {k.lower() for k in keys}
        and len(orders) == 1
        and actions.when_not_matched_by_source is None
    )


def spread_buckets(sizes: Mapping[int, int], num_buckets: int, tasks: int) -> tuple[int, ...]:
    """The task of each bucket, for ``tasks`` tasks (never more than buckets): the buckets' bytes (``sizes``)
    spread evenly, largest first onto the lightest task."""
    count = max(1, min(num_buckets, tasks))
    loads = [(0, 0)] * count  # (bytes, buckets): buckets with no files yet spread evenly too
    task_of = [0] * num_buckets
    for bucket in sorted(range(num_buckets), key=lambda b: -sizes.get(b, 0)):
        lightest = loads.index(min(loads))
        task_of[bucket] = lightest
        size, buckets = loads[lightest]
        loads[lightest] = (size + sizes.get(bucket, 0), buckets + 1)
    return tuple(task_of)


def by_bucket(source: pa.Table, buckets: npt.NDArray[np.int32]) -> Iterator[tuple[int, pa.Table]]:
    """Each bucket of ``buckets`` (each row's) with its rows of ``source``, in bucket order."""
    if not len(buckets):
        return
    order = np.argsort(buckets, kind="stable")
    source, buckets = source.take(pa.array(order)), buckets[order]
    for start, end in runs(buckets):
        yield int(buckets[start]), source.slice(start, end - start)


@dataclass(frozen=True)
class BucketMerge:
    """One merge's plan for its workers (it pickles): the table's definition, the actions, the target's files
    at the txn's snapshot; :meth:`write` merges one bucket's source rows."""

    changes: Changes
    actions: MergeActions
    keys: tuple[str, ...]
    #: What is read of the target besides ROW__ID (``Changes.target_columns``).
    target_columns: tuple[str, ...]
    write_ids: ValidWriteIdList
    tasks: tuple[BucketTask, ...]
    #: The table's partitions, for inserts (empty when the merge inserts nothing).
    known: KnownPartitions
    _by_bucket: dict[int, list[BucketTask]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_bucket: dict[int, list[BucketTask]] = defaultdict(list)
        for task in self.tasks:
            by_bucket[task.bucket_id].append(task)
        object.__setattr__(self, "_by_bucket", dict(by_bucket))

    def bucket_ids(self, source: pa.Table) -> npt.NDArray[np.int32]:
        """The bucket of each (aligned) source row: where the target rows its keys match live."""
        return BucketIdResolver(self.changes.table).compute_bucket_ids(source)

    def bucket_bytes(self) -> dict[int, int]:
        """File bytes to read per bucket: what a worker merging the bucket reads."""
        return {
            bucket: sum(f.length for t in tasks for f in (*t.insert_files, *t.delete_files))
            for bucket, tasks in self._by_bucket.items()
        }

    def write_buckets(
        self, coordinator: MutatorCoordinator, source: pa.Table, buckets: npt.NDArray[np.int32]
    ) -> None:
        """Merge ``source`` (aligned rows of several buckets; ``buckets``: each row's) bucket by bucket."""
        for bucket, rows in by_bucket(source, buckets):
            self.write(coordinator, bucket, rows)

    def write(self, coordinator: MutatorCoordinator, bucket: int, source: pa.Table) -> None:
        """Merge ``source`` (aligned rows, all of ``bucket``) into the bucket's target rows; the mutations go
        to ``coordinator``, partition by partition."""
        target, parts = self._read(bucket)
        t_idx, s_idx = match_keys(target, source, self.keys)
        target, t_idx = rows_at(target, t_idx), np.arange(len(t_idx))  # only matched target rows matter
        pieces = self.changes.merge(target, parts, source, t_idx, s_idx, self.actions, lambda: self.known)
        write_changes(coordinator, pieces, parts)

    def _read(self, bucket: int) -> tuple[pa.Table, list[tuple[str | None, ...]]]:
        """The bucket's target rows (ROW__ID and the target columns), in every partition, with ``__part``."""
        table = self.changes.table
        types = {c.name: c.type.to_arrow() for c in (*table.columns, *table.partition_keys)}
        schema = pa.schema(
            [pa.field(ROW_ID, ROW_ID_TYPE), *(pa.field(c, types[c]) for c in self.target_columns)]
        )
        readers = bucket_readers(
            table, self._by_bucket.get(bucket, ()), self.write_ids, schema, with_row_id=True
        )
        return partition_coded(
            ((reader.task.partition_values, batch) for reader in readers for batch in reader.batches()),
            schema,
        )
