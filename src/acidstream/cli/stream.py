"""``acidstream stream`` (stdin → table, committing by count or time) and ``acidstream cat`` (table → stdout)."""

from __future__ import annotations

import queue
import sys
import threading
import time
from typing import Any, BinaryIO

import click
import pyarrow as pa
from rich.console import Console

from acidstream.cli._options import default_metastore_url, metastore_options
from acidstream.cli._text import hive_row
from acidstream.streaming.records import split_records
from acidstream.streaming.writers import (
    RecordWriter,
    StrictDelimitedInputWriter,
    StrictJsonWriter,
    StrictRegexWriter,
)

_END = object()


def _record_writer(fmt: str, delimiter: str, regex: str | None) -> RecordWriter:
    if fmt == "csv":
        return StrictDelimitedInputWriter.builder().with_field_delimiter(delimiter).build()
    if fmt == "json":
        return StrictJsonWriter.builder().build()
    if not regex:
        raise click.UsageError("--format regex needs --regex PATTERN")
    return StrictRegexWriter.builder().with_regex(regex).build()


def _reader_thread(stream: BinaryIO, pattern: str, out: queue.Queue[Any]) -> None:
    """Read stdin off the main thread, so commits by time happen even while input is idle."""
    try:
        for chunk in split_records(stream, pattern):
            out.put(chunk)
    except BaseException as exc:  # surfaced in the main thread
        out.put(exc)
    out.put(_END)


@click.command("stream")
@click.argument("table")
@metastore_options
@click.option("--partition", help="Static partition values, comma separated (default: dynamic partitioning).")
@click.option(
    "--format", "fmt", type=click.Choice(["csv", "json", "regex"]), default="csv", show_default=True
)
@click.option("--delimiter", default=",", show_default=True, help="Field delimiter for --format csv.")
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
    metastore: str | None,
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
    """Stream records from stdin into TABLE (db.table), committing every N records or T seconds."""
    from acidstream.catalog import Metastore
    from acidstream.streaming.connection import StreamingConnection

    db, _, name = table.partition(".")
    if not name:
        raise click.UsageError("TABLE must be db.table")
    writer = _record_writer(fmt, delimiter, regex)
    console = Console(stderr=True)
    ms = Metastore.connect(metastore or default_metastore_url(warehouse), warehouse=warehouse)
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
    with builder.connect() as conn, ms:
        # Unbuffered fd 0: a daemon thread blocked in a buffered read would hold the buffer's lock and abort
        # the interpreter at exit (e.g. after an error); the thread starts only once the table is reachable.
        stdin = open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)  # noqa: SIM115
        chunks: queue.Queue[Any] = queue.Queue(maxsize=8)
        threading.Thread(
            target=_reader_thread, args=(stdin, writer.line_delimiter_pattern, chunks), daemon=True
        ).start()
        started = time.monotonic()
        in_txn = 0
        deadline = time.monotonic() + commit_interval
        while True:
            try:
                item = chunks.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                item = None
            if isinstance(item, BaseException):
                raise item
            if item is not None and item is not _END:
                for piece in _slices(item, records_per_txn - in_txn, records_per_txn):
                    if in_txn == 0:
                        conn.begin_transaction()
                        deadline = time.monotonic() + commit_interval
                    conn.write_record_array(piece)
                    in_txn += len(piece)
                    if in_txn >= records_per_txn:
                        conn.commit_transaction()
                        in_txn = 0
            if in_txn and (item is _END or time.monotonic() >= deadline):
                conn.commit_transaction()
                in_txn = 0
            if item is None or item is _END:
                deadline = time.monotonic() + commit_interval
                _progress(console, conn.stats(), started)
            if item is _END:
                break
        stats = conn.stats()
    _progress(console, stats, started)


def _slices(chunk: pa.Array, first: int, size: int) -> list[pa.Array]:
    """Cut a chunk of records so that transactions end exactly every ``size`` records."""
    pieces = [chunk.slice(0, first)] if first < len(chunk) else [chunk]
    offset = len(pieces[0])
    while offset < len(chunk):
        pieces.append(chunk.slice(offset, size))
        offset += size
    return [p for p in pieces if len(p)]


def _progress(console: Console, stats: dict[str, int], started: float) -> None:
    elapsed = max(time.monotonic() - started, 1e-9)
    console.print(
        f"[bold]{stats['records_written']:,}[/] records, {stats['committed_txns']} txns committed, "
        f"{stats['records_rejected']} rejected, {stats['records_written'] / elapsed:,.0f} records/s"
    )


@click.command("cat")
@click.argument("table")
@metastore_options
@click.option("--limit", type=click.IntRange(0), default=None, help="Print at most this many rows.")
@click.option("--row-id", is_flag=True, help="Print ROW__ID as Hive shows it.")
@click.option("--columns", default=None, help="Comma-separated columns to print (default: all).")
def cat_command(
    table: str, metastore: str | None, warehouse: str, limit: int | None, row_id: bool, columns: str | None
) -> None:
    """Print TABLE's rows visible now, tab separated like Hive's CLI (NULL for nulls)."""
    from acidstream.catalog import Metastore

    with Metastore.connect(metastore or default_metastore_url(warehouse), warehouse=warehouse) as ms:
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
