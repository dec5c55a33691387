"""A merge split by bucket over forked worker processes: a machine's cores, without Spark.

Most of a merge's work holds the GIL (opening each ORC file, the glue around every batch), so threads of one
process take turns; processes do not. The txn's process plans the merge (:class:`BucketMerge`), spreads the
buckets over the workers by their bytes, forks one process per extra worker and merges its own share meanwhile.
Each worker writes its buckets' mutations through a coordinator of its own (statement id = its index) and hands
back its summary; the txn's process commits them all, or, if any worker failed, raises that worker's error and
the txn aborts (files written by a txn that aborts are never read).

A worker only reads files, computes and writes files: it uses no metastore (partitions lie where Hive's layout
puts them, as the metastore records them), no thread or connection of its parent, and leaves with
``os._exit``. Forking is used only where that holds: a local filesystem (object-store clients do not survive a
fork), a platform that forks, and a table bucketed on the merge keys (:func:`splits_by_bucket`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.errors import WorkerException
from acidstream.mutate.bucket_merge import BucketMerge, spread_buckets
from acidstream.mutate.coordinator import MutatorCoordinator
from acidstream.mutate.table import AcidTable, MutationSummary
from acidstream.storage import table_filesystem

#: Below this many bytes of target files a merge asked for no number of workers stays in one process: a fork
#: and a second set of files cost more than the share of the work a worker would take.
FORK_MIN_BYTES = 16 << 20


def merge_workers(requested: int | None, split: BucketMerge, location: str) -> int:
    """How many processes merge: ``requested`` (None: one per core if the target holds at least
    :data:`FORK_MIN_BYTES`), never more than buckets, and 1 where forking is not safe."""
    if requested is not None and requested < 1:
        raise ValueError(f"workers must be at least 1, got {requested}")
    sizes = split.bucket_bytes()
    if requested is None and sum(sizes.values()) < FORK_MIN_BYTES:
        return 1
    workers = min(requested or os.cpu_count() or 1, split.changes.table.num_buckets)
    forks = "fork" in multiprocessing.get_all_start_methods()
    local = isinstance(table_filesystem(location)[0], pafs.LocalFileSystem)
    return workers if workers > 1 and forks and local else 1


def merge_forked(
    split: BucketMerge,
    table: AcidTable,
    source: pa.Table,
    workers: int,
    coordinator: MutatorCoordinator,
) -> list[MutationSummary]:
    """Merge ``source`` (aligned rows) with ``workers`` processes: this one through ``coordinator`` (its summary
    comes from its close, at the commit) and ``workers - 1`` forked ones; returns the forked ones' summaries."""
    buckets = split.bucket_ids(source)
    task = np.asarray(spread_buckets(split.bucket_bytes(), table.table.num_buckets, workers))[buckets]
    children: list[_Worker] = []
    try:
        for index in range(1, workers):
            share = task == index
            children.append(_fork(index, split, table, source.filter(pa.array(share)), buckets[share]))
        mine = task == 0
        split.write_buckets(coordinator, source.filter(pa.array(mine)), buckets[mine])
        return [child.summary() for child in children]
    finally:
        for child in children:
            child.reap()


@dataclass
class _Worker:
    pid: int
    results: int  # the read end of the pipe the worker writes its outcome to
    status: int | None = None

    def summary(self) -> MutationSummary:
        """The worker's summary once it has finished; raises the worker's error if it failed."""
        with os.fdopen(self.results, "rb") as results:
            self.results = -1
            payload = results.read()
        _, self.status = os.waitpid(self.pid, 0)
        if not payload:
            raise WorkerException(
                f"merge worker {self.pid} ended without a result ({_describe(self.status)})"
            )
        ok, value = pickle.loads(payload)
        if not ok:
            raise value
        return MutationSummary.from_json(value)

    def reap(self) -> None:
        """Make sure the worker is gone (killed if still working: its files are the aborting txn's)."""
        if self.status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            _, self.status = os.waitpid(self.pid, 0)
        if self.results >= 0:
            os.close(self.results)
            self.results = -1


def _fork(
    index: int,
    split: BucketMerge,
    table: AcidTable,
    source: pa.Table,
    buckets: npt.NDArray[np.int32],
) -> _Worker:
    results, out = os.pipe()
    pid = os.fork()
    if pid:
        os.close(out)
        return _Worker(pid, results)
    os.close(results)  # the worker, from here on: it never returns
    status = 1
    try:
        coordinator = MutatorCoordinator(table, statement_id=index)  # partitions in Hive's layout, as listed
        split.write_buckets(coordinator, source, buckets)
        payload = pickle.dumps((True, coordinator.close().to_json()))
        status = 0
    except BaseException as exc:  # handed to the txn's process, which raises it
        payload = pickle.dumps((False, _portable(exc)))
    try:
        with os.fdopen(out, "wb") as pipe:
            pipe.write(payload)
    finally:
        os._exit(status)


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling as it is, else a WorkerException saying what it was."""
    try:
        back = pickle.loads(pickle.dumps(exc))
        if type(back) is type(exc) and str(back) == str(exc):
            return exc
    except Exception:
        pass
    return WorkerException(f"merge worker failed: {type(exc).__name__}: {exc}")


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"
