"""The Hive 2.3 interop harness itself: Hive's updater writes, Hive's reader reads back, snapshots differ."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.orc as po
import pytest

from acidstream.acid.writeids import ValidWriteIdList
from support.hivejvm import HiveJvm

MAX = 9223372036854775807
COLS = [("id", "int"), ("msg", "string")]


@pytest.fixture(scope="module")
def hive(spark: Any) -> HiveJvm:
    return HiveJvm(spark)


def _names(paths: list[str], table: Path) -> list[str]:
    return [os.path.relpath(p, table) for p in paths]


def test_inserts_read_back_per_snapshot_with_v0_row_ids(hive: HiveJvm, tmp_path: Path) -> None:
    t = str(tmp_path)
    written = hive.write_with_record_updater(
        t, COLS, [("insert", 1, (1, "a")), ("insert", 1, (2, "b"))], bucket=0, min_write_id=1, max_write_id=1
    )
    hive.write_with_record_updater(
        t, COLS, [("insert", 2, (3, "c"))], bucket=1, min_write_id=2, max_write_id=2
    )
    hive.write_with_record_updater(
        t, COLS, [("insert", 3, (4, "d"))], bucket=0, min_write_id=3, max_write_id=3
    )
    assert _names(written, tmp_path) == ["delta_0000001_0000001_0000/bucket_00000"]
    assert (tmp_path / "_orc_acid_version").read_bytes() == b"\0\0\0\0"

    everything = hive.read_acid_table_with_row_ids(t, COLS, f"3:{MAX}::", bucket_count=2)
    assert sorted(everything) == [
        ((1, 0, 0), (1, "a")),
        ((1, 0, 1), (2, "b")),
        ((2, 1, 0), (3, "c")),
        ((3, 0, 0), (4, "d")),
    ]
    assert sorted(hive.read_acid_table(t, COLS, "3:2:2")) == [(1, "a"), (2, "b"), (4, "d")]
    assert sorted(hive.read_acid_table(t, COLS, f"1:{MAX}::")) == [(1, "a"), (2, "b")]


TYPED = [
    ("ti", "tinyint"),
    ("si", "smallint"),
    ("i", "int"),
    ("bi", "bigint"),
    ("b", "boolean"),
    ("f", "float"),
    ("d", "double"),
    ("dec", "decimal(20,3)"),
    ("s", "string"),
    ("vc", "varchar(5)"),
    ("dt", "date"),
    ("ts", "timestamp"),
    ("bin", "binary"),
    ("arr", "array<bigint>"),
    ("m", "map<string,int>"),
    ("st", "struct<x:int,y:array<string>>"),
]
TYPED_ROW = (
    -5,
    -300,
    7,
    1 << 40,
    True,
    1.5,
    2.25,
    Decimal("12345678901234567.125"),
    "héllo",
    "abc",
    dt.date(2024, 2, 29),
    pd.Timestamp("2024-03-01 12:34:56.123456789"),
    b"\x00\xff",
    [1, 1 << 35, None],
    {"k": 1},
    {"x": 3, "y": ["p", None]},
)


def test_every_type_round_trips_and_matches_pyarrow(hive: HiveJvm, tmp_path: Path) -> None:
    t = str(tmp_path)
    nulls = (None,) * len(TYPED)
    (path,) = hive.write_with_record_updater(
        t, TYPED, [("insert", 1, TYPED_ROW), ("insert", 1, nulls)], bucket=0, min_write_id=1, max_write_id=1
    )
    assert hive.read_acid_table(t, TYPED, f"1:{MAX}::") == [TYPED_ROW, nulls]

    arrow_rows = po.read_table(path).column("row").to_pylist()
    as_tuples = [tuple(r.values()) for r in arrow_rows]
    as_tuples[0] = tuple(
        dict(v) if name == "m" else v for (name, _), v in zip(TYPED, as_tuples[0], strict=True)
    )
    assert as_tuples == [TYPED_ROW, nulls]


def test_split_update_writes_delete_delta_that_hive_23_reader_ignores(hive: HiveJvm, tmp_path: Path) -> None:
    t = str(tmp_path)
    hive.write_with_record_updater(
        t, COLS, [("insert", 1, (i, f"m{i}")) for i in range(3)], bucket=0, min_write_id=1, max_write_id=1
    )
    written = hive.write_with_record_updater(
        t,
        COLS,
        [("delete", 2, (1, 0, 0)), ("update", 2, (1, 0, 2), (2, "m2-upd"))],
        bucket=0,
        min_write_id=2,
        max_write_id=2,
    )
    assert _names(written, tmp_path) == [
        "delete_delta_0000002_0000002_0000/bucket_00000",
        "delta_0000002_0000002_0000/bucket_00000",
    ]
    assert hive.orc_rows(written[0]) == [(2, 1, 0, 0, 2, None), (2, 1, 0, 2, 2, None)]
    assert hive.orc_rows(written[1]) == [(0, 2, 0, 0, 2, {"id": 2, "msg": "m2-upd"})]
    assert hive.orc_file_info(written[0])["metadata"]["hive.acid.stats"] == "0,0,2"
    # Legacy-mode reader: delete_delta_* is not consulted, so the deleted and the pre-update rows remain.
    assert sorted(hive.read_acid_table(t, COLS, f"2:{MAX}::")) == [
        (0, "m0"),
        (1, "m1"),
        (2, "m2"),
        (2, "m2-upd"),
    ]
    state = hive.acid_state(t, f"2:{MAX}::")
    assert state["deltas"] == [
        ("delta_0000001_0000001_0000", 1, 1, 0, False),
        ("delete_delta_0000002_0000002_0000", 2, 2, 0, True),
        ("delta_0000002_0000002_0000", 2, 2, 0, False),
    ]


def test_split_update_deletes_carry_the_updaters_bucket_not_the_rows(hive: HiveJvm, tmp_path: Path) -> None:
    """Hive 2.3's limit as a referee: a delete of a row whose ROW__ID.bucketid is V1-encoded (bucket 0,
    statement 0: 536870912) is written with the updater's plain bucket number, so it can never match that row."""
    [written] = hive.write_with_record_updater(
        str(tmp_path), COLS, [("delete", 3, (2, 536870912, 5))], bucket=0, min_write_id=3, max_write_id=3
    )
    assert hive.orc_rows(written) == [(2, 2, 0, 5, 3, None)]


