"""The executor half of every Spark write: one task = one unmanaged streaming connection.

The write id belongs to a transaction owned elsewhere (the batch job's driver, or the micro-batch's elected
task); each task writes ``delta_w_w_<stmt>`` files under its own statement id, so tasks of one transaction
never share a file, and reports what it wrote in a picklable :class:`TaskResult` for the committer.

Each task *attempt* writes below a directory of its own, hidden from every reader (``_acidstream_attempts/``
under the table's, as Hive's ``hiddenFileFilter`` hides it): two attempts of one task (a retry beside a lost
executor's, or a speculative copy) never touch each other's files, and only the committer moves the files of
the attempts Spark took into the table (:func:`acidstream.spark.commit.commit_write`). A losing attempt still
writing after the commit writes only there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.acid.attempts import ATTEMPTS_DIR, write_attempt, write_attempts_prefix
from acidstream.acid.names import delta_dir
from acidstream.acid.partitions import parse_part_name
from acidstream.errors import TransactionError
from acidstream.spark.options import ResolvedTable

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

#: ``Metastore.connect``'s default ``txn_timeout``: tasks beat at half of it.
DEFAULT_TXN_TIMEOUT = 300.0
#: Statement ids share 12 bits of the bucket property with nothing else (BucketCodec V1).
MAX_STATEMENT_ID = 4095


@dataclass(frozen=True)
class TaskResult:
    """What one task attempt wrote: rows, and per touched partition its values and files (below ``staged``,
    the attempt's own directory, until the committer moves them into the table)."""

    statement_id: int
    attempt: int  # Spark's attempt number
    rows: int
    partitions: tuple[tuple[tuple[str, ...], str, tuple[str, ...]], ...]  # (values, name, files)
    staged: str = ""  # the attempt's directory, standing for the table's in the files' paths


def attempts_prefix(table_dir: str, write_id: int) -> str:
    """Where the attempts of ``write_id``'s tasks write: directories ``<this><stmt>_<attempt>``."""
    return f"{table_dir}/{ATTEMPTS_DIR}/{write_attempts_prefix(write_id)}"


def attempt_name(attempt: int) -> str:
    """This task attempt's name, unique in the application (Spark's task attempt id) where Spark runs it."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return f"t{context.taskAttemptId()}" if context is not None else f"a{attempt}"


def attempt_dir(table_dir: str, write_id: int, statement_id: int, attempt: int) -> str:
    """The directory where this attempt of the task writing ``statement_id`` of ``write_id`` writes."""
    return f"{table_dir}/{ATTEMPTS_DIR}/{write_attempt(write_id, statement_id, attempt_name(attempt))}"


def statement_id_for(partition_id: int) -> int:
    """Task partition ``p`` writes statement ``p``; beyond 12 bits the write must fail, not wrap around."""
    if not 0 <= partition_id <= MAX_STATEMENT_ID:
        raise TransactionError(
            f"Spark task partition {partition_id} has no statement id: one transaction holds at most "
            f"{MAX_STATEMENT_ID + 1} statements; coalesce the DataFrame to fewer partitions before writing"
        )
    return partition_id


class TxnKeepAlive:
    """Heartbeat a transaction from a task while it writes, so long tasks do not see it time out.

    Beats every ``interval`` seconds (default: half the metastore client's txn timeout, as Hive does); the
    first beat, and so the task's metastore connection, only happens once a task outlives one interval.
    """

    def __init__(self, target: ResolvedTable, txn_id: int, interval: float | None = None) -> None:
        self._target = target
        self._txn_id = txn_id
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"acidstream-keepalive-{txn_id}", daemon=True)

    def __enter__(self) -> TxnKeepAlive:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        interval = self._interval or DEFAULT_TXN_TIMEOUT / 2
        while not self._stop.wait(interval):
            try:
                self._target.metastore().heartbeat(self._txn_id)
            except Exception:  # an aborted txn is the committer's to report: never kill the write
                return


def write_task(
    target: ResolvedTable,
    write_id: int,
    statement_id: int,
    batches: Iterable[pa.RecordBatch],
    attempt: int = 0,
) -> TaskResult:
    """Write every batch (table columns, then partition columns when dynamic) under ``write_id``, below this
    attempt's own directory (module docstring); a failing attempt deletes it."""
    from acidstream.streaming.connection import StreamingConnection
    from acidstream.streaming.writers import StrictDelimitedInputWriter

    location = target.table.location.rstrip("/")
    staged = dataclasses.replace(
        target.table, location=attempt_dir(location, write_id, statement_id, attempt)
    )
    writer = StrictDelimitedInputWriter.builder().build()  # unused: write_batch bypasses parsing
    conn = (
        StreamingConnection.builder()
        .with_table_object(staged)
        .with_write_id(write_id)
        .with_statement_id(statement_id)
        .with_record_writer(writer)
        .with_agent_info(f"acidstream-spark-task:{statement_id}")
        .connect()
    )
    rows = 0
    try:
        conn.begin_transaction()
        for chunk in coalesce(batches, COALESCE_ROWS):
            conn.write_batch(chunk)
            rows += chunk.num_rows
        conn.commit_transaction()
    except BaseException:
        try:
            conn.abort_transaction()
        finally:
            conn.close()
            with contextlib.suppress(FileNotFoundError, OSError):
                conn.fs.delete_dir(conn.table_dir)
        raise
    conn.close()
    written = _written(conn.fs, conn.table_dir, conn.partitions(), write_id, statement_id, target)
    discard_if_ended(conn.fs, conn.table_dir, target.metastore(), target.name, write_id)
    return TaskResult(statement_id, attempt, rows, written, conn.table_dir)


def discard_if_ended(
    fs: pafs.FileSystem, directory: str, metastore: MetastoreFacade, table: str, write_id: int
) -> None:
    """Delete an attempt's ``directory`` if ``write_id``'s txn is over (committed or aborted): a losing attempt
    that outlived the commit (or abort), whose files nothing will move or delete. Asked once its files are
    whole: if the txn is not over, the commit, which deletes every attempt's directory after committing, comes
    after them."""
    ids = metastore.get_valid_write_ids(table)
    if ids.is_write_id_valid(write_id) or ids.is_write_id_aborted(write_id):
        with contextlib.suppress(FileNotFoundError, OSError):
            fs.delete_dir(directory)


#: Spark hands Python 10,000-row Arrow batches; routing and buffering cost per call, so tasks route larger chunks.
COALESCE_ROWS = 64 * 1024


def coalesce(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """The batches' rows, in order, as tables of at least ``rows`` rows (the last may hold fewer)."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        pending.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield pa.Table.from_batches(pending)
            pending, count = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def _partition_dirs(
    table_dir: str, names: list[str], target: ResolvedTable
) -> Iterator[tuple[tuple[str, ...], str, str]]:
    if not target.table.partition_keys:
        yield (), "", table_dir
        return
    for name in names:
        yield tuple(parse_part_name(name).values()), name, f"{table_dir}/{name}"


def _written(
    fs: pafs.FileSystem,
    table_dir: str,
    names: list[str],
    write_id: int,
    statement_id: int,
    target: ResolvedTable,
) -> tuple[tuple[tuple[str, ...], str, tuple[str, ...]], ...]:
    out = []
    for values, name, directory in _partition_dirs(table_dir, names, target):
        delta = f"{directory}/{delta_dir(write_id, write_id, statement_id)}"
        infos = fs.get_file_info(pafs.FileSelector(delta, allow_not_found=True))
        files = tuple(sorted(i.path for i in infos if i.type == pafs.FileType.File))
        if files:
            out.append((values, name, files))
    return tuple(out)
