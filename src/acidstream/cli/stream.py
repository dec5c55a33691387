"""``acidstream stream`` (stdin → table, committing by count or time) and ``acidstream cat`` (table → stdout)."""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO

import click
import pyarrow as pa
from rich.console import Console

from acidstream.cli._delimiter import ESCAPES, delimiter_option
from acidstream.cli._interrupt import checkpoint, deferred_interrupts
from acidstream.cli._options import metastore_options, open_metastore
from acidstream.cli._text import console as text_console
from acidstream.cli._text import hive_row
from acidstream.errors import SerializationError
from acidstream.streaming.writers import (
    DEFAULT_LINE_DELIMITER_PATTERN,
    RecordWriter,
    StrictCsvWriter,
    StrictDelimitedInputWriter,
    StrictJsonWriter,
    StrictRegexWriter,
)

if TYPE_CHECKING:
    from acidstream.streaming.connection import StreamingConnection

_END = object()
#: Seconds between looks for a signal while input is idle.
SIGNAL_POLL = 0.2
#: The summary gives a rate only for records that came over at least this long (seconds) and more than one
#: transaction: a shorter stream measures one commit, not a throughput.
RATE_AFTER = 1.0
#: ``--format`` choices and what they are.
FORMATS = {
    "csv": "RFC 4180 CSV as spreadsheets write it: fields may be quoted",
    "delimited": "Hive's delimited text (LazySimpleSerDe, StrictDelimitedInputWriter): quotes are data",
    "json": "one JSON object per line",
    "regex": "--regex's groups are the columns",
}


def _record_writer(fmt: str, delimiter: str, regex: str | None) -> RecordWriter:
    try:
        if fmt == "csv":
            return StrictCsvWriter.builder().with_field_delimiter(delimiter).build()
        if fmt == "delimited":
            return StrictDelimitedInputWriter.builder().with_field_delimiter(delimiter).build()
        if fmt == "json":
            return StrictJsonWriter.builder().build()
        if not regex:
            raise click.UsageError("--format regex needs --regex PATTERN")
        return StrictRegexWriter.builder().with_regex(regex).build()
    except ValueError as exc:  # the writer's configuration: a usage error naming the option
        option = "--regex" if fmt == "regex" else "--delimiter"
        raise click.BadParameter(str(exc), param_hint=f"'{option}'") from exc


def _reader_thread(writer: RecordWriter, stream: BinaryIO, out: queue.Queue[Any]) -> None:
    """Read stdin off the main thread, so commits by time happen even while input is idle."""
    try:
        for chunk in writer.split(stream):
            out.put(chunk)
    except BaseException as exc:  # surfaced in the main thread
        out.put(exc)
    out.put(_END)


