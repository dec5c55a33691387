"""Schema evolution on our SQL metastore: files written before an ALTER read under the new columns as Hive 4
reads them (positionally: added columns NULL, widened types converted), new files carry the new columns, and a
change Hive refuses is refused with Hive's message (docs/format.md, Schema evolution)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as po
import pytest
from readhelpers import connect, create, stream

from acidstream import Metastore
from acidstream.errors import DdlSyntaxError, InvalidOperationException, TableChanged


def _rows(ms: Metastore, name: str) -> list[tuple[object, ...]]:
    return sorted((tuple(r.values()) for r in ms.table(name).scan().to_arrow().to_pylist()), key=repr)


def test_added_columns_read_null_in_old_files_and_new_files_carry_them(ms: Metastore) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", [({"id": [1, 2], "msg": ["a", "b"]}, True)])
    ms.execute("ALTER TABLE db.t ADD COLUMNS (score double COMMENT 'new', tags array<string>)")
    assert [c.name for c in ms.table("db.t").columns] == ["id", "msg", "score", "tags"]
    stream(ms, "t", [({"id": [3], "msg": ["c"], "score": [1.5], "tags": [["x"]]}, True)])
    assert _rows(ms, "db.t") == [(1, "a", None, None), (2, "b", None, None), (3, "c", 1.5, ["x"])]
    # a projection of only added columns reads files that have none of them
    got = ms.table("db.t").scan(columns=["tags"]).to_arrow().column("tags").to_pylist()
    assert sorted(got, key=str) == [None, None, ["x"]]


def test_widened_columns_read_old_values_converted(ms: Metastore) -> None:
    create(ms, "w", "i int, s smallint, f float, d decimal(10,2), v varchar(3), n int")
    stream(
        ms,
        "w",
        [
            (
                {
                    "i": pa.array([7], pa.int32()),
                    "s": pa.array([-2], pa.int16()),
                    "f": pa.array([0.5], pa.float32()),
                    "d": [Decimal("1.25")],
                    "v": ["abc"],
                    "n": pa.array([42], pa.int32()),
                },
                True,
            )
        ],
    )
    for change in (
        "CHANGE i i bigint",
        "CHANGE COLUMN s s int",
        "CHANGE f f double",
        "CHANGE d d decimal(12,4)",
        "CHANGE v v string",
        "CHANGE n n_text string",
    ):
        ms.execute(f"ALTER TABLE db.w {change}")
    table = ms.table("db.w")
    assert [str(c) for c in table.columns] == [
        "i bigint",
        "s int",
        "f double",
        "d decimal(12,4)",
        "v string",
        "n_text string",
    ]
    stream(
        ms,
        "w",
        [
            (
                {
                    "i": [2**40],
                    "s": [70000],
                    "f": [0.25],
                    "d": [Decimal("2.5")],
                    "v": ["long"],
                    "n_text": ["x"],
                },
                True,
            )
        ],
    )
    assert _rows(ms, "db.w") == [
        (2**40, 70000, 0.25, Decimal("2.5000"), "long", "x"),
        (7, -2, 0.5, Decimal("1.2500"), "abc", None),  # renamed: see below
    ]


def test_a_renamed_column_reads_by_name_or_by_position_as_hive_does(ms: Metastore) -> None:
    """Hive 4 matches a file's fields to the table's columns by name, unless the file names them ``_col0``...
    (as Hive's own writers do): then by position. Our files carry the names, so a renamed column reads NULL
    in them (as Hive reads them); a file of ``_colN`` fields keeps its values under the new name."""
    create(ms, "r", "a int, b string")
    stream(ms, "r", [({"a": [1], "b": ["x"]}, True)])
    location = Path(ms.table("db.r").location)
    po.write_table(pa.table({"_col0": pa.array([2], pa.int32()), "_col1": ["y"]}), location / "000000_0")
    ms.execute("ALTER TABLE db.r CHANGE a first_a int")
    assert _rows(ms, "db.r") == [(2, "y"), (None, "x")]
    got = ms.table("db.r").scan(columns=["first_a"]).to_arrow().column(0).to_pylist()
    assert sorted(got, key=str) == [2, None]
    ms.execute("ALTER TABLE db.r CHANGE first_a a int")  # renamed back: the name finds the values again
    assert sorted(ms.table("db.r").scan(columns=["a"]).to_arrow().column(0).to_pylist()) == [1, 2]


def test_original_files_map_columns_by_name_and_lack_added_ones(ms: Metastore) -> None:
    create(ms, "o", "id int, msg string")
    location = Path(ms.table("db.o").location)
    location.mkdir(parents=True, exist_ok=True)
    po.write_table(pa.table({"msg": ["m"], "id": pa.array([5], pa.int32())}), location / "000000_0")
    ms.execute("ALTER TABLE db.o ADD COLUMNS (extra bigint)")
    assert _rows(ms, "db.o") == [(5, "m", None)]


@pytest.mark.parametrize(
    ("change", "bad"),
    [
        ("CHANGE id id smallint", "id"),  # narrowing
        ("CHANGE msg msg int", "msg"),  # string to number
        ("REPLACE COLUMNS (id string, msg date)", "msg"),
        ("CHANGE id id array<int>", "id"),
    ],
)
def test_incompatible_changes_are_refused_with_hives_message(ms: Metastore, change: str, bad: str) -> None:
    create(ms, "x", "id int, msg string")
    with pytest.raises(InvalidOperationException) as e:
        ms.execute(f"ALTER TABLE db.x {change}")
    assert str(e.value) == (
        "The following columns have types incompatible with the existing columns in their respective "
        f"positions :\n{bad}"
    )
    assert [str(c) for c in ms.table("db.x").columns] == ["id int", "msg string"]


def test_column_names_must_stay_unique(ms: Metastore) -> None:
    create(ms, "u", "id int, msg string", "PARTITIONED BY (k string)")
    for change, name in (
        ("ADD COLUMNS (msg string)", "msg"),
        ("ADD COLUMNS (k int)", "k"),
        ("CHANGE id msg int", "msg"),
    ):
        with pytest.raises(InvalidOperationException, match=f"^Duplicate column name: {name}$"):
            ms.execute(f"ALTER TABLE db.u {change}")
    with pytest.raises(InvalidOperationException, match=r"^Invalid column reference nope$"):
        ms.execute("ALTER TABLE db.u CHANGE nope x int")
    with pytest.raises(DdlSyntaxError):
        ms.execute("ALTER TABLE db.u ADD COLUMNS id2 int")


def test_changes_hive_refuses_for_a_transactional_table(ms: Metastore) -> None:
    """Hive's compiler refuses to move a column (FIRST/AFTER), to drop columns by REPLACE COLUMNS (ORC's
    schema evolution reads an ACID file's columns by position), and CASCADE on a table without partitions: the
    same words here, the columns unchanged."""
    create(ms, "m", "a string, b string, c string")
    refused = {
        "CHANGE c c string FIRST": "Reordering columns is not supported for table db.m. SerDe may be incompatible",
        "CHANGE c c string AFTER a": "Reordering columns is not supported for table db.m. SerDe may be incompatible",
        "REPLACE COLUMNS (a string, b string)": (
            "Replacing columns cannot drop columns for table db.m. SerDe may be incompatible"
        ),
        "ADD COLUMNS (d int) CASCADE": "Alter table with non-partitioned table does not support cascade",
        "CHANGE nope b int": "Duplicate column name: b",  # as Hive, the duplicate before the missing column
    }
    for change, message in refused.items():
        with pytest.raises(InvalidOperationException) as e:
            ms.execute(f"ALTER TABLE db.m {change}")
        assert str(e.value) == message, change
    assert [str(c) for c in ms.table("db.m").columns] == ["a string", "b string", "c string"]
    # CASCADE on a partitioned table, and a REPLACE that keeps every position, are taken
    create(ms, "p", "a string", "PARTITIONED BY (k string)")
    ms.execute("ALTER TABLE db.p ADD COLUMNS (d int) CASCADE")
    ms.execute("ALTER TABLE db.p REPLACE COLUMNS (a string, d bigint, e string)")
    assert [str(c) for c in ms.table("db.p").columns] == ["a string", "d bigint", "e string"]


def test_a_connection_opened_before_an_alter_fails_at_its_next_batch(ms: Metastore) -> None:
    create(ms, "s", "id int, msg string")
    conn = connect(ms, "s", batch=2)
    try:
        for i in (1, 2):  # one batch of two txns, opened before the ALTER
            conn.begin_transaction()
            if i == 2:
                ms.execute("ALTER TABLE db.s ADD COLUMNS (extra bigint)")
            conn.write_batch(pa.table({"id": pa.array([i], pa.int32()), "msg": [f"m{i}"]}))
            conn.commit_transaction()
        with pytest.raises(TableChanged) as e:
            conn.begin_transaction()
        assert e.value.table == "db.s"
        assert str(e.value) == (
            "Table db.s changed since the streaming connection opened: columns were (id int, msg string), "
            "now (id int, msg string, extra bigint); connect again"
        )
        with pytest.raises(TableChanged):  # and again, without opening a txn
            conn.begin_transaction()
        assert ms.show_txns() == []  # no txn was opened for the refused batch
    finally:
        conn.close()
    assert _rows(ms, "db.s") == [(1, "m1", None), (2, "m2", None)]
    stream(
        ms, "s", [({"id": [3], "msg": ["m3"], "extra": [9]}, True)]
    )  # a new connection writes the new columns
    assert _rows(ms, "db.s") == [(1, "m1", None), (2, "m2", None), (3, "m3", 9)]
