"""What DELETE, UPDATE and MERGE share: the table a statement names (:class:`TableRef`), how its columns are
qualified, its ``SET`` list, and the clauses a statement may not have."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from acidstream.sql.expressions import Resolve, Translator
from acidstream.sql.parse import error_at, unsupported

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade, TableHandle


def assignments(
    sql: str, items: Iterable[exp.Expr], target: TableRef, translator: Translator
) -> dict[str, pc.Expression]:
    """``SET c = expr, ...``: each target column once, its value translated for the column's type."""
    values: dict[str, pc.Expression] = {}
    for item in items:
        if not (isinstance(item, exp.EQ) and isinstance(item.this, exp.Column)):
            raise error_at(sql, item, "expected column = value")
        name, column_type = target.resolver()(item.this)
        if name in values:
            raise error_at(sql, item.this, f"column {name} is set twice")
        values[name] = translator.value(item.expression, column_type)
    return values


def refuse_extras(sql: str, node: exp.Expr, allowed: set[str], what: str) -> None:
    """A clause of ``node`` other than ``allowed`` (RETURNING, LIMIT, UPDATE ... FROM, ...) is refused."""
    for key, value in node.args.items():
        if value and key not in allowed:
            part = value if isinstance(value, exp.Expr) else node
            raise unsupported(sql, part, f"{key.rstrip('_').upper()} in {what}")


@dataclass(frozen=True)
class TableRef:
    """A table named by a statement, and how its columns may be qualified there."""

    table: TableHandle
    #: the alias if the statement gives one, else the table's name and db.name
    qualifiers: frozenset[str]
    #: column types, data columns then partition keys
    types: dict[str, pa.DataType]
    sql: str

    @classmethod
    def of(cls, ms: MetastoreFacade, sql: str, node: exp.Expr) -> TableRef:
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            raise unsupported(sql, node, "a subquery or expression as a table (name a table)")
        refuse_extras(sql, node, {"this", "db", "alias"}, "a table reference")
        name = f"{node.db}.{node.name}" if node.db else node.name
        table = ms.table(name)
        alias = node.alias
        qualifiers = {alias.lower()} if alias else {table.name, table.full_name}
        types = {c.name: c.type.to_arrow() for c in table.all_columns}
        return cls(table, frozenset(qualifiers), types, sql)

    def owns(self, column: exp.Column) -> bool:
        """Whether the column's qualifier names this table (an unqualified column: whether it has the name)."""
        qualifier = qualifier_of(column)
        return qualifier in self.qualifiers if qualifier else column.name.lower() in self.types

    def column_type(self, column: exp.Column) -> tuple[str, pa.DataType]:
        name = column.name.lower()
        if name not in self.types:
            raise error_at(
                self.sql,
                column,
                f"{self.table.full_name} has no column {name!r} (it has {', '.join(self.types)})",
            )
        return name, self.types[name]

    def resolver(self) -> Resolve:
        """Columns of this table alone, by their own names (DELETE and UPDATE, or SET's left side)."""

        def resolve(column: exp.Column) -> tuple[str, pa.DataType]:
            qualifier = qualifier_of(column)
            if qualifier and qualifier not in self.qualifiers:
                raise error_at(
                    self.sql, column, f"unknown table {qualifier!r} (this statement's table is {self.shown})"
                )
            return self.column_type(column)

        return resolve

    @property
    def shown(self) -> str:
        return " or ".join(sorted(self.qualifiers))


def qualifier_of(column: exp.Column) -> str:
    return ".".join(part for part in (column.db, column.table) if part).lower()
