"""``df.writeStream.format("acidstream")``: one transaction per micro-batch, exactly once.

**Where the write id comes from.** Tasks write before ``commit(messages, batchId)`` runs (in a separate
Python worker) and no hook runs on the driver before a batch's tasks, while the write
id must be inside every event and directory name, so it cannot be assigned afterwards without rewriting
files. Each task with rows therefore *elects* the batch's transaction through the metastore itself: it opens
a txn labelled ``acidstream-spark-sink/<sink digest>/<batch>/<run digest>@<host>`` in the txn's host name,
lists the open txns with that label, and uses the lowest (aborting its own if it lost). The label is in the
host name because it is the one free-text field of a txn that every metastore keeps and reports: Hive 4's
``SHOW TRANSACTIONS`` reports every txn's agent info as "Unknown" (the agent info, the readable tag
``acidstream-spark-sink/<sink>/<batch>/<run>``, is kept on the txn's locks). Txn ids are handed out in commit order, so
every task sees at least the lowest txn opened before its own and all tasks agree; write-id allocation is
idempotent, so they all get the same write id. Each task then takes Hive's writer lock for the txn before it
writes (:mod:`acidstream.spark.writelock`). No new table or shared file system is needed, a crashed
task leaves nothing to clean up, and a retried task finds the same txn. The run id (Spark's job group of the
run) is in the tag so that a restarted query never reuses a txn whose tasks were killed mid-write: their
files stay under a write id that is aborted (by this sink's next commit, or by txn timeout).

**Exactly once.** The commit stores ``_meta.acidstream.sink.<sink>`` = ``{"queryId", "batchId", ...}`` as a
table property atomically with the data (``commit_txn(key, value)``, Hive's ``commitTxnWithKeyValue``), as
Delta's ``txnAppId/txnVersion`` and Iceberg's ``queryId/epochId`` do. A batch id not above the recorded one
for the same query is a replay: its tasks write nothing and its commit aborts. The sink id comes from the
``sinkId`` option or, by default, from the checkpoint location; if the same sink sees a *different* query id
(the checkpoint was lost and Spark regenerated the query, restarting batch ids at 0), the query fails rather
than silently duplicating or skipping data, unless ``sinkTakeover=true`` says the new query is meant to
continue the sink.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from acidstream.errors import AcidStreamError, StreamingConnectionError, TransactionError
from acidstream.metastore.models import TableDefinition, TxnStatus
from acidstream.spark.commit import commit_write, remove_attempts
from acidstream.spark.options import ResolvedTable, flag
from acidstream.spark.task_write import TaskResult, TxnKeepAlive, statement_id_for, write_task
from acidstream.spark.writelock import lock_for_write

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

PROPERTY_PREFIX = "_meta.acidstream.sink."
TAG_PREFIX = "acidstream-spark-sink/"


class SinkConflict(TransactionError):
    """Another query already owns this sink: continuing could duplicate or drop data."""


def sink_id_from(options: Mapping[str, str]) -> str:
    """``sinkId`` option, else a digest of the checkpoint location (stable across restarts of one query)."""
    opts = {k.lower(): v for k, v in options.items()}
    if opts.get("sinkid"):
        sink = opts["sinkid"]
        if not all(c.isalnum() or c in "-_." for c in sink):
            raise StreamingConnectionError(
                f"sinkId {sink!r} may contain only letters, digits, '-', '_' and '.'"
            )
        return sink
    checkpoint = opts.get("checkpointlocation")
    if not checkpoint:
        raise StreamingConnectionError(
            "the acidstream sink needs option checkpointLocation (or sinkId) to recognise replayed batches"
        )
    return "ck-" + hashlib.sha1(os.path.abspath(checkpoint).encode()).hexdigest()[:16]


#: A sink's property before its first commit: the driver makes it so, because a Hive Metastore only updates a
#: commit's key/value where the table already has that key.
NO_BATCH_YET = "{}"


@dataclass(frozen=True)
class SinkState:
    """The last batch committed into the table through one sink, read from the table's properties."""

    query_id: str
    batch_id: int

    @staticmethod
    def load(ms: MetastoreFacade, table: str, sink_id: str) -> SinkState | None:
        """The sink's last batch; None before its first (no property, or :data:`NO_BATCH_YET`)."""
        raw = ms.table(table).properties.get(PROPERTY_PREFIX + sink_id)
        data = json.loads(raw) if raw is not None else None
        if not data:
            return None
        return SinkState(str(data["queryId"]), int(data["batchId"]))


