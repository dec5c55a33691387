"""Metastore commands: ``metastore init``, ``sql``, ``show ...`` and the ``housekeeper`` loop."""

from __future__ import annotations

import json  # a JSON string is a TOML basic string
import os
import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click

from acidstream.cli import EXIT_CODES_HELP
from acidstream.cli._options import (
    CONFIG_FILE,
    LOCATION_KEY,
    Location,
    default_metastore_url,
    metastore_options,
    open_metastore,
)
from acidstream.cli._text import iso_utc
from acidstream.metastore.ddl import SHOW_COMPACTIONS_COLUMNS

#: First words of statements ``sql`` does not run, and where they go instead.
_QUERY_WORDS = frozenset({"select", "with", "from", "values", "table", "explain"})
_WRITE_WORDS = frozenset({"insert", "load", "truncate"})

#: Header lines of the state listings (tab separated like their rows).
TXN_COLUMNS = ("txn_id", "state", "started", "last_heartbeat", "user", "host", "agent_info")
LOCK_COLUMNS = (
    "lock_id",
    "db",
    "table",
    "partition",
    "state",
    "type",
    "txn_id",
    "last_heartbeat",
    "acquired",
    "user",
    "host",
    "agent_info",
    "blocked_by",
)


@dataclass(frozen=True)
class Listing:
    """A state listing: its header line, its time columns (epoch ms, printed ISO-8601 UTC), what an empty one
    says (on stderr, so that nobody wonders)."""

    header: tuple[str, ...]
    times: frozenset[str]
    empty: str

    def echo(self, rows: Sequence[Sequence[Any]], empty: str | None = None) -> None:
        at = [i for i, name in enumerate(self.header) if name in self.times]
        shown = [[iso_utc(v) if i in at and v else v for i, v in enumerate(row)] for row in rows]
        _echo_rows([self.header, *shown])
        if not rows:
            click.echo(empty or self.empty, err=True)


TXNS = Listing(TXN_COLUMNS, frozenset({"started", "last_heartbeat"}), "no open or aborted transactions")
LOCKS = Listing(LOCK_COLUMNS, frozenset({"last_heartbeat", "acquired"}), "no locks")
COMPACTIONS = Listing(
    SHOW_COMPACTIONS_COLUMNS,
    frozenset({"Enqueue Time", "Start Time", "Commit Time"}),
    "no compactions queued or recorded",
)
#: ``SHOW <word>`` statements of ``sql`` printed as the listings above.
_SHOW_LISTINGS = {"transactions": TXNS, "locks": LOCKS, "compactions": COMPACTIONS}
_SHOW = re.compile(r"\s*show\s+(\w+)", re.IGNORECASE)


def _echo_rows(rows: Sequence[Sequence[Any]]) -> None:
    for row in rows:
        click.echo("\t".join("" if v is None else str(v) for v in row))


@click.group("metastore")
def metastore_group() -> None:
    """Administer the metastore database."""


@metastore_group.command("init")
@metastore_options
@click.option("--no-config", is_flag=True, help=f"Do not write ./{CONFIG_FILE}.")
def init(metastore: str, warehouse: str, no_config: bool) -> None:
    """Create the metastore (or check an existing one's schema version) and record where it is.

    Unless the location came from an acidstream.toml already, writes ./acidstream.toml naming it, so every
    command run in this directory or below finds it.
    """
    from acidstream.metastore.sql.schema import SCHEMA_VERSION

    if "://" not in warehouse:
        os.makedirs(warehouse, exist_ok=True)
    with open_metastore(metastore, warehouse, create=True) as ms:
        click.echo(f"metastore ready at {ms.url} (schema version {SCHEMA_VERSION}), warehouse {warehouse}")
    location: Location = click.get_current_context().meta[LOCATION_KEY]
    if no_config or location.config_file is not None:
        return
    if os.path.exists(CONFIG_FILE):
        click.echo(f"{CONFIG_FILE} here names another metastore: left as it is", err=True)
        return
    _write_config(location)
    click.echo(f"wrote {os.path.abspath(CONFIG_FILE)}: commands run in this directory or below use it")


