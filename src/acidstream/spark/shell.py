"""What the command line's Spark commands need from Spark, so that ``acidstream.cli`` never imports pyspark:
a local session for one command, and one Spark SQL query's rows."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from acidstream.errors import AcidStreamError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class SparkQueryError(AcidStreamError):
    """A Spark SQL query failed; ``user_error`` when the query itself is wrong (does not parse or resolve)."""

    def __init__(self, message: str, *, user_error: bool) -> None:
        super().__init__(message)
        self.user_error = user_error


@contextmanager
def command_session(app_name: str, warehouse: str) -> Iterator[tuple[SparkSession, str | None]]:
    """A command's local session (format registered, fair scheduling) and where Spark's log goes.

    The log goes to ``<warehouse>/_logs/spark.log``. A session that was already running (tests, notebooks)
    keeps its own log and is not stopped.
    """
    from pyspark.sql import SparkSession

    from acidstream.spark import register, session

    owns_session = SparkSession.getActiveSession() is None
    log_file = (
        os.path.join(warehouse, "_logs", "spark.log") if owns_session and "://" not in warehouse else None
    )
    # Fair scheduling lets a job's ingest and its queries share the cores (a running session keeps its mode).
    spark = register(session(app_name, log_file=log_file, extra_conf={"spark.scheduler.mode": "FAIR"}))
    try:
        yield spark, log_file
    finally:
        if owns_session:
            spark.stop()


def query_rows(spark: SparkSession, query: str, limit: int) -> list[tuple[Any, ...]]:
    """At most ``limit`` rows of a Spark SQL query; a failure raises :class:`SparkQueryError` (first line)."""
    from pyspark.errors import AnalysisException, ParseException, PySparkException

    # PySpark logs every failed query's JVM stack trace as JSON on stderr; the error is raised instead.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    try:
        return [tuple(row) for row in spark.sql(query).limit(limit).collect()]
    except PySparkException as exc:
        message = str(exc).strip().splitlines()[0]
        raise SparkQueryError(
            message, user_error=isinstance(exc, ParseException | AnalysisException)
        ) from exc