def check_batch(state: SinkState | None, sink_id: str, query_id: str, batch_id: int, takeover: bool) -> bool:
    """True when the batch must be written; False for a replay; SinkConflict for another query's sink."""
    if state is None:
        return True
    if state.query_id != query_id and not takeover:
        raise SinkConflict(
            f"sink {sink_id!r} was last committed by query {state.query_id} (batch {state.batch_id}); query "
            f"{query_id} is now at batch {batch_id}. Was the checkpoint lost? Restore it, or set option "
            "sinkTakeover=true to continue this sink with the new query (or use a new sinkId)."
        )
    return state.query_id != query_id or batch_id > state.batch_id


@dataclass
class StreamMessage(WriterCommitMessage):
    query_id: str
    txn_id: int | None  # None: the task had no rows, or the batch was a replay
    write_id: int | None
    result: TaskResult | None


#: Hive's limit on a txn's host name (``TXNS.TXN_HOST``), which holds the batch's label.
HOST_LENGTH = 128


def batch_tag(sink_id: str, batch_id: int, run_id: str) -> str:
    """The agent info of a batch's txns and locks: readable, for people listing them."""
    return f"{TAG_PREFIX}{sink_id}/{batch_id}/{run_id}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def sink_label(sink_id: str) -> str:
    """The start of the host name of every txn the sink opens (ids of any length fit Hive's column)."""
    return f"{TAG_PREFIX}{_digest(sink_id)}/"


def batch_label(sink_id: str, batch_id: int | str, run_id: str | None = None) -> str:
    """The start of the host name of a micro-batch's txns: of one run's, or (no ``run_id``) of every run's."""
    prefix = f"{sink_label(sink_id)}{batch_id}/"
    return prefix if run_id is None else f"{prefix}{_digest(run_id)}@"


def elect_batch_txn(ms: MetastoreFacade, table: TableDefinition, tag: str, label: str) -> tuple[int, int]:
    """The (txn, write id) every task of one micro-batch run agrees on: the lowest open txn whose host name
    starts with ``label``, locked by this task before it writes
    (:func:`~acidstream.spark.writelock.lock_for_write`)."""
    host = (label + socket.gethostname())[:HOST_LENGTH]
    (mine,) = ms.open_txns(1, user=getpass.getuser(), host=host, agent_info=tag)
    candidates = _labelled_open_txns(ms, label)
    leader = min([*candidates, mine])
    if leader != mine:
        ms.abort_txn(mine)
    ((_, write_id),) = ms.allocate_table_write_ids([leader], table.full_name)
    lock_for_write(ms, table, leader, tag)
    return leader, write_id


def abort_open_batches(ms: MetastoreFacade, sink_id: str) -> list[int]:
    """Abort the sink's transactions still open, for a query's owner once the query has stopped (its tasks
    will commit none of them); the ids aborted."""
    open_txns = _labelled_open_txns(ms, sink_label(sink_id))
    if open_txns:
        ms.abort_txns(open_txns)
    return open_txns


def _labelled_open_txns(ms: MetastoreFacade, prefix: str) -> list[int]:
    return [
        t.txn_id
        for t in ms.show_txns()
        if t.state is TxnStatus.OPEN and t.host is not None and t.host.startswith(prefix)
    ]