def test_legacy_inline_delete_is_applied_by_hive_reader(hive: HiveJvm, tmp_path: Path) -> None:
    t = str(tmp_path)
    hive.write_with_record_updater(
        t, COLS, [("insert", 1, (i, f"m{i}")) for i in range(3)], bucket=0, min_write_id=1, max_write_id=1
    )
    (path,) = hive.write_with_record_updater(
        t,
        COLS,
        [("delete", 2, (1, 0, 0)), ("update", 2, (1, 0, 2), (2, "m2-upd"))],
        bucket=0,
        min_write_id=2,
        max_write_id=2,
        split_update=False,
    )
    assert [r[0] for r in hive.orc_rows(path)] == [2, 1]  # inline delete and update events
    assert sorted(hive.read_acid_table(t, COLS, f"2:{MAX}::")) == [(1, "m1"), (2, "m2-upd")]
    assert sorted(hive.read_acid_table(t, COLS, "2:2:2")) == [(0, "m0"), (1, "m1"), (2, "m2")]


def test_multi_txn_flush_and_open_side_file(hive: HiveJvm, tmp_path: Path) -> None:
    t = str(tmp_path)
    ops = [("insert", w, (w * 10 + i, "x")) for w in (4, 5, 6) for i in range(2)]
    (closed,) = hive.write_with_record_updater(
        t, COLS, ops, bucket=0, min_write_id=4, max_write_id=6, flush_after_each_write_id=True
    )
    info = hive.orc_file_info(closed)
    assert (info["rows"], info["stripes"], info["compression"]) == (6, 3, "ZLIB")
    assert info["metadata"]["hive.acid.key.index"] == "4,0,1;5,0,1;"
    assert sorted(hive.read_acid_table(t, COLS, "6:5:5")) == [(40, "x"), (41, "x"), (60, "x"), (61, "x")]

    try:
        data, side = hive.write_with_record_updater(
            t,
            COLS,
            ops[:4],
            bucket=1,
            min_write_id=4,
            max_write_id=6,
            flush_after_each_write_id=True,
            keep_open=True,
        )
        assert side == data + "_flush_length"
        lengths = [int.from_bytes(Path(side).read_bytes()[i : i + 8], "big") for i in (0, 8)]
        assert [hive.orc_file_info(data, max_length=n)["rows"] for n in lengths] == [2, 4]
        assert os.path.getsize(data) == lengths[-1]
        assert sorted(
            r for r in hive.read_acid_table(t, COLS, f"6:{MAX}::", bucket_count=2) if r[0] < 60
        ) == [
            (40, "x"),
            (40, "x"),
            (41, "x"),
            (41, "x"),
            (50, "x"),
            (50, "x"),
            (51, "x"),
            (51, "x"),
        ]
    finally:
        hive.close_open_updaters()
    assert not os.path.exists(side)


def test_statement_ids_base_and_acid_state(hive: HiveJvm, tmp_path: Path) -> None:
    t = str(tmp_path)
    hive.write_with_record_updater(
        t, COLS, [("insert", 1, (1, "a"))], bucket=0, min_write_id=1, max_write_id=1
    )
    base = hive.write_with_record_updater(
        t, COLS, [("insert", 2, (1, "a"))], bucket=0, min_write_id=2, max_write_id=2, writing_base=True
    )
    for stmt in (1, 2):
        hive.write_with_record_updater(
            t, COLS, [("insert", 3, (stmt, "s"))], bucket=0, min_write_id=3, max_write_id=3, statement_id=stmt
        )
    assert _names(base, tmp_path) == ["base_0000002/bucket_00000"]
    state = hive.acid_state(t, f"3:{MAX}::")
    assert state["base"] == "base_0000002"
    assert state["deltas"] == [
        ("delta_0000003_0000003_0001", 3, 3, 1, False),
        ("delta_0000003_0000003_0002", 3, 3, 2, False),
    ]
    assert state["obsolete"] == ["delta_0000001_0000001_0000"]
    assert state["originals"] == []
    assert sorted(hive.read_acid_table(t, COLS, f"3:{MAX}::")) == [(1, "a"), (1, "s"), (2, "s")]


@pytest.mark.parametrize(
    "text",
    ["db.t:5:9223372036854775807::", "db.t:10:7:7:", "db.t:10:9223372036854775807::7", "db.t:10:4:4,8:2,6"],
)
def test_java_write_id_list_agrees_with_ours(hive: HiveJvm, text: str) -> None:
    java, ours = hive.valid_write_id_list(text), ValidWriteIdList.parse(text)
    assert java.write_to_string() == str(ours) == text
    for w in range(12):
        assert java.is_write_id_valid(w) == ours.is_write_id_valid(w)
        assert java.is_write_id_aborted(w) == ours.is_write_id_aborted(w)
        assert java.is_valid_base(w) == ours.is_valid_base(w)
    for lo, hi in [(1, 3), (2, 8), (6, 7), (11, 12)]:
        assert java.is_write_id_range_valid(lo, hi) == ours.is_write_id_range_valid(lo, hi).value
        assert java.is_write_id_range_aborted(lo, hi) == ours.is_write_id_range_aborted(lo, hi).value
