"""Spark commands: ``main-job`` (the Structured Streaming pipeline into ``testing.alerts``) and ``spark-shell``."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from acidstream.cli._options import default_metastore_url, metastore_options
from acidstream.cli._text import hive_row

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _local_path(warehouse: str) -> str:
    return warehouse if "://" in warehouse else os.path.abspath(warehouse)


@contextmanager
def _command_session(
    app_name: str, warehouse: str, console: Console
) -> Iterator[tuple[SparkSession, str | None]]:
    """The command's local session and where Spark's log goes (under the warehouse). A session that was
    already running (tests, notebooks) keeps its own log and is not stopped."""
    from pyspark.sql import SparkSession

    from acidstream.spark.main_job import quiet_session

    owns_session = SparkSession.getActiveSession() is None
    log_file = (
        os.path.join(warehouse, "_logs", "spark.log") if owns_session and "://" not in warehouse else None
    )
    with console.status("starting Spark (local, 2 cores)..."):
        spark = quiet_session(app_name, log_file)
    try:
        yield spark, log_file
    finally:
        if owns_session:
            spark.stop()


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
    from acidstream.spark.main_job import JobConfig, default_files, run

    console = Console()
    warehouse = _local_path(warehouse)
    cfg = JobConfig(
        rows=rows,
        files=min(files or default_files(rows), rows),
        warehouse=warehouse,
        metastore=metastore or default_metastore_url(warehouse),
        reset=reset,
        query_interval=query_interval,
    )
    with (
        _command_session("acidstream-main-job", warehouse, console) as (spark, log_file),
        Progress(
            TextColumn("[bold]ingesting[/] testing.alerts"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress,
    ):
        bar = progress.add_task("rows", total=rows)
        report = run(cfg, spark, lambda visible: progress.update(bar, completed=visible))
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


_SHELL_BANNER = """acidstream Spark shell: {n} table(s) as SQL views ({views}).
  spark.sql("SELECT ... FROM <view>")   each query reads the snapshot current when it starts
  spark.read.format("acidstream").options(**opts).load("db.table")   (and .write / .writeStream)
  ms: the metastore   register_views(spark, **opts): views for tables created since
Spark's log: {log}"""


@click.command("spark-shell")
@metastore_options
@click.option(
    "-e", "--execute", "query", default=None, help="Run this Spark SQL query, print its rows, exit."
)
@click.option(
    "--limit", type=click.IntRange(1), default=1000, show_default=True, help="Rows -e prints at most."
)
@click.argument("tables", nargs=-1)
def spark_shell(
    metastore: str | None, warehouse: str, query: str | None, limit: int, tables: tuple[str, ...]
) -> None:
    """A local SparkSession wired to the metastore, TABLES (default: every table) as Spark SQL views.

    Views are named after their table (db_table where two databases share a name). With -e, prints the
    query's rows tab separated like Hive's CLI; otherwise opens a Python shell with spark, ms and opts.
    """
    from pyspark.errors import PySparkException

    from acidstream.catalog import Metastore
    from acidstream.spark import register_views

    warehouse = _local_path(warehouse)
    url = metastore or default_metastore_url(warehouse)
    # PySpark logs every failed query's JVM stack trace as JSON on stderr; the error is reported below instead.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    with _command_session("acidstream-shell", warehouse, Console(stderr=True)) as (spark, log_file):
        views = register_views(spark, list(tables) or None, metastore=url, warehouse=warehouse)
        if query is not None:
            try:
                rows = spark.sql(query).limit(limit).collect()
            except PySparkException as exc:
                raise click.ClickException(str(exc).strip().splitlines()[0]) from exc
            for row in rows:
                click.echo(hive_row(row))
            return
        import code

        opts = {"metastore": url, "warehouse": warehouse}
        with Metastore.connect(url, warehouse=warehouse) as ms:
            code.interact(
                banner=_SHELL_BANNER.format(
                    n=len(views), views=", ".join(views) or "none", log=log_file or "(stderr)"
                ),
                local={"spark": spark, "ms": ms, "opts": opts, "register_views": register_views},
                exitmsg="",
            )


def register(cli: click.Group) -> None:
    cli.add_command(main_job)
    cli.add_command(spark_shell)