class AcidStreamWriter(DataSourceStreamArrowWriter):
    """Built by Spark in the planner and again for each commit, in the commit worker."""

    def __init__(self, target: ResolvedTable, options: Mapping[str, str]) -> None:
        self.target = target
        self.sink_id = sink_id_from(options)
        self.takeover = flag(options, "sinkTakeover")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamMessage:
        self.target.in_worker()  # a Spark Python worker: acidstream settings, and the job's stores
        context = TaskContext.get()
        if context is None:
            raise TransactionError("the acidstream stream writer runs only inside Spark tasks")
        batch_id = int(context.getLocalProperty("streaming.sql.batchId") or "0")
        query_id = context.getLocalProperty("sql.streaming.queryId") or ""
        run_id = context.getLocalProperty("spark.jobGroup.id") or query_id
        first = next(iterator, None)
        while first is not None and first.num_rows == 0:
            first = next(iterator, None)
        if first is None:
            return StreamMessage(query_id, None, None, None)
        ms = self.target.metastore()
        state = SinkState.load(ms, self.target.name, self.sink_id)
        if not check_batch(state, self.sink_id, query_id, batch_id, self.takeover):
            for _ in iterator:  # a replay of a committed batch: consume the input, write nothing
                pass
            return StreamMessage(query_id, None, None, None)
        statement_id = statement_id_for(context.partitionId())
        txn_id, write_id = elect_batch_txn(
            ms,
            self.target.table,
            batch_tag(self.sink_id, batch_id, run_id),
            batch_label(self.sink_id, batch_id, run_id),
        )

        def batches() -> Iterator[pa.RecordBatch]:
            yield first
            yield from iterator

        with TxnKeepAlive(self.target, txn_id):
            result = write_task(self.target, write_id, statement_id, batches(), context.attemptNumber())
        return StreamMessage(query_id, txn_id, write_id, result)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        self.target.in_worker()  # the commit worker, on the driver's host, is not the driver's process
        msgs = [m for m in messages if isinstance(m, StreamMessage)]
        written = [m for m in msgs if m.txn_id is not None]
        ms = self.target.metastore()
        if not written:
            return
        txns = {(m.txn_id, m.write_id) for m in written}
        if len(txns) != 1:
            self.abort(messages, batchId)
            raise TransactionError(
                f"micro-batch {batchId}: tasks disagree on the batch's transaction: {txns}"
            )
        ((txn_id, write_id),) = txns
        assert txn_id is not None and write_id is not None
        query_id = written[0].query_id
        state = SinkState.load(ms, self.target.name, self.sink_id)
        if not check_batch(state, self.sink_id, query_id, batchId, self.takeover):
            self._abort(ms, [txn_id], {write_id})  # a replay: its tasks' files are never to be moved in
            return
        key = PROPERTY_PREFIX + self.sink_id
        if state is None and key not in ms.table(self.target.name).properties:
            ms.alter_table_properties(self.target.name, {key: NO_BATCH_YET})
        value = json.dumps(
            {
                "queryId": query_id,
                "batchId": batchId,
                "txnId": txn_id,
                "writeId": write_id,
                "sinkId": self.sink_id,
            }
        )
        try:
            commit_write(
                ms,
                self.target.name,
                txn_id,
                write_id,
                [m.result for m in written if m.result is not None],
                partitioned=bool(self.target.table.partition_keys),
                key=key,
                value=value,
            )
        except Exception:
            with contextlib.suppress(AcidStreamError, OSError):
                if ms.get_txn_state(txn_id) is TxnStatus.OPEN:
                    self._abort(ms, [txn_id], {write_id})
            raise
        stale = [t for t in _labelled_open_txns(ms, sink_label(self.sink_id)) if t != txn_id]
        # txns of killed runs or lost elections of this sink: never to be committed
        self._abort(ms, stale, set())

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        self.target.in_worker()  # the commit worker: the job's stores, for the attempts' files
        ms = self.target.metastore()
        open_txns = _labelled_open_txns(ms, batch_label(self.sink_id, batchId))
        wrote = {m.write_id for m in messages if isinstance(m, StreamMessage) and m.write_id is not None}
        self._abort(ms, open_txns, wrote)

    def _abort(self, ms: MetastoreFacade, txn_ids: Sequence[int], write_ids: set[int]) -> None:
        """Abort the sink's ``txn_ids``, then delete the attempts their tasks wrote (and those of ``write_ids``):
        no commit will move them in. Tasks still writing find the txn over and delete their own; what a failure
        here leaves, the compactor's housekeeper deletes."""
        if not txn_ids and not write_ids:
            return
        if txn_ids:
            # idempotent: the write id each txn has (a task may have allocated it); a fresh one for a txn without.
            # A txn that ended meanwhile refuses: its attempts are the housekeeper's to delete.
            with contextlib.suppress(AcidStreamError):
                allocated = ms.allocate_table_write_ids(list(txn_ids), self.target.name)
                write_ids = write_ids | {w for _, w in allocated}
            ms.abort_txns(list(txn_ids))
        for write_id in sorted(write_ids):
            remove_attempts(self.target.table.location, write_id)
