"""Replication commands: ``repl dump``, ``repl load``, ``repl sync`` and ``repl status`` (see ``acidstream.repl``)."""

from __future__ import annotations

import contextlib
import os
import threading
from typing import TYPE_CHECKING, Any

import click

from acidstream.cli._interrupt import stopping_gracefully
from acidstream.cli._options import metastore_options, open_metastore
from acidstream.cli._text import iso_utc

if TYPE_CHECKING:
    from acidstream.repl import SyncResult

_OPEN_TXN_TIMEOUT = click.option(
    "--open-txn-timeout",
    type=float,
    default=60.0,
    show_default=True,
    help="Bootstrap: seconds to wait for txns open at its start; those still open are carried as open.",
)
_POLICY = click.option(
    "--policy", default="default", show_default=True, help="Name of this replication stream on the replica."
)


@click.group("repl")
def repl_group() -> None:
    """Replicate tables to another warehouse, open streaming batches included (Hive's REPL DUMP/LOAD)."""


@repl_group.command("dump")
@metastore_options
@click.option("--to", "to", required=True, help="Directory (or pyarrow.fs URI) the dump is written under.")
@click.option(
    "--from",
    "from_event",
    type=click.IntRange(min=0),
    default=None,
    help="The replica's last applied event: dump the events after it. Without: a bootstrap dump.",
)
@click.option("--max-events", type=click.IntRange(min=1), default=None, help="At most this many events.")
@_OPEN_TXN_TIMEOUT
@click.option(
    "--spark", "use_spark", is_flag=True, help="Copy a bootstrap's files in parallel as a Spark job."
)
def dump_command(
    metastore: str,
    warehouse: str,
    to: str,
    from_event: int | None,
    max_events: int | None,
    open_txn_timeout: float,
    use_spark: bool,
) -> None:
    """Dump the source metastore's tables (bootstrap) or its events since --from (incremental) under --to."""
    from acidstream.repl import dump

    copy_files = None
    if use_spark:
        from acidstream.spark.repl import spark_file_copier
        from acidstream.spark.session import session

        copy_files = spark_file_copier(session("acidstream-repl-dump"))
    with open_metastore(metastore, warehouse) as ms:
        info = dump(
            ms,
            to,
            from_event,
            max_events=max_events,
            open_txn_timeout=open_txn_timeout,
            copy_files=copy_files,
        )
    if info.first_event_id > info.last_event_id:
        click.echo(f"nothing to dump: no event after {info.last_event_id}")
        return
    click.echo(
        f"{info.kind} dump {info.path}: events {info.first_event_id}..{info.last_event_id}, "
        f"{info.bytes} bytes of data"
    )
    click.echo(f"next: acidstream repl dump --from {info.last_event_id} ...", err=True)


@repl_group.command("load")
@metastore_options
@_POLICY
@click.argument("directory")
def load_command(metastore: str, warehouse: str, policy: str, directory: str) -> None:
    """Apply the dumps in DIRECTORY to the replica metastore (created if missing) and warehouse."""
    from acidstream.repl import load

    with open_metastore(metastore, warehouse, create=True) as ms:
        result = load(ms, directory, policy=policy)
    what = "bootstrapped, " if result.bootstrapped else ""
    click.echo(f"{what}{result.events_applied} events applied; last event {result.last_event_id}")
    for where in result.rebootstrapped:
        click.echo(f"bootstrapped again: {where}", err=True)
    for path in result.skipped:
        click.echo(
            f"skipped bootstrap dump {path}: this replica replicates already (load the incremental dumps "
            "after its last event, or load the bootstrap into a new replica)",
            err=True,
        )


@repl_group.command("sync")
@click.argument("source_url")
@click.argument("target_url")
@click.option("--target-warehouse", required=True, help="The replica's warehouse root (directory or URI).")
@click.option(
    "--source-warehouse",
    default=None,
    help="The source's warehouse root, whose filesystem holds its files.  [default: the local filesystem]",
)
@click.option("--follow", is_flag=True, help="Keep applying new events until interrupted.")
@click.option("--poll-interval", type=float, default=1.0, show_default=True, help="Seconds between polls.")
@click.option("--max-events", type=click.IntRange(min=1), default=None, help="At most this many events.")
@_POLICY
@_OPEN_TXN_TIMEOUT
def sync_command(
    source_url: str,
    target_url: str,
    target_warehouse: str,
    source_warehouse: str | None,
    follow: bool,
    poll_interval: float,
    max_events: int | None,
    policy: str,
    open_txn_timeout: float,
) -> None:
    """Bring the replica TARGET_URL up to the source SOURCE_URL (bootstrap on first use), once or --follow.

    --follow stops at the next clean point on SIGINT or SIGTERM, prints what was applied and exits 130/143.
    """
    from acidstream.repl import sync

    stop = threading.Event()
    with (
        stopping_gracefully(stop.set) if follow else contextlib.nullcontext(),
        open_metastore(source_url, source_warehouse or os.getcwd()) as source,
        open_metastore(target_url, target_warehouse, create=True) as target,
    ):
        result = sync(
            source,
            target,
            policy=policy,
            follow=follow,
            poll_interval=poll_interval,
            max_events=max_events,
            open_txn_timeout=open_txn_timeout,
            stop=stop,
        )
        _report_sync(result)


def _report_sync(result: SyncResult) -> None:
    what = "bootstrapped, " if result.bootstrapped else ""
    click.echo(
        f"{what}{result.events_applied} events applied; last event {result.last_event_id}; "
        f"{result.stats.bytes_copied} bytes copied"
    )
    for where in result.rebootstrapped:
        click.echo(f"bootstrapped again: {where}", err=True)


@repl_group.command("status")
@metastore_options
@_POLICY
@click.option("--source", "source_url", default=None, help="The source metastore URL: also show the lag.")
@click.option(
    "--last-event", is_flag=True, help="Print only the last event applied (for `repl dump --from`)."
)
def status_command(
    metastore: str, warehouse: str, policy: str, source_url: str | None, last_event: bool
) -> None:
    """Show the replica's last applied event and, with --source, its lag in events and seconds."""
    from acidstream.repl import status

    with open_metastore(metastore, warehouse) as target:
        if source_url is None:
            st = status(target, policy=policy)
        else:
            with open_metastore(source_url, os.getcwd()) as source:
                st = status(target, source, policy=policy)
    if st is None:
        raise click.ClickException(
            f"{metastore} is no replica (policy {policy!r}): nothing was loaded into it"
        )
    if last_event:
        click.echo(st.last_event_id)
        return
    rows: list[tuple[str, Any]] = [
        ("policy", st.policy),
        ("source", st.source),
        ("last event applied", st.last_event_id),
        ("its time on the source", _when(st.last_event_time)),
        ("applied at", _when(st.applied_time)),
        ("bootstrapped at event", st.bootstrap_event_id),
    ]
    if st.lag_events is not None:
        rows += [
            ("source's last event", st.source_event_id),
            ("lag (events)", st.lag_events),
            ("lag (seconds)", f"{st.lag_seconds:.1f}"),
        ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key:<{width}}  {value}")


def _when(ms: int) -> str:
    return iso_utc(ms, "seconds") if ms else "-"


def register(cli: click.Group) -> None:
    cli.add_command(repl_group)
