"""A merge split by bucket over worker processes: a machine's cores, without Spark.

Most of a merge's work holds the GIL (opening each ORC file, the glue around every batch), so threads of one
process take turns; processes do not. The txn's process plans the merge (:class:`BucketMerge`), spreads the
buckets over the workers by their bytes, starts one process per extra worker and merges its own share meanwhile.
Each worker writes its buckets' mutations through a coordinator of its own (statement id = its index) and hands
back its summary; the txn's process commits them all, or, if any worker failed, raises that worker's error and
the txn aborts (files written by a txn that aborts are never read).

Workers are forks of this process's :class:`~acidstream.mutate.forkserver.ForkServer`, never of this threaded
process, and they die with it. A worker reads files, computes and writes files, and reads one thing of the
metastore: its txn's state, before each bucket and after its last file. A txn found aborted or gone (its merging
process stalled past the txn timeout, or an operator aborted it) stops the worker, which deletes what it wrote:
files written after the cleaner removed the txn's directories would be read once the cleaner forgot its write
id. Workers are used only where that all holds: a local filesystem (object-store clients do not survive a
fork), a platform that forks, and a table bucketed on the merge keys (:func:`splits_by_bucket`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.acid.names import delete_delta_dir, delta_dir
from acidstream.errors import NoSuchTxnException, TxnAbortedException
from acidstream.metastore.models import TxnStatus
from acidstream.metastore.probe import MetastoreProbe
from acidstream.mutate.bucket_merge import BucketMerge, by_bucket, spread_buckets
from acidstream.mutate.coordinator import MutatorCoordinator
from acidstream.mutate.forkserver import ForkedWorker, fork_server
from acidstream.mutate.table import AcidTable, MutationSummary
from acidstream.storage import table_filesystem

#: Below this many bytes of target files a merge asked for no number of workers stays in one process: a worker
#: and a second set of files cost more than the share of the work a worker would take.
FORK_MIN_BYTES = 16 << 20


def merge_workers(requested: int | None, split: BucketMerge, location: str) -> int:
    """How many processes merge: ``requested`` (None: one per core if the target holds at least
    :data:`FORK_MIN_BYTES` and the fork server is up: a merge asking for none does not wait for it to start),
    never more than buckets, and 1 where forking is not safe."""
    if requested is not None and requested < 1:
        raise ValueError(f"workers must be at least 1, got {requested}")
    sizes = split.bucket_bytes()
    if requested is None and sum(sizes.values()) < FORK_MIN_BYTES:
        return 1
    workers = min(requested or os.cpu_count() or 1, split.changes.table.num_buckets)
    forks = "fork" in multiprocessing.get_all_start_methods()
    local = isinstance(table_filesystem(location)[0], pafs.LocalFileSystem)
    if workers < 2 or not forks or not local:
        return 1
    return workers if requested is not None or fork_server().ready(wait=False) else 1


@dataclass(frozen=True)
class TxnProbe:
    """How a worker reads its txn's state: how to reach the metastore, the txn."""

    metastore: MetastoreProbe
    txn_id: int

    def check_open(self) -> None:
        """Raise unless the txn is still open."""
        state = self.metastore.txn_state(self.txn_id)
        if state is TxnStatus.OPEN:
            return
        if state is TxnStatus.UNKNOWN:
            raise NoSuchTxnException(f"txn {self.txn_id} is gone: its merge worker stopped")
        raise TxnAbortedException(f"txn {self.txn_id} is {state.name.lower()}: its merge worker stopped")


def merge_forked(
    split: BucketMerge,
    table: AcidTable,
    source: pa.Table,
    workers: int,
    coordinator: MutatorCoordinator,
    txn: TxnProbe,
) -> list[MutationSummary]:
    """Merge ``source`` (aligned rows) with ``workers`` processes: this one through ``coordinator`` (its summary
    comes from its close, at the commit) and ``workers - 1`` forks of the fork server; returns their summaries."""
    buckets = split.bucket_ids(source)
    task = np.asarray(spread_buckets(split.bucket_bytes(), table.table.num_buckets, workers))[buckets]
    server = fork_server()
    started: list[ForkedWorker] = []
    try:
        for index in range(1, workers):
            share = task == index
            rows = source.filter(pa.array(share))
            started.append(server.start(merge_share, index, split, table, rows, buckets[share], txn))
        mine = task == 0
        split.write_buckets(coordinator, source.filter(pa.array(mine)), buckets[mine])
        return [MutationSummary.from_json(worker.result()) for worker in started]
    finally:
        for worker in started:
            worker.stop()


def merge_share(
    index: int,
    split: BucketMerge,
    table: AcidTable,
    source: pa.Table,
    buckets: npt.NDArray[np.int32],
    txn: TxnProbe,
) -> str:
    """A worker's part: merge its buckets' rows through a coordinator with statement id ``index``; its summary
    as JSON. If anything fails (its txn found gone included) it deletes what it wrote."""
    # partitions in Hive's layout, as listed; rows routed by ROW__ID (Changes checks bucketed columns)
    coordinator = MutatorCoordinator(table, statement_id=index, check_buckets=False)
    try:
        for bucket, rows in by_bucket(source, buckets):
            txn.check_open()
            split.write(coordinator, bucket, rows)
        summary = coordinator.close()
        txn.check_open()  # after the files: an abort from now on finds them for its cleaner
    except BaseException:
        coordinator.abort()
        _delete_statement(table, coordinator)
        raise
    return summary.to_json()


def _delete_statement(table: AcidTable, coordinator: MutatorCoordinator) -> None:
    """Delete the directories of ``coordinator``'s statement in every partition it wrote to (its own)."""
    fs, _ = table_filesystem(table.table.location)
    write_id, statement = coordinator.write_id, coordinator.statement_id
    names = (delta_dir(write_id, write_id, statement), delete_delta_dir(write_id, write_id, statement))
    for partition in coordinator.summary.partitions.values():
        for name in names:
            with contextlib.suppress(OSError):
                fs.delete_dir(f"{partition.location}/{name}")
