"""SQL statements that change rows — ``DELETE``, ``UPDATE``, ``MERGE`` — run through ``Metastore.execute``.

They are parsed by sqlglot's Hive dialect (:mod:`acidstream.sql.parse`), their predicates and values become
Arrow compute expressions (:mod:`acidstream.sql.expressions`), and each statement runs as one mutation txn of
:mod:`acidstream.mutate.merge` (:mod:`acidstream.sql.dml`). DDL stays with the metastore's own parser, which
knows nothing of mutation. This module is cheap to import: the parser loads with the first DML statement.
"""

from __future__ import annotations

import re

#: What ``execute`` returns for a DML statement: one row of these counts.
DML_RESULT_COLUMNS = ("inserted", "updated", "deleted")

_FIRST_WORD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*([A-Za-z]+)", re.S)
_DML_WORDS = frozenset({"delete", "update", "merge"})


def is_dml(sql: str) -> bool:
    """Whether ``sql`` starts (after comments and parentheses) with DELETE, UPDATE or MERGE."""
    match = _FIRST_WORD.match(sql)
    return match is not None and match.group(1).lower() in _DML_WORDS


__all__ = ["DML_RESULT_COLUMNS", "is_dml"]
