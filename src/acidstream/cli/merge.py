"""``acidstream merge``: apply a change file (or a directory of them) to a table by key, in one transaction."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import click
import pyarrow as pa
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from acidstream.cli import EXIT_CODES_HELP
from acidstream.cli._delimiter import ESCAPES, delimiter_option
from acidstream.cli._interrupt import checkpoint, deferred_interrupts
from acidstream.cli._options import metastore_options, open_metastore
from acidstream.cli._text import console as text_console
from acidstream.errors import SerializationError

if TYPE_CHECKING:
    from acidstream.catalog import Table
    from acidstream.mutate.merge import MatchedAction

#: File name endings of each source format (``--format auto`` goes by them).
FORMATS: dict[str, tuple[str, ...]] = {
    "parquet": (".parquet", ".parq", ".pq"),
    "csv": (".csv", ".tsv"),
    "json": (".json", ".jsonl", ".ndjson"),
    "orc": (".orc",),
}


_WHEN_MATCHED: dict[str, MatchedAction] = {"update": "update", "delete": "delete", "ignore": None}


@click.command("merge", epilog=EXIT_CODES_HELP)
@click.argument("table")
@metastore_options
@click.option(
    "--source",
    "source_path",
    required=True,
    type=click.Path(exists=True, readable=True),
    help="Change file (Parquet, CSV with a header line, JSON lines, ORC) or a directory of them.",
)
@click.option("--on", "keys", multiple=True, required=True, help="Key column; repeat for a composite key.")
@click.option(
    "--when-matched",
    type=click.Choice(["update", "delete", "ignore"]),
    default="update",
    show_default=True,
    help="What a source row does to the target row with its key.",
)
@click.option("--no-insert", is_flag=True, help="Do not insert source rows whose key is not in the table.")
@click.option("--delete-missing", is_flag=True, help="Delete target rows whose key is not in the source.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", *FORMATS]),
    default="auto",
    show_default=True,
    help="Source format; auto goes by file name endings.",
)
@click.option(
    "--delimiter",
    default=None,
    callback=delimiter_option,
    help=f"CSV field delimiter: one ASCII character, or an escape naming one ({ESCAPES}).  "
    "[default: ',', tab for .tsv]",
)
def merge_command(
    table: str,
    metastore: str,
    warehouse: str,
    source_path: str,
    keys: Sequence[str],
    when_matched: str,
    no_insert: bool,
    delete_missing: bool,
    fmt: str,
    delimiter: str | None,
) -> None:
    """Merge a change set into TABLE (db.table) by key, in one transaction.

    Source rows whose key matches a target row update it (columns the source lacks keep their value; with
    --when-matched delete, delete it); the others are inserted (unless --no-insert); with --delete-missing,
    target rows whose key is in no source row are deleted: the table becomes the source. Source columns are
    matched to the table's by name (case-insensitive) and converted to their types; inserted rows of a
    partitioned table need its partition columns. A key in two source rows is an error (exit code 2). Nothing is
    visible until the commit, and a failure commits nothing.

    \b
    Example:
      acidstream merge bank.accounts --source changes.parquet --on id
      acidstream merge bank.accounts --source snapshot/ --on id --delete-missing
    """
    from acidstream.mutate.merge import merge

    files = _source_files(source_path, fmt)
    console = text_console(stderr=True)
    started = time.monotonic()
    with (
        open_metastore(metastore, warehouse) as ms,
        Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,  # a log gets the summary line only
        ) as progress,
    ):
        target = ms.table(table)
        _check_keys(target, keys)
        step = progress.add_task("reading the source")

        def report(text: str) -> None:  # each step of the merge: where a signal stops it
            checkpoint()
            progress.update(step, description=text)

        counts = None
        try:
            with deferred_interrupts():
                source = _read_source(files, fmt, delimiter, target, report)
                counts = merge(
                    ms,
                    target.full_name,
                    source,
                    list(keys),
                    when_matched=_WHEN_MATCHED[when_matched],
                    when_not_matched=None if no_insert else "insert",
                    when_not_matched_by_source="delete" if delete_missing else None,
                    progress=report,
                )
        except KeyboardInterrupt as exc:  # SIGINT or SIGTERM
            what = "nothing (the merge is one transaction: aborted)" if counts is None else _counted(counts)
            exc.add_note(f"committed to {target.full_name}: {what}")
            raise
    seconds = time.monotonic() - started
    console.print(
        f"[bold]{target.full_name}[/]: {_counted(counts)} from {source.num_rows:,} source rows in {seconds:.1f} s"
    )


def _counted(counts: Mapping[str, int]) -> str:
    return f"{counts['inserted']:,} inserted, {counts['updated']:,} updated, {counts['deleted']:,} deleted"


def _check_keys(target: Table, keys: Sequence[str]) -> None:
    """--on names columns of the table (a mistake there is a usage error, not a bad source)."""
    columns = [c.name for c in target.all_columns]
    unknown = [k for k in keys if k.lower() not in columns]
    if unknown:
        raise click.BadParameter(
            f"{', '.join(unknown)}: not a column of {target.full_name} (its columns: {', '.join(columns)})",
            param_hint="--on",
        )


def _source_files(path: str, fmt: str) -> list[tuple[str, str]]:
    """(file, format) of each file to read: ``path`` itself, or the data files of the directory ``path``."""
    if not os.path.isdir(path):
        return [(path, _format_of(path, fmt, explicit=True))]
    names = sorted(n for n in os.listdir(path) if not n.startswith((".", "_")))  # _SUCCESS, .crc, ...
    files = [(os.path.join(path, n), _format_of(n, fmt, explicit=False)) for n in names]
    found = [(f, kind) for f, kind in files if kind and os.path.isfile(f)]
    if not found:
        endings = ", ".join(e for group in FORMATS.values() for e in group)
        raise click.UsageError(f"no source files in {path} (looked for {endings}; or give --format)")
    return found


def _format_of(name: str, fmt: str, *, explicit: bool) -> str:
    if fmt != "auto":
        return fmt
    lowered = name.lower()
    kind = next((k for k, endings in FORMATS.items() if lowered.endswith(endings)), "")
    if not kind and explicit:
        raise click.UsageError(f"cannot tell the format of {name} from its name: give --format")
    return kind


def _read_source(
    files: list[tuple[str, str]],
    fmt: str,
    delimiter: str | None,
    target: Table,
    report: Callable[[str], None],
) -> pa.Table:
    """Every source file as one table; a file that does not read is an error naming it."""
    tables = []
    rows = 0
    for i, (path, kind) in enumerate(files):
        shown = f" ({i + 1} of {len(files)} files)" if len(files) > 1 else ""
        report(f"reading the source{shown}: {rows:,} rows")
        try:
            table = _read_file(path, kind, delimiter, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OSError) as exc:
            raise SerializationError(f"cannot read {path} as {kind}: {exc}") from exc
        tables.append(table)
        rows += table.num_rows
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SerializationError(f"the source files' columns do not agree: {exc}") from exc


def _read_file(path: str, kind: str, delimiter: str | None, target: Table) -> pa.Table:
    if kind == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path)
    if kind == "orc":
        import pyarrow.orc as orc

        return orc.read_table(path)
    if kind == "json":
        import pyarrow.json as pj

        return pj.read_json(path)
    import pyarrow.csv as pcsv

    sep = delimiter or ("\t" if path.lower().endswith(".tsv") else ",")
    parse = pcsv.ParseOptions(delimiter=sep)
    # the table's types for its columns, so that a string column of digits keeps its leading zeros
    with pcsv.open_csv(path, parse_options=parse) as reader:
        header = reader.schema.names
    types = {c.name: c.type.to_arrow() for c in target.all_columns}
    column_types = {name: types[name.lower()] for name in header if name.lower() in types}
    return pcsv.read_csv(
        path, parse_options=parse, convert_options=pcsv.ConvertOptions(column_types=column_types)
    )


def register(cli: click.Group) -> None:
    cli.add_command(merge_command)
