"""DELETE and UPDATE through ``Metastore.execute`` on both backends: counts, rows, and errors before any txn."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pyarrow as pa
import pytest
from sqlhelpers import ACCOUNTS, java_int, table_rows

from acidstream.catalog import Metastore
from acidstream.errors import InvalidObjectException, NoSuchObjectException, SqlSyntaxError
from acidstream.metastore import TxnStatus


@pytest.mark.parametrize(
    ("where", "deleted"),
    [
        ("id IN (1, 2) OR opened >= '2024-01-09'", [1, 2, 8, 9]),
        ("region = 'EU' AND balance BETWEEN 20 AND 60", [3, 5]),  # a partition key and a decimal
        ("NOT (name LIKE 'n1%' OR id > 2)", [0, 2]),
        ("opened = DATE '2024-01-04' OR name IS NULL", [3]),
        ("balance / 4 > 20", [9]),
        ("id = 42", []),
    ],
)
def test_delete_where(ms: Metastore, where: str, deleted: list[int]) -> None:
    assert ms.execute(f"DELETE FROM bank.accounts WHERE {where}") == [(0, 0, len(deleted))]
    assert [r["id"] for r in table_rows(ms)] == [i for i in range(10) if i not in deleted]


def test_delete_without_where_deletes_every_row(ms: Metastore) -> None:
    assert ms.execute("delete from BANK.Accounts;") == [(0, 0, 10)]
    assert table_rows(ms) == []


def test_update_sets_expressions_constants_and_null(ms: Metastore) -> None:
    before = {r["id"]: r for r in ms.table(ACCOUNTS).scan(with_row_id=True).to_arrow().to_pylist()}
    counts = ms.execute(
        "UPDATE bank.accounts a SET balance = a.balance * 2 + 0.5, name = upper(name), opened = NULL "
        "WHERE a.region = 'EU' AND id < 6"
    )
    assert counts == [(0, 3, 0)]
    rows = {r["id"]: r for r in ms.table(ACCOUNTS).scan(with_row_id=True).to_arrow().to_pylist()}
    for i in (1, 3, 5):
        assert rows[i]["balance"] == Decimal(i * 20) + Decimal("0.5")
        assert (rows[i]["name"], rows[i]["opened"], rows[i]["region"]) == (f"N{i}", None, "EU")
        assert rows[i]["ROW__ID"] != before[i]["ROW__ID"]  # a split update: a new version of the row
    for i in (0, 2, 4, 6, 7, 8, 9):
        assert rows[i] == before[i]  # untouched, ROW__ID included
    assert ms.execute("UPDATE bank.accounts SET opened = '2000-02-29' WHERE id = 0") == [(0, 1, 0)]
    assert table_rows(ms)[0]["opened"] == dt.date(2000, 2, 29)


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("UPDATE bank.accounts SET region = 'US'", "region is a partition key"),
        ("UPDATE bank.accounts SET id = id + 100", "id is a bucketed column"),
    ],
)
def test_update_never_moves_rows(ms: Metastore, statement: str, message: str) -> None:
    before = table_rows(ms)
    with pytest.raises(InvalidObjectException, match=message):
        ms.execute(statement)
    assert table_rows(ms) == before
    assert not [t for t in ms.show_txns() if t.state is TxnStatus.OPEN]


@pytest.mark.parametrize(
    ("statement", "message", "at"),
    [
        ("DELETE FROM bank.accounts WHERE nope = 1", "bank.accounts has no column 'nope'", "nope"),
        ("DELETE FROM bank.accounts WHERE x.id = 1", "unknown table 'x'", "x.id"),
        ("DELETE FROM bank.accounts a WHERE accounts.id = 1", "unknown table 'accounts'", "accounts.id"),
        ("DELETE FROM bank.accounts WHERE id = 'one'", "cannot use 'one' as a value of type int64", "'one'"),
        ("DELETE FROM bank.accounts WHERE id IN (SELECT id FROM bank.changes)", "a subquery", "(SELECT id"),
        (
            "UPDATE bank.accounts SET balance = 0 WHERE id = (select max(id) FROM (SELECT id FROM bank.changes) c)",
            "a subquery",
            "(select max",
        ),
        ("DELETE FROM bank.accounts WHERE id = 1 LIMIT 1", "LIMIT in DELETE is not supported", "1\n"),
        (
            "UPDATE bank.accounts SET balance = 'lots'",
            "cannot use 'lots' as a value of type decimal",
            "'lots'",
        ),
        ("UPDATE bank.accounts SET name = 'a', name = 'b'", "column name is set twice", "name = 'b'"),
        (
            "UPDATE bank.accounts SET name = 'a' FROM bank.changes",
            "UPDATE ... FROM (use MERGE",
            "bank.changes",
        ),
        ("UPDATE bank.accounts SET name", "expected column = value", "name"),
        ("UPDATE bank.accounts SET", "expected column = value after SET", ""),
        ("DELETE FROM bank.accounts WHERE", "expected a condition after WHERE", "WHERE"),
    ],
)
def test_errors_point_at_the_statement_and_open_no_txn(
    ms: Metastore, statement: str, message: str, at: str
) -> None:
    with pytest.raises(SqlSyntaxError, match=re.escape(message)) as info:
        ms.execute(statement)
    assert (statement + "\n")[info.value.position :].startswith(at or "\n")
    assert ms.show_txns() == []  # nothing opened: the statement failed before its txn


def test_a_missing_table_is_no_such_object(ms: Metastore) -> None:
    with pytest.raises(NoSuchObjectException):
        ms.execute("DELETE FROM bank.nope WHERE id = 1")


def test_ddl_still_goes_to_the_metastore(ms: Metastore) -> None:
    assert ms.execute("SHOW TABLES IN bank") == [("accounts",), ("changes",)]
    assert ms.execute("DESCRIBE bank.changes")[0] == ("id", "int", "")


def test_division_by_zero_is_null_as_in_hive(ms: Metastore) -> None:
    """Hive's / and % give NULL for a zero divisor: the condition is unknown, no row is deleted."""
    before = table_rows(ms)
    assert ms.execute("DELETE FROM bank.accounts WHERE id / 0 = 1 OR id % 0 = 0 OR balance / 0 > 1") == [
        (0, 0, 0)
    ]
    assert ms.execute("DELETE FROM bank.accounts WHERE id / 0 IS NULL AND id % 0 IS NULL AND id < 2") == [
        (0, 0, 2)
    ]
    assert table_rows(ms) == before[2:]


