"""Spark commands: ``main-job`` (the Structured Streaming pipeline into ``testing.alerts``) and ``spark-shell``.

pyspark is imported only by ``acidstream.spark``; this module calls its functions.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from acidstream.cli._interrupt import deferred_interrupts, stopping_gracefully
from acidstream.cli._options import hive_settings, metastore_options, open_metastore
from acidstream.cli._text import console as text_console
from acidstream.cli._text import hive_row
from acidstream.metastore.location import is_hive

if TYPE_CHECKING:
    from rich.console import Console

    from acidstream.spark.main_job import JobReport

_STARTING = "starting Spark ({where})..."
LOCAL = "local, 2 cores"
#: The job's defaults (``acidstream.spark.main_job``; importing it here would load pyspark for every command).
DEFAULT_ROWS_HELP = "1,000,000"
ROWS_PER_FILE_HELP = "25,000"


@click.command("main-job")
@metastore_options
@click.option(
    "--rows",
    type=click.IntRange(1),
    default=None,
    help=f"Rows to land and ingest.  [default: {DEFAULT_ROWS_HELP}]",
)
@click.option(
    "--files",
    type=click.IntRange(1),
    default=None,
    help=f"Landing files (= micro-batches = transactions).  [default: one per {ROWS_PER_FILE_HELP} rows]",
)
@click.option(
    "--reset", is_flag=True, help="Drop testing.alerts and its runs' landing files and checkpoints first."
)
@click.option(
    "--landing",
    default=None,
    metavar="DIR",
    help="Where the runs' landing files and streaming checkpoints go: a local directory (on a cluster, one "
    "every node mounts) or an hdfs:// one, never an object store.  [default: <warehouse>/_landing; a warehouse "
    "on S3 needs one]",
)
@click.option(
    "--query-interval",
    type=click.FloatRange(0.1),
    default=0.5,
    show_default=True,
    help="Seconds between the Spark SQL queries (at least as long as the last query took).",
)
@click.option(
    "--master",
    default=None,
    metavar="URL",
    help="Spark's master (spark://host:port, yarn, k8s://...; docs/spark.md).  [default: local, 2 cores]",
)
@click.option(
    "--conf",
    "spark_conf",
    multiple=True,
    metavar="KEY=VALUE",
    callback=lambda _ctx, _param, pairs: _conf_pairs(pairs),
    help="A Spark setting for the job (spark.executor.memory=2g, spark.hadoop.fs.s3a.endpoint=...); repeatable.",
)
def main_job(
    metastore: str,
    warehouse: str,
    rows: int | None,
    files: int | None,
    reset: bool,
    landing: str | None,
    query_interval: float,
    master: str | None,
    spark_conf: dict[str, str],
) -> None:
    """Land CSV files, stream them through Spark into testing.alerts, query it with Spark SQL meanwhile.

    One landing file is one micro-batch is one transaction. The progress bar follows the sink's commits; the
    Spark SQL queries, run while the ingest goes on, check that each saw whole transactions only. Creates the
    metastore, database and table if needed. A run stopped by Ctrl-C or SIGTERM is resumed by the next one,
    which commits the stopped run's other files exactly once and lands none of its own.

    With --master the job runs on a cluster: this process is Spark's driver (it lands the files, plans the
    micro-batches, commits each transaction, runs the compactor), the executors write the rows. The metastore,
    warehouse and store settings travel with the job; the workers need acidstream installed (docs/spark.md).
    """
    from acidstream.errors import StorageLocationError
    from acidstream.spark.main_job import (
        DEFAULT_ROWS,
        JobConfig,
        default_files,
        describe,
        landing_directory,
        run,
    )

    try:
        landing = landing_directory(warehouse, landing or "")
    except StorageLocationError as exc:
        raise click.UsageError(str(exc)) from exc  # before Spark takes half a minute to start
    console = text_console()
    rows = rows or DEFAULT_ROWS
    cfg = JobConfig(
        rows=rows,
        files=min(files or default_files(rows), rows),
        warehouse=warehouse,
        metastore=metastore,
        reset=reset,
        query_interval=query_interval,
        hive=tuple(sorted(hive_settings().items())) if is_hive(metastore) else (),
        landing=landing,
    )
    with open_metastore(metastore, warehouse, create=True):
        pass  # reachable (or said to be waited for), before Spark takes half a minute to start
    stop = threading.Event()
    with ExitStack() as stack:
        job_conf = {**cfg.spark_conf(), **spark_conf}
        spark, log_file = _start_spark(stack, "acidstream-main-job", warehouse, console, master, job_conf)
        # From here SIGINT and SIGTERM stop the ingest at its next poll (a signal inside a call to Spark's JVM
        # would break the connection to it); the summary then says what was committed, and the exit is 130/143.
        stack.enter_context(stopping_gracefully(stop.set))
        with Progress(
            TextColumn("[bold]ingesting[/] testing.alerts, rows committed"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            bar = progress.add_task("rows", total=rows)
            report = run(
                cfg,
                spark,
                lambda committed, total: progress.update(bar, completed=committed, total=total),
                lambda summary: progress.console.print(f"compactor: {describe(summary)}"),
                stop,
            )
        console.print(summary_table(report, cfg.warehouse, log_file))
        if not report.stopped:
            console.print(
                "Small micro-batches leave many snapshots to watch, but each costs Spark a few tenths of a second "
                "beyond the writing, and the queries share the cores: with 1M-row micro-batches and no queries, "
                "the sink writes about 500k records/s (docs/benchmarks.md; try --rows 5000000 --files 5)."
            )


def _conf_pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--conf KEY=VALUE`` options as a mapping; a pair without ``=`` or key is a usage error naming it."""
    conf = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--conf")
        conf[key.strip()] = value
    return conf