def _write_config(location: Location) -> None:
    """``acidstream.toml`` for ``location``, with paths relative to it where they are below it."""

    def here(path: str) -> str:
        if "://" in path:
            return path
        relative = os.path.relpath(path)
        return path if relative.startswith("..") else relative

    lines = [
        "# acidstream: commands run in this directory or below use this metastore (see `acidstream --help`)",
        f"warehouse = {json.dumps(here(location.warehouse))}",
    ]
    prefix = "sqlite:///"
    if location.metastore != default_metastore_url(location.warehouse):
        url = location.metastore
        if url.startswith(prefix):
            url = prefix + here(url[len(prefix) :])
        lines.append(f"metastore = {json.dumps(url)}")
    with open(CONFIG_FILE, "x", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")


_RUNS = "`acidstream sql` runs Hive DDL (CREATE, DROP, ALTER, SHOW, DESCRIBE) and DELETE, UPDATE, MERGE INTO"


@click.command("sql", epilog=EXIT_CODES_HELP)
@metastore_options
@click.argument("statement")
def sql(metastore: str, warehouse: str, statement: str) -> None:
    """Run one Hive statement: DDL (CREATE/DROP/ALTER/SHOW/DESCRIBE) or DML (DELETE, UPDATE, MERGE INTO).

    Result rows are tab-separated. DELETE, UPDATE and MERGE INTO run as one transaction each and print the rows
    inserted, updated and deleted under a header line. A statement that does not parse, or uses what acidstream
    does not run, exits 2 and points at the place. Queries run in Spark SQL: acidstream spark-shell -e "SELECT ...".
    """
    from acidstream.sql import DML_RESULT_COLUMNS, is_dml

    first = statement.split(None, 1)[0].lower().lstrip("(") if statement.strip() else ""
    if first in _QUERY_WORDS:
        raise click.UsageError(
            f"{_RUNS}; queries run in Spark SQL: acidstream spark-shell -e {shlex.quote(statement)}"
        )
    if first in _WRITE_WORDS:
        raise click.UsageError(
            f"{_RUNS}; rows are appended by `acidstream stream`, `acidstream merge`, the Python streaming API or "
            'Spark\'s format("acidstream")'
        )
    with open_metastore(metastore, warehouse) as ms:
        rows = ms.execute(statement)
    show = _SHOW.match(statement)
    listing = _SHOW_LISTINGS.get(show.group(1).lower()) if show else None
    if is_dml(statement):
        _echo_rows([DML_RESULT_COLUMNS, *(rows or [])])
    elif listing is not None:
        listing.echo(rows or [])
    elif rows is not None:
        _echo_rows(rows)


@click.group("show")
def show() -> None:
    """List metastore objects and state."""


@show.command("databases")
@metastore_options
def show_databases(metastore: str, warehouse: str) -> None:
    """Databases, one per line."""
    with open_metastore(metastore, warehouse) as ms:
        _echo_rows([(d,) for d in ms.list_databases()])


@show.command("tables")
@metastore_options
@click.argument("db", default="default")
def show_tables(metastore: str, warehouse: str, db: str) -> None:
    """Tables of DB (default: 'default')."""
    with open_metastore(metastore, warehouse) as ms:
        _echo_rows([(t,) for t in ms.list_tables(db)])


@show.command("partitions")
@metastore_options
@click.argument("table")
def show_partitions(metastore: str, warehouse: str, table: str) -> None:
    """Partitions of TABLE (db.t)."""
    with open_metastore(metastore, warehouse) as ms:
        _echo_rows([(p.name,) for p in ms.list_partitions(table)])


@show.command("txns")
@metastore_options
def show_txns(metastore: str, warehouse: str) -> None:
    """Open and aborted transactions: id, state, started, last heartbeat (UTC), user, host, agent."""
    with open_metastore(metastore, warehouse) as ms:
        rows = ms.execute("SHOW TRANSACTIONS")
    TXNS.echo(rows or [])


@show.command("locks")
@metastore_options
@click.argument("table", required=False)
def show_locks(metastore: str, warehouse: str, table: str | None) -> None:
    """Locks (optionally of TABLE): id, db, table, partition, state, type, txn, heartbeat, acquired, user, host, agent, blocked by."""
    with open_metastore(metastore, warehouse) as ms:
        rows = ms.execute(f"SHOW LOCKS {table}" if table else "SHOW LOCKS")
    LOCKS.echo(rows or [], f"no locks{f' on {table}' if table else ''}")


@show.command("compactions")
@metastore_options
def show_compactions(metastore: str, warehouse: str) -> None:
    """Compaction queue and history."""
    with open_metastore(metastore, warehouse) as ms:
        rows = ms.execute("SHOW COMPACTIONS")
    COMPACTIONS.echo(rows or [])


@click.command("housekeeper")
@metastore_options
@click.option("--once", is_flag=True, help="Run one pass and exit.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="Seconds between passes.",
)
@click.option(
    "--txn-timeout",
    type=click.FloatRange(min=0.1),
    default=300.0,
    show_default=True,
    help="Timeout of txns, txn-less locks and readers that recorded none of their own (s): each is otherwise "
    "timed out by the timeout its client opened it with.",
)
def housekeeper(metastore: str, warehouse: str, once: bool, interval: float, txn_timeout: float) -> None:
    """Abort transactions silent for longer than their own timeout (normal metastore use does this too; this
    keeps idle metastores clean)."""
    with open_metastore(metastore, warehouse, txn_timeout=txn_timeout) as ms:
        while True:
            aborted = ms.perform_timeouts()
            click.echo(f"aborted {len(aborted)} timed-out txns" + (f": {aborted}" if aborted else ""))
            if once:
                return
            time.sleep(interval)


def register(cli: click.Group) -> None:
    cli.add_command(metastore_group)
    cli.add_command(sql)
    cli.add_command(show)
    cli.add_command(housekeeper)
