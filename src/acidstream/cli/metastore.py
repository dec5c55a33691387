"""Metastore commands: ``metastore init``, ``sql``, ``show ...`` and the ``housekeeper`` loop."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from acidstream.cli._options import default_metastore_url, metastore_options

if TYPE_CHECKING:
    from acidstream.metastore import Metastore


def _connect(metastore: str | None, warehouse: str, **kwargs: Any) -> Metastore:
    """The database layer loads here, not at import: ``acidstream --help`` stays quick."""
    from acidstream.metastore import Metastore

    return Metastore.connect(metastore or default_metastore_url(warehouse), warehouse=warehouse, **kwargs)


def _echo_rows(rows: Sequence[Sequence[Any]]) -> None:
    for row in rows:
        click.echo("\t".join("" if v is None else str(v) for v in row))


@click.group("metastore")
def metastore_group() -> None:
    """Administer the metastore database."""


@metastore_group.command("init")
@metastore_options
def init(metastore: str | None, warehouse: str) -> None:
    """Create the metastore schema (or check an existing one's version)."""
    from acidstream.metastore.schema import SCHEMA_VERSION

    os.makedirs(warehouse, exist_ok=True)
    with _connect(metastore, warehouse) as ms:
        click.echo(f"metastore ready at {ms.url} (schema version {SCHEMA_VERSION})")


@click.command("sql")
@metastore_options
@click.argument("statement")
def sql(metastore: str | None, warehouse: str, statement: str) -> None:
    """Run one Hive DDL statement (CREATE/DROP/ALTER/SHOW/DESCRIBE); result rows are tab-separated."""
    with _connect(metastore, warehouse) as ms:
        rows = ms.execute(statement)
    if rows is not None:
        _echo_rows(rows)


@click.group("show")
def show() -> None:
    """List metastore objects and state."""


@show.command("databases")
@metastore_options
def show_databases(metastore: str | None, warehouse: str) -> None:
    """Databases, one per line."""
    with _connect(metastore, warehouse) as ms:
        _echo_rows([(d,) for d in ms.list_databases()])


@show.command("tables")
@metastore_options
@click.argument("db", default="default")
def show_tables(metastore: str | None, warehouse: str, db: str) -> None:
    """Tables of DB (default: 'default')."""
    with _connect(metastore, warehouse) as ms:
        _echo_rows([(t,) for t in ms.list_tables(db)])


@show.command("partitions")
@metastore_options
@click.argument("table")
def show_partitions(metastore: str | None, warehouse: str, table: str) -> None:
    """Partitions of TABLE (db.t)."""
    with _connect(metastore, warehouse) as ms:
        _echo_rows([(p.name,) for p in ms.list_partitions(table)])


@show.command("txns")
@metastore_options
def show_txns(metastore: str | None, warehouse: str) -> None:
    """Open and aborted transactions: id, state, started, last heartbeat (ms), user, host, agent."""
    with _connect(metastore, warehouse) as ms:
        rows = ms.execute("SHOW TRANSACTIONS")
    _echo_rows(rows or [])


@show.command("locks")
@metastore_options
@click.argument("table", required=False)
def show_locks(metastore: str | None, warehouse: str, table: str | None) -> None:
    """Locks (optionally of TABLE): id, db, table, partition, state, type, txn, heartbeat, acquired, user, host, agent, blocked by."""
    with _connect(metastore, warehouse) as ms:
        rows = ms.execute(f"SHOW LOCKS {table}" if table else "SHOW LOCKS")
    _echo_rows(rows or [])


@show.command("compactions")
@metastore_options
def show_compactions(metastore: str | None, warehouse: str) -> None:
    """Compaction queue and history."""
    with _connect(metastore, warehouse) as ms:
        rows = ms.execute("SHOW COMPACTIONS")
    _echo_rows(rows or [])


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
    help="Abort txns silent for longer (s).",
)
def housekeeper(
    metastore: str | None, warehouse: str, once: bool, interval: float, txn_timeout: float
) -> None:
    """Abort timed-out transactions (normal metastore use does this too; this keeps idle metastores clean)."""
    with _connect(metastore, warehouse, txn_timeout=txn_timeout) as ms:
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
