"""Compaction commands: ``compactor run`` (the daemon) and ``compact`` (one request, optionally waited for)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from acidstream.cli._interrupt import stopping_gracefully
from acidstream.cli._options import metastore_options, open_metastore

if TYPE_CHECKING:
    from acidstream.catalog import Metastore


def _connect(metastore: str, warehouse: str) -> Metastore:
    """An existing metastore only: the compactor never creates one."""
    return open_metastore(metastore, warehouse)


def _event(message: str) -> None:
    click.echo(message, err=True)


@click.group("compactor")
def compactor_group() -> None:
    """Run the compactor: initiator, workers, cleaner and housekeeper."""


@compactor_group.command("run")
@metastore_options
@click.option(
    "--once", is_flag=True, help="One pass of each (initiator, queued requests, cleaner), then exit."
)
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="Requests at once.")
@click.option("--spark", "use_spark", is_flag=True, help="Run each request's bucket jobs as Spark tasks.")
@click.option(
    "--check-interval", type=float, default=300.0, show_default=True, help="Seconds between initiator passes."
)
@click.option(
    "--cleaner-interval", type=float, default=5.0, show_default=True, help="Seconds between cleaner passes."
)
@click.option(
    "--retention",
    type=float,
    default=300.0,
    show_default=True,
    help="Seconds replaced files stay after a compaction, for readers that do not register (Hive's own).",
)
@click.option(
    "--poll-interval", type=float, default=5.0, show_default=True, help="Seconds between queue polls."
)
def run(
    metastore: str,
    warehouse: str,
    once: bool,
    workers: int,
    use_spark: bool,
    check_interval: float,
    cleaner_interval: float,
    retention: float,
    poll_interval: float,
) -> None:
    """Keep tables compacted until interrupted (SIGINT/SIGTERM: requests in progress finish first, then the
    summary, exit 130/143); prints what happens on stderr."""
    from acidstream.compactor import CompactorConfig, CompactorDaemon

    config = CompactorConfig(
        check_interval=check_interval, cleaner_interval=cleaner_interval, retention=retention
    )
    with _connect(metastore, warehouse) as ms:
        daemon = CompactorDaemon(
            ms,
            config,
            workers=workers,
            run_jobs=_spark_runner() if use_spark else None,
            on_event=_event,
            poll_interval=poll_interval,
        )
        if once:
            click.echo(f"summary: {daemon.run_once()}")
            return
        _event(f"compactor running with {workers} worker(s) on {ms.url}; Ctrl-C to stop")
        with stopping_gracefully(daemon.stop):
            click.echo(f"summary: {daemon.run()}")


def _spark_runner() -> Any:
    from acidstream.spark.compact import spark_runner
    from acidstream.spark.session import session

    return spark_runner(session("acidstream-compactor"))


@click.command("compact")
@metastore_options
@click.argument("table")
@click.option("--partition", "partition", multiple=True, help="KEY=VALUE of the partition (repeat per key).")
@click.option("--major", "kind", flag_value="major", help="Rewrite everything into a new base.")
@click.option(
    "--minor", "kind", flag_value="minor", help="Merge the deltas into one delta and one delete delta."
)
@click.option(
    "--wait", is_flag=True, help="Compact now in this process (or wait for the daemon that took it)."
)
def compact(
    metastore: str,
    warehouse: str,
    table: str,
    partition: tuple[str, ...],
    kind: str | None,
    wait: bool,
) -> None:
    """Request a compaction of TABLE (db.table); partitioned tables need --partition."""
    if kind is None:
        raise click.UsageError("choose --major or --minor")
    spec: dict[str, str] = {}
    for item in partition:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--partition")
        spec[key] = value
    with _connect(metastore, warehouse) as ms:
        cq = ms.compact(table, spec or None, kind)
        if not wait:
            click.echo(f"Compaction enqueued with id {cq}")
            return
        info = ms.wait_for_compaction(cq).finished()  # refused or failed: an error (exit 1)
    click.echo(f"compaction {cq} ({kind} {info.full_partition_name}): {info.state}")


def register(cli: click.Group) -> None:
    cli.add_command(compactor_group)
    cli.add_command(compact)