def _start_spark(
    stack: ExitStack,
    app_name: str,
    warehouse: str,
    console: Console,
    master: str | None = None,
    conf: dict[str, str] | None = None,
) -> tuple[Any, str | None]:
    """The command's SparkSession, on ``stack`` (stopped when it unwinds), started under a status line.

    SIGINT or SIGTERM during the start-up is acted on once Spark has started: raised inside pyspark's launch,
    it would leave Spark's JVM running with no process left to stop it; raised inside a call to the JVM, it
    breaks the connection with a traceback. So the session starts, then the stack stops it as the command ends.
    """
    from acidstream.spark.shell import command_session

    with console.status(_STARTING.format(where=master or LOCAL)), deferred_interrupts():
        return stack.enter_context(command_session(app_name, warehouse, master, conf))


def summary_table(report: JobReport, warehouse: str, log_file: str | None) -> Table:
    """The job's closing summary; long values (the log's path) fold rather than being cut."""
    compaction = report.compaction
    summary = Table(title="acidstream main-job: testing.alerts", show_header=False)
    summary.add_column(no_wrap=True)
    summary.add_column(overflow="fold")  # a narrow terminal folds a long path instead of cutting it
    resumed = (
        "resumed",
        f"{report.run}, stopped earlier with {report.files_before} of its {report.landing_files} landing files "
        "committed: this run goes on with the others, landing none of its own",
    )
    stopped = (
        "stopped",
        f"by a signal, with {report.files_committed} of {report.landing_files} landing files committed; the "
        "micro-batch under way was aborted, and the next run resumes the rest",
    )
    timing = [
        (
            "ingest time",
            f"{report.seconds:.1f} s; the first micro-batch {report.first_batch_seconds:.1f} s (Spark starts its "
            "Python workers)",
        ),
        (
            "records/s",
            f"{report.records_per_second:,.0f}; later micro-batches {report.batch_seconds:.2f} s each, "
            f"{report.write_seconds:.2f} s of it writing (median)",
        ),
    ]
    for label, value in [
        *([resumed] if report.resumed else []),
        *([stopped] if report.stopped else []),
        ("rows ingested (this run)", f"{report.rows:,}"),
        ("rows in table", f"{report.table_rows:,}"),
        ("transactions committed", f"{report.transactions} (one per landing file and micro-batch)"),
        ("partitions", f"{report.partitions}"),
        ("bucket files", f"{report.files}"),
        *(timing if report.transactions else []),  # none when stopped before a micro-batch
        (
            "Spark SQL queries",
            f"{report.queries} (one before the ingest, one after); they saw {report.mid_ingest_snapshots} "
            "distinct snapshots mid-ingest, each with whole transactions only",
        ),
        (
            "compactor (while streaming, and once after)",
            f"{compaction['compacted']} compactions of {compaction['requested']} requested, "
            f"{compaction['rows_written']:,} rows rewritten, {compaction['failed']} failed; "
            f"{compaction['cleaned']} cleaned (replaced files go once no query that may read them is left)",
        ),
        ("warehouse", warehouse),
        ("Spark log", log_file or "(session's stderr)"),
    ]:
        summary.add_row(label, value)
    return summary


_SHELL_BANNER = """acidstream Spark shell: {n} table(s) as SQL views ({views}).
  sql("SELECT ... FROM db.table")   a Spark SQL query (spark.sql) naming tables as Hive does, or by their views;
                                    each query reads the snapshot current when it starts
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
    metastore: str, warehouse: str, query: str | None, limit: int, tables: tuple[str, ...]
) -> None:
    """A local SparkSession wired to the metastore, TABLES (default: every table) as Spark SQL views.

    Views are named after their table (db_table where two databases share a name); a query may name a table
    db.table too, as in Hive. With -e, prints the query's rows tab separated like Hive's CLI (a query that
    does not parse or resolve exits 2, another failure 1); otherwise opens a Python shell with spark, sql, ms
    and opts.
    """
    from acidstream.spark.shell import SparkQueryError, check_query, query_rows, shell_views, with_views

    if query is not None:
        check_query(query)  # a typo is reported at once, not after Spark has started
    from acidstream.spark import register_views

    with ExitStack() as stack:
        ms = stack.enter_context(open_metastore(metastore, warehouse))  # an existing one: never creates
        spark, log_file = _start_spark(stack, "acidstream-shell", warehouse, text_console(stderr=True))
        views = stack.enter_context(shell_views(spark, ms, list(tables) or None, metastore, warehouse))
        if query is not None:
            try:
                rows = query_rows(spark, with_views(query, views), limit)
            except SparkQueryError as exc:
                raise (_BadQuery if exc.user_error else click.ClickException)(str(exc)) from exc
            for row in rows:
                click.echo(hive_row(row))
            return
        import code

        code.interact(
            banner=_SHELL_BANNER.format(
                n=len(views), views=", ".join(views) or "none", log=log_file or "(stderr)"
            ),
            local={
                "spark": spark,
                "sql": lambda text: spark.sql(with_views(text, views)),
                "ms": ms,
                "opts": {"metastore": metastore, "warehouse": warehouse},
                "register_views": register_views,
            },
            exitmsg="",
        )


class _BadQuery(click.ClickException):
    """A Spark SQL query that does not parse or resolve: a usage error."""

    exit_code = 2


def register(cli: click.Group) -> None:
    cli.add_command(main_job)
    cli.add_command(spark_shell)
