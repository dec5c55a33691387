"""``DELETE``, ``UPDATE`` and ``MERGE`` statements, each run as one mutation txn.

The statement is parsed and every expression translated (and type-checked) before the txn opens, so a typo
costs no lock. DELETE and UPDATE hand their translated WHERE and SET to :func:`acidstream.mutate.merge.delete`
and :func:`~acidstream.mutate.merge.update`; MERGE has its own plan (:mod:`acidstream.sql.merge_into`). The
result is one row ``(inserted, updated, deleted)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from acidstream.errors import InvalidObjectException, SqlSyntaxError
from acidstream.sql import DML_RESULT_COLUMNS
from acidstream.sql.expressions import Translator
from acidstream.sql.parse import parse_statement, unsupported
from acidstream.sql.tables import TableRef, assignments, refuse_extras

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

Counts = list[tuple[int, int, int]]
#: What evaluating a statement's expressions on the rows can raise: the rows decide, as in Hive, where the same
#: statement fails at run time (``x DIV 0``, a value out of its type's range).
_EVALUATION_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


def run(ms: MetastoreFacade, sql: str) -> Counts:
    """Parse and run one DML statement; returns ``[(inserted, updated, deleted)]``."""
    statement = parse_statement(sql)
    try:
        if isinstance(statement, exp.Delete):
            counts = _delete(ms, sql, statement)
        elif isinstance(statement, exp.Update):
            counts = _update(ms, sql, statement)
        elif isinstance(statement, exp.Merge):
            from acidstream.sql.merge_into import run_merge

            counts = run_merge(ms, sql, statement)
        else:
            raise unsupported(sql, statement, "this statement (expected DELETE, UPDATE or MERGE)")
    except _EVALUATION_ERRORS as exc:  # the txn is aborted already: nothing of the statement committed
        raise InvalidObjectException(f"the statement failed on the table's rows: {exc}") from exc
    inserted, updated, deleted = (counts[k] for k in DML_RESULT_COLUMNS)
    return [(inserted, updated, deleted)]


def _delete(ms: MetastoreFacade, sql: str, statement: exp.Delete) -> dict[str, int]:
    from acidstream.mutate.merge import delete

    refuse_extras(sql, statement, {"this", "where"}, "DELETE")
    target = TableRef.of(ms, sql, statement.this)
    where = _where(sql, statement, target)
    return delete(ms, target.table.full_name, where)


def _update(ms: MetastoreFacade, sql: str, statement: exp.Update) -> dict[str, int]:
    from acidstream.mutate.merge import update

    if statement.args.get("from_") is not None:
        raise unsupported(sql, statement.args["from_"], "UPDATE ... FROM (use MERGE INTO ... USING)")
    refuse_extras(sql, statement, {"this", "expressions", "where"}, "UPDATE")
    if not statement.expressions:
        raise SqlSyntaxError("expected column = value after SET", sql, len(sql.rstrip()))
    target = TableRef.of(ms, sql, statement.this)
    translator = Translator(sql, target.resolver())
    values = assignments(sql, statement.expressions, target, translator)
    return update(ms, target.table.full_name, _where(sql, statement, target), values)


def _where(sql: str, statement: exp.Expr, target: TableRef) -> pc.Expression | None:
    where = statement.args.get("where")
    return Translator(sql, target.resolver()).predicate(where.this) if where is not None else None
