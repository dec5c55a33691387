"""Parsing DML: which statements are DML, and syntax errors with the position of the offending token."""

from __future__ import annotations

import pytest

from acidstream.errors import DdlSyntaxError, InvalidObjectException, SqlSyntaxError
from acidstream.sql import is_dml
from acidstream.sql.parse import parse_statement


@pytest.mark.parametrize(
    ("sql", "dml"),
    [
        ("DELETE FROM t", True),
        ("  update t set a = 1", True),
        ("-- a comment\nMERGE INTO t USING s ON t.k = s.k WHEN MATCHED THEN DELETE", True),
        ("/* x */ delete from t", True),
        ("CREATE TABLE t (a int)", False),
        ("SELECT * FROM t", False),
        ("deleted_rows", False),
        ("", False),
    ],
)
def test_dml_is_told_by_its_first_word(sql: str, dml: bool) -> None:
    assert is_dml(sql) is dml


@pytest.mark.parametrize(
    ("sql", "message", "at"),
    [
        ("DELETE FROM t WHERE a = ", "incomplete expression: expected more after '='", "= "),
        ("DELETE FROM t WHERE a BETWEEN 1 AND", "expected more after 'AND'", "AND"),
        ("UPDATE t SET a = 1 WHERE", "expected a condition after WHERE", "WHERE"),
        ("MERGE INTO t USING s ON t.k = s.k", "expected WHEN [NOT] MATCHED ... THEN clauses", "k"),
        ("DELETE FROM t WHERE a = 'abc", "unterminated quote: no closing '", "'abc"),
        ("DELETE FROM t /* x", "an unterminated comment or quote", "/* x"),
        ("DELETE FROM t; DELETE FROM s", "expected one statement, found 2", " DELETE FROM s"),
        ("UPDATE t a = 1", "Unexpected token", "= 1"),
        ("DELETE ", "Expected table name but the statement ends", ""),
    ],
)
def test_syntax_errors_point_at_the_token(sql: str, message: str, at: str) -> None:
    with pytest.raises(SqlSyntaxError) as info:
        parse_statement(sql)
    error = info.value
    assert isinstance(error, InvalidObjectException) and not isinstance(error, DdlSyntaxError)
    assert message in str(error)
    assert sql[error.position :].startswith(at) and (at or error.position == len(sql.rstrip()))
    assert error.sql == sql


def test_the_caret_points_into_the_offending_line() -> None:
    sql = "MERGE INTO t\nUSING s ON t.k = s.k\nWHEN MATCHED THEN FROB"
    with pytest.raises(SqlSyntaxError) as info:
        parse_statement(sql)
    assert sql[info.value.position :] == "FROB"
    lines = str(info.value).splitlines()
    assert "(line 3)" in lines[0]
    assert lines[1:] == ["  WHEN MATCHED THEN FROB", "  " + " " * len("WHEN MATCHED THEN ") + "^"]


def test_a_trailing_semicolon_is_one_statement() -> None:
    assert parse_statement("DELETE FROM t WHERE a = 1;").key == "delete"
