"""Hive 4 judges schema evolution of decimal and complex columns: a decimal's precision and scale widened, a
field added inside a struct, a list's and a map's values widened. Old files read under the new types as Hive's
reader reads them, new files carry the new types, rows of old files take updates, and a major compaction
rewrites both into one base. A decimal changed so that old values no longer fit reads them as NULL (rounded
to the new scale first), as Hive's reader does. On our metastore and on a Hive Metastore."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pyarrow.compute as pc
import pytest

from acidstream.catalog import Metastore
from hive4.judge import hive_rows, judge, our_rows
from hive4.referee import Referee
from hive4.schema_support import both_metastores, compact, stream

pytestmark = pytest.mark.hive4


@pytest.fixture(params=["ours", "hive"])
def ms(request: pytest.FixtureRequest, tmp_path: Path, warehouse: Path) -> Iterator[tuple[Metastore, str]]:
    yield from both_metastores(request, tmp_path, warehouse)


def test_decimal_and_complex_widenings(hive4: Referee, ms: tuple[Metastore, str]) -> None:
    m, db = ms
    t = f"{db}.w"
    m.execute(
        f"CREATE TABLE {t} (id int, price decimal(10,2), st struct<a:int,b:string>, arr array<int>, "
        "m map<string,int>) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    stream(
        m,
        t,
        {
            "id": [1, 2, 3],
            "price": [Decimal("12.30"), Decimal("-99999999.99"), None],
            "st": [{"a": 1, "b": "x"}, None, {"a": None, "b": "z"}],
            "arr": [[1, None, 2**31 - 1], [], None],
            "m": [[("k", 1)], None, [("n", None)]],
        },
    )
    model = {
        1: (1, "12.3", [1, "x"], [1, None, 2**31 - 1], [["k", 1]]),
        2: (2, "-99999999.99", None, [], None),
        3: (3, None, [None, "z"], None, [["n", None]]),
    }
    judge(hive4, m, t, expected=model.values())

    for change in (
        "CHANGE price price decimal(12,4)",
        "CHANGE st st struct<a:int,b:string,c:double>",
        "CHANGE arr arr array<bigint>",
        "CHANGE m m map<string,bigint>",
    ):
        m.execute(f"ALTER TABLE {t} {change}")
    assert [str(c.type) for c in m.table(t).columns] == [
        "int",
        "decimal(12,4)",
        "struct<a:int,b:string,c:double>",
        "array<bigint>",
        "map<string,bigint>",
    ]
    # the struct's added field reads NULL in old files
    model = {k: (*v[:2], None if v[2] is None else [*v[2], None], *v[3:]) for k, v in model.items()}
    judge(hive4, m, t, expected=model.values())
    stream(
        m,
        t,
        {
            "id": [4],
            "price": [Decimal("12345678.1234")],
            "st": [{"a": 4, "b": "w", "c": 0.5}],
            "arr": [[2**40]],
            "m": [[("big", 2**40)]],
        },
    )
    model[4] = (4, "12345678.1234", [4, "w", 0.5], [2**40], [["big", 2**40]])
    judge(hive4, m, t, expected=model.values())

    m.table(t).update(pc.field("id") == 1, {"price": Decimal("0.0001")})
    model[1] = (1, "0.0001", *model[1][2:])
    judge(hive4, m, t, expected=model.values())
    compact(m, t)
    judge(hive4, m, t, expected=model.values())


def test_decimal_values_that_no_longer_fit_read_null(hive4: Referee, ms: tuple[Metastore, str]) -> None:
    """Hive's metastore lets a decimal column take any decimal type and an integer column any decimal type;
    old values are rounded half up to the new scale, and those with too many digits for the new precision
    read as NULL."""
    m, db = ms
    t = f"{db}.n"
    m.execute(
        f"CREATE TABLE {t} (id int, d decimal(10,2), i bigint) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    stream(
        m,
        t,
        {
            "id": [1, 2, 3, 4],
            "d": [Decimal("123.45"), Decimal("12345.67"), Decimal("-0.05"), Decimal("999.96")],
            "i": [99, 1000, -100, 2**40],
        },
    )
    m.execute(f"ALTER TABLE {t} CHANGE d d decimal(4,1)")
    m.execute(f"ALTER TABLE {t} CHANGE i i decimal(3,1)")
    expected = [
        (1, "123.5", "99"),
        (2, None, None),
        (3, "-0.1", None),
        (4, None, None),
    ]
    judge(hive4, m, t, expected=expected)
    compact(m, t)  # the base holds what Hive reads: NULLs where values did not fit
    judge(hive4, m, t, expected=expected)


def test_values_read_as_text_as_hive_prints_them_and_narrowed_strings_cut(
    hive4: Referee, ms: tuple[Metastore, str]
) -> None:
    """Decimal, float, double and timestamp columns become string columns: old values read as Hive prints them
    (a decimal without trailing zeros, a float widened to double and printed as Java prints a double, a
    timestamp's fraction without trailing zeros); a narrowed varchar or char cuts longer old values."""
    m, db = ms
    t = f"{db}.s"
    m.execute(
        f"CREATE TABLE {t} (id int, v varchar(10), c char(6), d decimal(10,2), f float, x double, ts timestamp) "
        "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    stream(
        m,
        t,
        {
            "id": [1, 2, 3],
            "v": ["abcdéfghij", "ab", None],
            "c": ["abcdef", "a", None],
            "d": [Decimal("12.30"), Decimal("-0.05"), Decimal("100.00")],
            "f": [0.1, 1e10, float("nan")],
            "x": [0.1, 1e20, 12345678.0],
            "ts": [dt.datetime(2020, 1, 2, 3, 4, 5, 600000), dt.datetime(1960, 1, 1), None],
        },
    )
    m.execute(
        f"ALTER TABLE {t} REPLACE COLUMNS (id int, v varchar(4), c char(3), d string, f string, x string, "
        "ts string)"
    )
    expected = [
        (1, "abcd", "abc", "12.3", "0.10000000149011612", "0.1", "2020-01-02 03:04:05.6"),
        (2, "ab", "a  ", "-0.05", "1.0E10", "1.0E20", "1960-01-01 00:00:00"),
        (3, None, None, "100", None, "1.2345678E7", None),
    ]
    judge(hive4, m, t, expected=expected)
    compact(m, t)
    judge(hive4, m, t, expected=expected)


def test_doubles_and_floats_as_text_match_hives_over_many_values(hive4: Referee, tmp_path: Path) -> None:
    """Java's printing of doubles (plain between 10^-3 and 10^7, else scientific), over edge cases and a seeded
    random sample of bit patterns: ours is Java 19+'s (the shortest digits that read back, at least two); Hive
    on an older JVM (the referee's Java 17) sometimes prints other digits of the same value, never fewer.
    Everything else is equal."""
    import random
    import struct

    rng = random.Random(39)
    doubles = [1e-3, 9.999999999999998e-4, 1e7, 9999999.999999998, 5e-324, 2.2250738585072014e-308]
    doubles += [
        1.7976931348623157e308,
        -0.0,
        0.0,
        123456.789,
        -1.5,
        2.0**53,
        1 / 3,
        float("inf"),
        float("-inf"),
    ]
    doubles += [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(300)]
    doubles += [rng.uniform(-1e8, 1e8) for _ in range(100)]
    floats = [struct.unpack("<f", rng.getrandbits(32).to_bytes(4, "little"))[0] for _ in range(len(doubles))]
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(tmp_path)) as m:
        m.execute("CREATE DATABASE d")
        m.execute(
            "CREATE TABLE d.f (id int, x double, f float) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        stream(m, "d.f", {"id": list(range(len(doubles))), "x": doubles, "f": floats})
        m.execute("ALTER TABLE d.f REPLACE COLUMNS (id int, x string, f string)")
        txns = m.snapshot()
        theirs = hive_rows(hive4, m, "d.f", txns)
        ours = our_rows(m, "d.f", txns)
    assert [rid for rid, _ in ours] == [rid for rid, _ in theirs]
    longer = 0
    for (_, mine), (_, hive) in zip(ours, theirs, strict=True):
        for a, b in zip(mine[1:], hive[1:], strict=True):
            if a != b:  # the same value, Hive's digits not the shortest: Java 17's printing
                assert a is not None and b is not None and float(a) == float(b) and len(a) <= len(b), (a, b)
                longer += 1
    assert longer < len(doubles) // 10
