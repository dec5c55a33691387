"""MERGE INTO ... USING another table, on both backends: every clause shape, SQL's routing of rows, the
source read at the txn's snapshot, and errors before any txn."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from sqlhelpers import ACCOUNTS, CHANGES, changes, table_rows

from acidstream.catalog import Metastore
from acidstream.errors import InvalidObjectException, SqlSyntaxError
from acidstream.metastore import TxnStatus
from acidstream.read.scan import TableScan
from acidstream.sql import merge_into as sql_merge

UPSERT = [
    {"id": 1, "name": "one", "balance": 1.5, "region": "EU", "op": "u"},
    {"id": 2, "name": "two", "balance": 2, "region": "US", "op": "d"},
    {"id": 20, "name": "twenty", "balance": 20, "region": "US", "op": "i"},
    {"id": 21, "name": "twenty-one", "balance": None, "region": "APAC", "op": "i"},
]


def by_id(ms: Metastore) -> dict[int, dict[str, Any]]:
    return {r["id"]: r for r in table_rows(ms)}


def test_upsert_with_a_conditional_delete(ms: Metastore) -> None:
    changes(ms, UPSERT)
    counts = ms.execute(
        """MERGE INTO bank.accounts AS t USING bank.changes AS s ON t.id = s.id
           WHEN MATCHED AND s.op = 'd' THEN DELETE
           WHEN MATCHED THEN UPDATE SET balance = t.balance + s.balance, name = s.name
           WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.name, coalesce(s.balance, 0), current_date, s.region)"""
    )
    assert counts == [(2, 1, 1)]
    rows = by_id(ms)
    assert sorted(rows) == [0, 1, *range(3, 10), 20, 21]
    assert (rows[1]["name"], rows[1]["balance"], rows[1]["region"]) == ("one", Decimal("11.50"), "EU")
    assert (rows[21]["balance"], rows[21]["region"]) == (Decimal(0), "APAC")  # a new partition
    assert rows[20]["opened"] is not None
    assert [tuple(p.values) for p in ms.list_partitions(ACCOUNTS)] == [("APAC",), ("EU",), ("US",)]


def test_star_takes_the_columns_the_source_shares(ms: Metastore) -> None:
    changes(ms, UPSERT)
    before = by_id(ms)
    counts = ms.execute(
        "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT (id, name, balance, region) VALUES (s.id, s.name, s.balance, s.region)"
    )
    assert counts == [(2, 2, 0)]
    rows = by_id(ms)
    assert (rows[2]["name"], rows[2]["balance"], rows[2]["opened"]) == (
        "two",
        Decimal(2),
        before[2]["opened"],
    )
    assert rows[20]["opened"] is None  # not listed: NULL


def test_insert_star_needs_every_target_column(ms: Metastore) -> None:
    with pytest.raises(
        SqlSyntaxError, match=re.escape("INSERT * needs source columns named as the target's: no ['opened']")
    ):
        ms.execute(
            "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *"
        )


def test_update_star_refuses_to_move_a_row_between_partitions(ms: Metastore) -> None:
    changes(ms, [{"id": 1, "name": "x", "balance": 1, "region": "US", "op": None}])  # 1 lives in EU
    before = table_rows(ms)
    with pytest.raises(InvalidObjectException, match="rows never move between partitions"):
        ms.execute(
            "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id WHEN MATCHED THEN UPDATE SET *"
        )
    assert table_rows(ms) == before
    assert not [t for t in ms.show_txns() if t.state is TxnStatus.OPEN]


def test_on_conditions_decide_what_matches(ms: Metastore) -> None:
    """A source row failing ON's other conditions matches nothing: SQL inserts it (here it collides with
    nothing, since the target's row 3 is only 'not matched by source')."""
    changes(
        ms,
        [
            {"id": 1, "name": "a", "balance": 1, "region": "EU", "op": "u"},
            {"id": 3, "name": "b", "balance": 3, "region": "EU", "op": "skip"},
        ],
    )
    counts = ms.execute(
        "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id AND s.op <> 'skip' AND t.balance < s.balance + 100 "
        "WHEN MATCHED THEN UPDATE SET name = s.name "
        "WHEN NOT MATCHED AND s.op = 'skip' THEN INSERT (id, name, region) VALUES (s.id + 100, 'skipped', s.region)"
    )
    assert counts == [(1, 1, 0)]
    rows = by_id(ms)
    assert (rows[1]["name"], rows[3]["name"], rows[103]["name"]) == ("a", "n3", "skipped")


def test_not_matched_by_source(ms: Metastore) -> None:
    changes(ms, [{"id": i, "name": None, "balance": 0, "region": None, "op": None} for i in (0, 1, 2)])
    counts = ms.execute(
        "MERGE INTO bank.accounts USING bank.changes ON accounts.id = changes.id "
        "WHEN NOT MATCHED BY SOURCE AND accounts.region = 'EU' THEN DELETE "
        "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET name = concat(name, '-gone'), balance = balance - 1"
    )
    assert counts == [(0, 3, 4)]  # 3, 5, 7, 9 deleted (EU); 4, 6, 8 updated
    rows = by_id(ms)
    assert sorted(rows) == [0, 1, 2, 4, 6, 8]
    assert (rows[4]["name"], rows[4]["balance"], rows[0]["name"]) == ("n4-gone", Decimal(39), "n0")


