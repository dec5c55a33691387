"""``df.write.format("acidstream").mode("append").save("db.t")``: the whole job is one transaction.

Spark calls ``DataSource.writer()`` once, in a planner worker on the driver host, and pickles the writer to
the tasks and to the commit worker. So the writer opens the transaction and allocates
the write id in ``__init__``; every task writes under it with its partition id as statement id and heartbeats
the txn while it runs (with the job's store settings, which the target carries); ``commit`` registers partitions and commits, ``abort`` aborts. A job killed outright
leaves an open txn that the metastore's housekeeping aborts after ``txn_timeout``: nothing becomes visible (the
txn locks the table before any task writes, which records its write: see :mod:`acidstream.spark.writelock`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from acidstream.errors import TransactionError
from acidstream.spark.commit import commit_write, remove_attempts
from acidstream.spark.options import ResolvedTable
from acidstream.spark.task_write import TaskResult, TxnKeepAlive, statement_id_for, write_task
from acidstream.spark.writelock import lock_for_write

OVERWRITE_REFUSED = (
    'acidstream cannot overwrite yet: mode("overwrite") needs a base_N directory writer, which acidstream does '
    'not have; use mode("append")'
)


@dataclass
class BatchMessage(WriterCommitMessage):
    result: TaskResult


class AcidBatchWriter(DataSourceArrowWriter):
    """One transaction per job; ``txn_id``/``write_id`` are fixed when the job is planned."""

    def __init__(self, target: ResolvedTable, agent_info: str) -> None:
        self.target = target
        ms = target.metastore()
        (self.txn_id,) = ms.open_txns(1, agent_info=agent_info)
        try:
            ((_, self.write_id),) = ms.allocate_table_write_ids([self.txn_id], target.name)
            lock_for_write(ms, target.table, self.txn_id, agent_info)  # before any task writes
        except BaseException:
            ms.abort_txn(self.txn_id)
            raise

    def write(self, iterator: Iterator[pa.RecordBatch]) -> BatchMessage:
        self.target.in_worker()  # a Spark Python worker: acidstream settings, and the job's stores
        context = TaskContext.get()
        statement_id = statement_id_for(context.partitionId() if context is not None else 0)
        attempt = context.attemptNumber() if context is not None else 0
        with TxnKeepAlive(self.target, self.txn_id):
            return BatchMessage(write_task(self.target, self.write_id, statement_id, iterator, attempt))

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        self.target.in_worker()  # the commit worker, on the driver's host, is not the driver's process
        results = [m.result for m in messages if isinstance(m, BatchMessage)]
        try:
            commit_write(
                self.target.metastore(),
                self.target.name,
                self.txn_id,
                self.write_id,
                results,
                partitioned=bool(self.target.table.partition_keys),
            )
        except Exception as exc:
            self.abort(messages)
            raise TransactionError(
                f"committing txn {self.txn_id} into {self.target.name} failed: {exc}"
            ) from exc

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        self.target.in_worker()  # the commit worker: the job's stores, for the attempts' files
        ms = self.target.metastore()
        if ms.get_txn_state(self.txn_id).name == "OPEN":
            ms.abort_txn(self.txn_id)
        remove_attempts(self.target.table.location, self.write_id)  # the tasks' files: never to be moved in