def test_integer_overflow_wraps_around_as_in_hive(ms: Metastore) -> None:
    """int op int is an int and bigint op bigint a bigint, wrapping around as Java's arithmetic; a wider value
    set into a narrower column keeps its low bits, as Hive's casts do."""
    ms.execute(
        "CREATE TABLE bank.gens (id int, gen int, big bigint, tiny tinyint) STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    rows = pa.table(
        {
            "id": pa.array([1, 2], pa.int32()),
            "gen": pa.array([7, 2147483647], pa.int32()),
            "big": pa.array([3, -9223372036854775808], pa.int64()),
            "tiny": pa.array([100, -128], pa.int8()),
        }
    )
    ms.table("bank.gens").merge(rows, on=["id"])
    counts = ms.execute(
        "UPDATE bank.gens SET gen = (gen + 100000) * 100000, big = big * 9223372036854775807 - 1, tiny = tiny + 200"
    )
    assert counts == [(0, 2, 0)]
    got = sorted(ms.table("bank.gens").scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["gen"], r["big"], r["tiny"]) for r in got] == [
        (java_int((7 + 100000) * 100000), java_int(3 * 9223372036854775807 - 1, 64), java_int(300, 8)),
        (java_int((2147483647 + 100000) * 100000), java_int(-(2**63) * (2**63 - 1) - 1, 64), java_int(72, 8)),
    ]


def test_div_by_zero_fails_the_statement_with_a_typed_error_and_commits_nothing(ms: Metastore) -> None:
    """Hive's DIV (UDFOPLongDivide) fails the query on a zero divisor."""
    before = table_rows(ms)
    with pytest.raises(
        InvalidObjectException, match="the statement failed on the table's rows: divide by zero"
    ):
        ms.execute("UPDATE bank.accounts SET name = 'x' WHERE id DIV (id - 3) = 0")
    assert table_rows(ms) == before
    assert not [t for t in ms.show_txns() if t.state is TxnStatus.OPEN]
