"""What the command line's Spark commands need from Spark, so that ``acidstream.cli`` never imports pyspark:
a local session for one command, and one Spark SQL query's rows."""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from acidstream.errors import AcidStreamError, SqlSyntaxError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from acidstream.catalog import Metastore


class SparkQueryError(AcidStreamError):
    """A Spark SQL query failed; ``user_error`` when the query itself is wrong (does not parse or resolve)."""

    def __init__(self, message: str, *, user_error: bool) -> None:
        super().__init__(message)
        self.user_error = user_error


@contextmanager
def command_session(
    app_name: str, warehouse: str, master: str | None = None, conf: Mapping[str, str] | None = None
) -> Iterator[tuple[SparkSession, str | None]]:
    """A command's session (format registered, fair scheduling) on ``master`` (default: local, two cores) with
    ``conf`` over acidstream's settings, and where Spark's log goes.

    The log goes to ``<warehouse>/_logs/spark.log``. A session that was already running (tests, notebooks)
    keeps its own log and is not stopped.
    """
    from pyspark.sql import SparkSession

    from acidstream.spark.datasource import register
    from acidstream.spark.session import session

    owns_session = SparkSession.getActiveSession() is None
    log_file = (
        os.path.join(warehouse, "_logs", "spark.log") if owns_session and "://" not in warehouse else None
    )
    # Fair scheduling lets a job's ingest and its queries share the cores (a running session keeps its mode).
    extra = {"spark.scheduler.mode": "FAIR", **({"spark.master": master} if master else {}), **(conf or {})}
    spark = register(session(app_name, log_file=log_file, extra_conf=extra))
    try:
        yield spark, log_file
    finally:
        if owns_session:
            spark.stop()


#: First words of Spark SQL statements (a parenthesised query may come first); ``-e`` refuses a query starting
#: with another word before Spark starts.
SPARK_STATEMENTS = frozenset(
    """select with from values table map reduce show describe desc explain set reset use cache uncache clear
    refresh create drop alter insert load truncate msck analyze add list merge update delete repair comment
    declare execute call grant revoke""".split()  # noqa: SIM905  # a list literal would take 40 lines
)


def check_query(query: str) -> None:
    """Find a query's obvious mistakes before Spark starts (a session takes half a minute here), as a
    :class:`SqlSyntaxError` pointing at them: a first word that starts no Spark SQL statement, a quote or comment
    never closed, parentheses that do not pair. Spark's parser needs a session (a JVM), so everything subtler is
    left to it."""
    import difflib

    from sqlglot.dialects.dialect import Dialect
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

    from acidstream.sql.parse import token_error

    tokenizer = Dialect.get_or_raise("spark").tokenizer_class()
    try:
        tokens = tokenizer.tokenize(query)
    except TokenError as exc:
        raise token_error(exc, tokenizer, query) from None
    first = next((t for t in tokens if t.token_type != TokenType.L_PAREN), None)
    if first is None:
        raise SqlSyntaxError("no statement", query, 0)
    if first.text.lower() not in SPARK_STATEMENTS:
        close = difflib.get_close_matches(first.text.lower(), sorted(SPARK_STATEMENTS), n=1)
        hint = f" (did you mean {close[0].upper()}?)" if close else ""
        raise SqlSyntaxError(f"unknown statement {first.text!r}{hint}", query, first.start)
    opened: list[int] = []
    for token in tokens:
        if token.token_type == TokenType.L_PAREN:
            opened.append(token.start)
        elif token.token_type == TokenType.R_PAREN:
            if not opened:
                raise SqlSyntaxError("')' without its '('", query, token.start)
            opened.pop()
    if opened:
        raise SqlSyntaxError("'(' is never closed", query, opened[-1])


@contextmanager
def shell_views(
    spark: SparkSession, ms: Metastore, tables: Sequence[str] | None, metastore: str, warehouse: str
) -> Iterator[dict[str, str]]:
    """The shell's views of ``tables`` (view → ``db.table``, as ``register_views``); when the shell ends, so do
    the reader registrations of its queries, which would otherwise hold the cleaner back for a reader lease."""
    from acidstream.spark.datasource import register_views
    from acidstream.spark.read import reader_agent_info

    tag = f"spark-shell-{uuid.uuid4().hex[:12]}"
    views = register_views(spark, tables, metastore=metastore, warehouse=warehouse, reader_tag=tag)
    try:
        yield views
    finally:
        ms.unregister_readers(reader_agent_info(tag))


def with_views(query: str, views: Mapping[str, str]) -> str:
    """``query`` with each ``db.table`` that names a table of ``views`` (view → ``db.table``) replaced by its view,
    so a query reads as in Hive: ``SELECT * FROM testing.events``, ``testing.events.id``. Spark SQL's session
    catalog cannot hold tables of a Python data source (their options do not reach its reader), so the shell's
    tables are temporary views, which have one-part names. Only whole names change: quoted strings, comments
    and ``catalog.db.table`` stay as written."""
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.tokens import TokenType

    view_of = {table.lower(): view for view, table in views.items()}
    tokens = Dialect.get_or_raise("spark").tokenizer_class().tokenize(query)

    def name(i: int) -> str | None:
        token = tokens[i] if 0 <= i < len(tokens) else None
        if token is None:
            return None
        if token.token_type == TokenType.IDENTIFIER:  # `quoted`
            return token.text.lower()
        written = query[token.start : token.end + 1]
        return written.lower() if re.fullmatch(r"\w+", written) else None

    def dot(i: int) -> bool:
        return 0 <= i < len(tokens) and tokens[i].token_type == TokenType.DOT

    pieces, done = [], 0
    for i in range(len(tokens) - 2):
        if dot(i - 1) or not dot(i + 1):
            continue
        db, table = name(i), name(i + 2)
        view = view_of.get(f"{db}.{table}") if db and table else None
        if view is not None:
            pieces += [query[done : tokens[i].start], f"`{view}`"]
            done = tokens[i + 2].end + 1
    return "".join([*pieces, query[done:]])


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
