"""Hot metastore statements: SQL compiled by SQLAlchemy once per dialect, run on the DB-API cursor.

SQLAlchemy's execution layer (cache lookup, execution context, result wrapping) costs 35–80 µs a statement, while
sqlite3 runs a whole small transaction in ~9 µs; a streaming transaction runs ~20 statements. The statements every
transaction runs are therefore :class:`Prepared`: SQLAlchemy's compiler gives the SQL text and parameter order
(per dialect and set of parameter names, as its own cache does), the driver runs them, and driver errors are
wrapped into SQLAlchemy's exception classes the way its own execution wraps them, so ``engine``'s retries see the
same errors. A statement that needs SQLAlchemy at run time (type processing of parameters or columns, computed
column defaults, expanding ``IN`` parameters, ``executemany`` with ``RETURNING``) runs through
``conn.execute`` instead.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Connection, Dialect
from sqlalchemy.exc import DBAPIError, MultipleResultsFound, NoResultFound, StatementError
from sqlalchemy.sql.dml import UpdateBase
from sqlalchemy.sql.selectable import Select

Params = Mapping[str, Any] | Sequence[Mapping[str, Any]]
T = TypeVar("T")


class Rows:
    """The fetched rows of one statement, with the few ``Result`` methods the metastore uses."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows, self.rowcount = rows, rowcount

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)

    def all(self) -> list[Any]:
        return self._rows

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    def scalar_one(self) -> Any:
        if len(self._rows) != 1:
            raise (NoResultFound if not self._rows else MultipleResultsFound)(
                f"expected one row, got {len(self._rows)}"
            )
        return self._rows[0][0]


@dataclass(frozen=True)
class _Plan:
    """How the driver runs the statement for one dialect and set of parameter names."""

    sql: str
    positions: tuple[str, ...] | None  # parameter names in placeholder order (None: a mapping is passed)
    defaults: dict[str, Any]  # values bound by the statement itself (literals)
    row: Any  # namedtuple class of the result columns, None when the statement returns no rows

    def bind(self, params: Mapping[str, Any]) -> Any:
        values = {**self.defaults, **params} if self.defaults else params
        return values if self.positions is None else tuple(values[name] for name in self.positions)


class Prepared:
    """A constant Core statement; ``run(conn, params)`` replaces ``conn.execute(statement, params)``."""

    __slots__ = ("_plans", "statement")

    def __init__(self, statement: Select[Any] | UpdateBase) -> None:
        self.statement = statement
        self._plans: dict[tuple[str, str, str, tuple[str, ...], bool], _Plan | None] = {}

    def run(self, conn: Connection, params: Params | None = None) -> Rows:
        rows: list[Mapping[str, Any]]
        if params is None or type(params) is dict or isinstance(params, Mapping):
            many, rows = False, [params or {}]
        else:
            many, rows = True, list(params)
        dialect = conn.dialect
        key = (dialect.name, dialect.driver, dialect.paramstyle, tuple(rows[0]), many)
        try:
            plan = self._plans[key]
        except KeyError:
            plan = self._plans[key] = self._compile(dialect, key[3], many=many)
        if plan is None:
            result = conn.execute(self.statement, params)
            return Rows(list(result) if result.returns_rows else [], result.rowcount)
        return _on_cursor(conn, plan.sql, params, _run_plan, plan, rows, many)

    def _compile(self, dialect: Dialect, names: tuple[str, ...], *, many: bool) -> _Plan | None:
        stmt = self.statement
        compiled = stmt.compile(dialect=dialect, column_keys=list(names))
        columns = list(stmt.exported_columns)  # the selected or RETURNING columns: none, no rows
        returns_rows = bool(columns)
        binds = compiled.bind_names  # parameter -> its name in the SQL
        prefetch = [*compiled.insert_prefetch, *compiled.update_prefetch]  # columns with Python-side defaults
        if (
            "POSTCOMPILE" in compiled.string
            or (many and returns_rows)
            or any(not (c.default is not None and c.default.is_scalar) for c in prefetch)
            or any(b.callable is not None for b in binds)
            or any(b.type.dialect_impl(dialect).bind_processor(dialect) for b in binds)
            or any(c.type.dialect_impl(dialect).result_processor(dialect, None) for c in columns)
        ):
            return None
        defaults = {name: b.value for b, name in binds.items() if name not in names and not b.required}
        defaults.update({c.key: c.default.arg for c in prefetch if c.key not in names})  # type: ignore[union-attr]
        positions = tuple(compiled.positiontup or ()) if compiled.positional else None
        row = namedtuple("Row", [c.key for c in columns], rename=True) if returns_rows else None  # type: ignore[misc]
        return _Plan(compiled.string, positions, defaults, row)


def execute_driver_sql(conn: Connection, sql: str) -> None:
    """``conn.exec_driver_sql(sql)`` for a statement without parameters or rows, minus the execution layer."""
    _on_cursor(conn, sql, None, _run_sql, sql)


def _run_plan(cursor: Any, plan: _Plan, rows: list[Mapping[str, Any]], many: bool) -> Rows:
    if many:
        cursor.executemany(plan.sql, [plan.bind(p) for p in rows])
    else:
        cursor.execute(plan.sql, plan.bind(rows[0]))
    row = plan.row
    return Rows([row(*r) for r in cursor.fetchall()] if row is not None else [], cursor.rowcount)


def _run_sql(cursor: Any, sql: str) -> None:
    cursor.execute(sql)


def _on_cursor(conn: Connection, sql: str, params: Params | None, use: Callable[..., T], *args: Any) -> T:
    """``use(cursor, *args)`` on a DB-API cursor of ``conn``; driver errors become SQLAlchemy's exceptions.
    (Not a context manager: on SQLite that would cost as much as the statement.)"""
    cursor = conn.connection.cursor()
    try:
        return use(cursor, *args)
    except conn.dialect.loaded_dbapi.Error as exc:
        raise _wrapped(conn, sql, params, exc, cursor) from exc
    finally:
        cursor.close()


def _wrapped(conn: Connection, sql: str, params: Params | None, exc: Any, cursor: Any) -> StatementError:
    """The exception SQLAlchemy raises for ``exc``; a lost connection is invalidated, as SQLAlchemy does
    (with the engine's ``handle_error`` rule: :func:`connection_lost`)."""
    dialect = conn.dialect
    lost = bool(dialect.is_disconnect(exc, conn.connection.dbapi_connection, cursor)) or connection_lost(exc)
    if lost:
        conn.invalidate(exc)
    return DBAPIError.instance(
        sql, params, exc, dialect.loaded_dbapi.Error, connection_invalidated=lost, dialect=dialect
    )


def connection_lost(error: BaseException) -> bool:
    """Whether a psycopg error means the connection is unusable, whatever psycopg's ``broken`` flag says.

    A backend terminated in the middle of a pipelined ``executemany`` fails with ``cannot exit pipeline mode
    while busy`` on a connection psycopg does not mark broken, so SQLAlchemy took it for a statement error,
    did not retry, and pooled the connection again. Errors psycopg raises itself carry no SQLSTATE; the
    server's own connection errors are classes 08 (connection exception) and 57P (operator intervention)."""
    import psycopg

    if not isinstance(error, psycopg.OperationalError):
        return False
    sqlstate = error.sqlstate
    return sqlstate is None or sqlstate.startswith(("08", "57P"))