@click.command("stream")
@click.argument("table")
@metastore_options
@click.option("--partition", help="Static partition values, comma separated (default: dynamic partitioning).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(FORMATS)),
    default="csv",
    show_default=True,
    help="; ".join(f"{name}: {what}" for name, what in FORMATS.items()) + ".",
)
@click.option(
    "--delimiter",
    default=",",
    show_default=True,
    callback=delimiter_option,
    help=f"Field delimiter for csv and delimited: one ASCII character, or an escape naming one ({ESCAPES}).",
)
@click.option("--regex", help="Regular expression (RE2) whose groups are the columns, for --format regex.")
@click.option("--records-per-txn", type=click.IntRange(1), default=10000, show_default=True)
@click.option(
    "--commit-interval", type=click.FloatRange(0.01), default=10.0, show_default=True, help="Seconds."
)
@click.option(
    "--batch-size", type=click.IntRange(1, 1000), default=1, show_default=True, help="Txns per batch."
)
@click.option("--agent-info", default=None, help="Shown in SHOW LOCKS (default user:host:thread).")
@click.option(
    "--dead-letter", type=click.Path(dir_okay=False), help="Write bad records here instead of failing."
)
def stream_command(
    table: str,
    metastore: str,
    warehouse: str,
    partition: str | None,
    fmt: str,
    delimiter: str,
    regex: str | None,
    records_per_txn: int,
    commit_interval: float,
    batch_size: int,
    agent_info: str | None,
    dead_letter: str | None,
) -> None:
    """Stream records from stdin into TABLE (db.table), committing every N records or T seconds.

    A bad record fails the command (exit 3) and aborts the transaction holding it; the transactions before it
    stay committed, and the message says which input records those were. With --dead-letter FILE bad records
    go to FILE (one JSON line each) and the rest are committed.
    """
    from acidstream.streaming.connection import StreamingConnection

    db, _, name = table.partition(".")
    if not name:
        raise click.UsageError("TABLE must be db.table")
    writer = _record_writer(fmt, delimiter, regex)
    console = text_console(stderr=True)
    with open_metastore(metastore, warehouse) as ms:
        builder = (
            StreamingConnection.builder()
            .with_metastore(ms)
            .with_database(db)
            .with_table(name)
            .with_record_writer(writer)
            .with_transaction_batch_size(batch_size)
        )
        if partition is not None:
            builder = builder.with_static_partition_values(partition.split(","))
        if agent_info:
            builder = builder.with_agent_info(agent_info)
        if dead_letter:
            builder = builder.with_dead_letter_file(dead_letter)
        ingest = _Ingest(records_per_txn, commit_interval)
        with builder.connect() as conn:
            # Unbuffered fd 0: a daemon thread blocked in a buffered read would hold the buffer's lock and
            # abort the interpreter at exit (e.g. after an error); it starts only once the table is reachable.
            stdin = open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)  # noqa: SIM115
            chunks: queue.Queue[Any] = queue.Queue(maxsize=8)
            threading.Thread(target=_reader_thread, args=(writer, stdin, chunks), daemon=True).start()
            try:
                ingest.run(conn, chunks, lambda: _progress(console, ingest))
            except SerializationError as exc:
                ingest.explain(exc, lines=writer.line_delimiter_pattern == DEFAULT_LINE_DELIMITER_PATTERN)
                raise  # leaving the connection aborts the open transaction, as the notes say
            except KeyboardInterrupt as exc:  # SIGINT or SIGTERM: the same
                ingest.note_committed(exc)
                raise
    _progress(console, ingest)


