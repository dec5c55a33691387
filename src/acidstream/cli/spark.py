"""``acidstream main-job``: the Spark Structured Streaming pipeline into ``testing.alerts``, end to end."""

from __future__ import annotations

import os

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from acidstream.cli._options import default_metastore_url, metastore_options


@click.command("main-job")
@metastore_options
@click.option(
    "--rows", type=click.IntRange(1), default=200_000, show_default=True, help="Rows to land and ingest."
)
@click.option(
    "--files",
    type=click.IntRange(1),
    default=None,
    help="Landing files (= micro-batches = transactions).  [default: one per 50,000 rows]",
)
@click.option("--reset", is_flag=True, help="Drop testing.alerts, its landing files and checkpoint first.")
@click.option("--query-interval", type=click.FloatRange(0.1), default=1.0, show_default=True, help="Seconds.")
def main_job(
    metastore: str | None, warehouse: str, rows: int, files: int | None, reset: bool, query_interval: float
) -> None:
    """Land CSV files, stream them through Spark into testing.alerts, query it with Spark SQL meanwhile."""
    from pyspark.sql import SparkSession

    from acidstream.spark.main_job import JobConfig, default_files, quiet_session, run

    console = Console()
    if "://" not in warehouse:
        warehouse = os.path.abspath(warehouse)
    cfg = JobConfig(
        rows=rows,
        files=min(files or default_files(rows), rows),
        warehouse=warehouse,
        metastore=metastore or default_metastore_url(warehouse),
        reset=reset,
        query_interval=query_interval,
    )
    owns_session = SparkSession.getActiveSession() is None
    log_file = (
        os.path.join(warehouse, "_logs", "spark.log") if owns_session and "://" not in warehouse else None
    )
    with console.status("starting Spark (local, 2 cores)..."):
        spark = quiet_session("acidstream-main-job", log_file)
    try:
        with Progress(
            TextColumn("[bold]ingesting[/] testing.alerts"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            bar = progress.add_task("rows", total=rows)
            report = run(cfg, spark, lambda visible: progress.update(bar, completed=visible))
    finally:
        if owns_session:
            spark.stop()
    summary = Table(title="acidstream main-job: testing.alerts", show_header=False)
    for label, value in [
        ("rows ingested (this run)", f"{report.rows:,}"),
        ("rows in table", f"{report.table_rows:,}"),
        ("transactions committed", f"{report.transactions}"),
        ("partitions", f"{report.partitions}"),
        ("bucket files", f"{report.files}"),
        ("ingest time", f"{report.seconds:.1f} s"),
        ("records/s", f"{report.records_per_second:,.0f}"),
        ("Spark SQL queries during ingest", f"{report.queries} (all saw whole transactions only)"),
        ("warehouse", cfg.warehouse),
        ("Spark log", log_file or "(session's stderr)"),
    ]:
        summary.add_row(label, value)
    console.print(summary)


def register(cli: click.Group) -> None:
    cli.add_command(main_job)