def test_composite_keys_of_different_integer_types(ms: Metastore) -> None:
    """changes.id is an int, accounts.id a bigint: they join as bigints; a key with a NULL never matches."""
    changes(
        ms,
        [
            {"id": 5, "name": "n5", "balance": 0, "region": "EU", "op": None},
            {"id": 6, "name": "x", "balance": 0, "region": "US", "op": None},
            {"id": 7, "name": None, "balance": 0, "region": "EU", "op": None},
        ],
    )
    counts = ms.execute(
        "MERGE INTO bank.accounts t USING bank.changes s ON s.id = t.id AND t.name = s.name AND t.region = s.region "
        "WHEN MATCHED THEN UPDATE SET balance = s.balance"
    )
    assert counts == [(0, 1, 0)]
    assert by_id(ms)[5]["balance"] == Decimal(0)


def test_two_source_rows_for_one_target_row_are_refused(ms: Metastore) -> None:
    changes(
        ms,
        [
            {"id": 4, "name": "a", "balance": 0, "region": "US", "op": None},
            {"id": 4, "name": "b", "balance": 0, "region": "US", "op": None},
        ],
    )
    before = table_rows(ms)
    with pytest.raises(InvalidObjectException, match=r"2 source rows match the target row with \{'id': 4\}"):
        ms.execute("MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id WHEN MATCHED THEN DELETE")
    assert table_rows(ms) == before
    # without a MATCHED clause, duplicates that match change nothing and are not an error
    sql = "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *"
    with pytest.raises(SqlSyntaxError):  # INSERT * needs 'opened'
        ms.execute(sql)
    counts = ms.execute(
        "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id "
        "WHEN NOT MATCHED THEN INSERT (id, region) VALUES (s.id, s.region)"
    )
    assert counts == [(0, 0, 0)]


def test_the_source_is_read_at_the_txn_snapshot(ms: Metastore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A delete committed to the source after the merge's txn took its snapshot is not seen by the merge."""
    changes(ms, [{"id": 30, "name": "late", "balance": 0, "region": "US", "op": None}])
    interfered = []

    def scan_after_a_concurrent_delete(metastore: Any, table: Any, **kwargs: Any) -> TableScan:
        if table.full_name == CHANGES and kwargs.get("snapshot") is not None and not interfered:
            interfered.append(None)
            interfered[0] = ms.execute("DELETE FROM bank.changes")  # commits before the merge reads it
        return TableScan(metastore, table, **kwargs)

    monkeypatch.setattr(sql_merge, "TableScan", scan_after_a_concurrent_delete)
    counts = ms.execute(
        "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id "
        "WHEN NOT MATCHED THEN INSERT (id, region) VALUES (s.id, s.region)"
    )
    assert interfered == [[(0, 0, 1)]]
    assert counts == [(1, 0, 0)]
    assert table_rows(ms, CHANGES) == []
    assert 30 in by_id(ms)


@pytest.mark.parametrize(
    ("statement", "message", "at"),
    [
        (
            "MERGE INTO bank.accounts t USING bank.changes s ON t.id > s.id WHEN MATCHED THEN DELETE",
            "ON needs an equality of a target and a source column",
            "t.id >",
        ),
        (
            "MERGE INTO bank.accounts t USING bank.changes s WHEN MATCHED THEN DELETE",
            "MERGE needs ON",
            "bank.accounts",
        ),
        (
            "MERGE INTO bank.accounts t USING bank.changes s ON id = s.id WHEN MATCHED THEN DELETE",
            "column id is in both tables: qualify it",
            "id =",
        ),
        (
            "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id AND x.op = 'd' WHEN MATCHED THEN DELETE",
            "unknown table 'x'",
            "x.op",
        ),
        (
            "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.nope WHEN MATCHED THEN DELETE",
            "bank.changes has no column 'nope'",
            "s.nope",
        ),
        (
            "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.name WHEN MATCHED THEN DELETE",
            "cannot join int64 with string",
            "t.id",
        ),
        (
            "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id) VALUES (t.id)",
            "WHEN NOT MATCHED has no target row",
            "t.id)",
        ),
        (
            "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id WHEN NOT MATCHED BY SOURCE AND s.op = 'd' THEN DELETE",
            "WHEN NOT MATCHED BY SOURCE has no source row",
            "s.op",
        ),
        (
            "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id WHEN NOT MATCHED BY SOURCE THEN UPDATE SET *",
            "there is no source row to take values from",
            "",
        ),
        (
            "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id WHEN MATCHED THEN INSERT VALUES (1)",
            "WHEN MATCHED clauses do UPDATE SET or DELETE, not INSERT",
            "1)",
        ),
        (
            "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id)",
            "1 values for 2 columns (id, name)",
            "s.id)",
        ),
        (
            "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, id) VALUES (1, 2)",
            "column id is listed twice",
            "id) VALUES",
        ),
        (
            "MERGE INTO bank.accounts t USING bank.changes s ON t.id = s.id WHEN MATCHED THEN UPDATE SET s.name = 'x'",
            "unknown table 's'",
            "s.name =",
        ),
        (
            "MERGE INTO bank.accounts t USING (SELECT * FROM bank.changes) s ON t.id = s.id WHEN MATCHED THEN DELETE",
            "a subquery or expression as a table",
            "(SELECT * FROM",
        ),
        (
            "MERGE INTO bank.accounts USING bank.accounts ON accounts.id = accounts.id WHEN MATCHED THEN DELETE",
            "both called accounts: give one an alias",
            "bank.accounts ON",
        ),
    ],
)
def test_errors_point_at_the_statement_and_open_no_txn(
    ms: Metastore, statement: str, message: str, at: str
) -> None:
    with pytest.raises(SqlSyntaxError, match=re.escape(message)) as info:
        ms.execute(statement)
    assert statement[info.value.position :].startswith(at)
    assert ms.show_txns() == []