class _Ingest:
    """The loop of ``stream``: records from the reader thread into transactions of ``records_per_txn``.

    It counts what is committed, so that a failure can say exactly which input records are in the table.
    """

    def __init__(self, records_per_txn: int, commit_interval: float) -> None:
        self.records_per_txn = records_per_txn
        self.commit_interval = commit_interval
        self.started: float | None = None  # when the first records came
        self.committed_records = 0  # input records in committed transactions
        self.rejected = 0  # of those, the bad ones that went to the dead-letter file
        self.short = 0  # of those, the ones with fewer fields than the table's columns (NULL for the rest)
        self.committed_txns = 0
        self.in_txn = 0  # records handed to the open transaction

    def run(self, conn: StreamingConnection, chunks: queue.Queue[Any], report: Callable[[], None]) -> None:
        """Signals are acted on between chunks of records (at most :data:`SIGNAL_POLL` s apart while input is
        idle), never inside a write or a commit: the notes then say exactly what is committed."""
        with deferred_interrupts():
            self._run(conn, chunks, report)

    def _run(self, conn: StreamingConnection, chunks: queue.Queue[Any], report: Callable[[], None]) -> None:
        deadline = time.monotonic() + self.commit_interval
        while True:
            try:
                item = chunks.get(timeout=min(SIGNAL_POLL, max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                item = None
            checkpoint()  # a signal that came while waiting is acted on before what came with it
            if item is None and time.monotonic() < deadline:
                continue
            if isinstance(item, BaseException):
                raise item
            if item is not None and item is not _END:
                self.started = self.started or time.monotonic()
                for piece in _slices(item, self.records_per_txn - self.in_txn, self.records_per_txn):
                    if self.in_txn == 0:
                        conn.begin_transaction()
                        deadline = time.monotonic() + self.commit_interval
                    self.in_txn += len(piece)
                    conn.write_record_array(piece)
                    if self.in_txn >= self.records_per_txn:
                        self._commit(conn)
            if self.in_txn and (item is _END or time.monotonic() >= deadline):
                self._commit(conn)
            if item is _END:
                return
            if item is None:  # idle input: report now and then
                deadline = time.monotonic() + self.commit_interval
                report()

    def _commit(self, conn: StreamingConnection) -> None:
        conn.commit_transaction()
        self.committed_records += self.in_txn
        stats = conn.stats()  # every record is parsed by its txn's commit
        self.rejected, self.short = stats["records_rejected"], stats["records_short"]
        self.committed_txns += 1
        self.in_txn = 0

    def note_committed(self, exc: BaseException) -> None:
        """Notes on ``exc``: which input records are committed and which are not (the open txn is aborted)."""
        done = self.committed_records
        exc.add_note(
            f"committed: {f'input records 1-{done:,}' if done else 'nothing'} "
            f"({_count(self.committed_txns, 'transaction')})"
        )
        if self.in_txn:
            exc.add_note(
                f"not committed: input records {done + 1:,}-{done + self.in_txn:,} (their transaction is aborted) "
                "and all input after them"
            )
        else:
            exc.add_note(f"not committed: {f'the input after record {done:,}' if done else 'any input'}")

    def explain(self, exc: SerializationError, *, lines: bool) -> None:
        """Notes on ``exc``: which input records are committed, which are not, how to keep the good ones."""
        done = self.committed_records
        if exc.record_index is not None:
            exc.add_note(
                f"the bad one is input record {done + exc.record_index + 1:,} (records: non-empty lines, from 1)"
            )
        self.note_committed(exc)
        skip = (
            f"if the input has no empty lines (nor line breaks inside quotes), `tail -n +{done + 1}` skips the "
            "committed records; "
            if lines and done
            else ""
        )
        exc.add_note(
            f"to keep the good records, stream the rest again with --dead-letter FILE ({skip}bad records "
            "then go to FILE as JSON lines and the others are committed)"
        )


def _slices(chunk: pa.Array, first: int, size: int) -> list[pa.Array]:
    """Cut a chunk of records so that transactions end exactly every ``size`` records."""
    pieces = [chunk.slice(0, first)] if first < len(chunk) else [chunk]
    offset = len(pieces[0])
    while offset < len(chunk):
        pieces.append(chunk.slice(offset, size))
        offset += size
    return [p for p in pieces if len(p)]


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _progress(console: Console, ingest: _Ingest) -> None:
    elapsed = time.monotonic() - ingest.started if ingest.started else 0.0
    rows = ingest.committed_records - ingest.rejected
    rated = elapsed >= RATE_AFTER and ingest.committed_txns > 1
    rate = f", {ingest.committed_records / elapsed:,.0f} records/s" if rated else ""
    console.print(
        f"[bold]{_count(rows, 'row')}[/] committed in {_count(ingest.committed_txns, 'txn')}, "
        f"{_count(ingest.rejected, 'record')} rejected{rate}"
    )
    if ingest.short:
        console.print(
            f"{_count(ingest.short, 'record')} had fewer fields than the table's columns: the missing values "
            "are NULL (a missing partition value puts the row in __HIVE_DEFAULT_PARTITION__), as Hive reads them"
        )


@click.command("cat")
@click.argument("table")
@metastore_options
@click.option("--limit", type=click.IntRange(0), default=None, help="Print at most this many rows.")
@click.option("--row-id", is_flag=True, help="Print ROW__ID as Hive shows it.")
@click.option("--columns", default=None, help="Comma-separated columns to print (default: all).")
def cat_command(
    table: str, metastore: str, warehouse: str, limit: int | None, row_id: bool, columns: str | None
) -> None:
    """Print TABLE's rows visible now, tab separated like Hive's CLI (NULL for nulls)."""
    with open_metastore(metastore, warehouse) as ms:
        scan = ms.table(table).scan(columns=columns.split(",") if columns else None, with_row_id=row_id)
        printed = 0
        out = sys.stdout
        for batch in scan.to_batches():
            for record in batch.to_pylist():
                if limit is not None and printed >= limit:
                    return
                out.write(hive_row(record.values()) + "\n")
                printed += 1


def register(cli: click.Group) -> None:
    cli.add_command(stream_command)
    cli.add_command(cat_command)
