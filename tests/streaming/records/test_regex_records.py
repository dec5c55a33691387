"""StrictRegexWriter: whole-record RE2 match, groups to columns, unsupported Java syntax rejected at build."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from acidstream.acid.types import parse_columns
from acidstream.streaming.records.regex import name_groups
from acidstream.streaming.writers import StrictRegexWriter

COLS = parse_columns("id int, msg string, day date")


def writer(regex: str, lenient: bool = False) -> StrictRegexWriter:
    return StrictRegexWriter.builder().with_regex(regex).with_lenient(lenient).build()


def test_groups_become_columns_with_text_rules() -> None:
    result = writer(r"(\d+) \[([^\]]*)\] (\S+)").bind(COLS).parse([b"1 [a b] 2020-01-02", b"2 [] \\N"])
    assert result.errors == []
    assert result.batch.to_pylist() == [
        {"id": 1, "msg": "a b", "day": dt.date(2020, 1, 2)},
        {"id": 2, "msg": "", "day": None},
    ]


def test_whole_record_must_match() -> None:
    result = writer(r"(\d+),(\w+),(.*)").bind(COLS).parse([b"1,a,", b"x1,a,", b"1,a,b\nc"], first_index=3)
    assert result.good_indexes.tolist() == [0]
    assert [(e.record_index, e.field) for e in result.errors] == [(4, None), (5, None)]
    assert "does not match" in str(result.errors[0])


def test_bad_group_value_names_the_column() -> None:
    result = writer(r"(\w+),(\w+),(.*)").bind(COLS).parse([b"x,a,2020-01-01"])
    assert result.errors[0].field == "id"


def test_lenient_gives_hives_null_row() -> None:
    result = writer(r"(\d+),(\w+),(.*)", lenient=True).bind(COLS).parse([b"nope", b"1,a,bad"])
    assert result.errors == []
    assert result.batch.to_pylist() == [
        {"id": None, "msg": None, "day": None},
        {"id": 1, "msg": "a", "day": None},
    ]


def test_dynamic_partition_groups() -> None:
    parser = writer(r"(\d+),(\w*),(\d*),(\w*)").bind(
        parse_columns("id int, msg string"), parse_columns("year int, c string"), dynamic_partitioning=True
    )
    assert parser.parse([b"1,a,007,FR", b"2,b,,"]).batch.to_pylist() == [
        {"id": 1, "msg": "a", "year": "7", "c": "FR"},
        {"id": 2, "msg": "b", "year": None, "c": None},
    ]


@pytest.mark.parametrize("regex", [r"(a)\1", r"a(?=b)", r"(?<=a)b", r"a++"])
def test_unsupported_java_constructs_fail_at_build(regex: str) -> None:
    with pytest.raises(ValueError, match="RE2"):
        writer(regex)


def test_group_count_must_match_columns() -> None:
    with pytest.raises(ValueError, match="2 capturing groups"):
        writer(r"(\d+),(.*)").bind(COLS)


def test_complex_columns_are_rejected() -> None:
    with pytest.raises(ValueError, match="primitive"):
        writer(r"(.*)").bind(parse_columns("a array<int>"))


def test_missing_regex_is_rejected() -> None:
    with pytest.raises(ValueError, match="needs a regex"):
        StrictRegexWriter.builder().build()


@pytest.mark.parametrize(
    ("regex", "named", "count"),
    [
        (r"(a)(?:b)(c)", "(?P<g1>a)(?:b)(?P<g2>c)", 2),
        (r"\((x)\)", r"\((?P<g1>x)\)", 1),
        (r"[(](y)[)]", "[(](?P<g1>y)[)]", 1),
        (r"[]()](z)", "[]()](?P<g1>z)", 1),
    ],
)
def test_name_groups_skips_escapes_classes_and_non_capturing(regex: str, named: str, count: int) -> None:
    assert name_groups(regex) == (named, count)


def test_every_primitive_type() -> None:
    cols = parse_columns(
        "ti tinyint, si smallint, i int, bi bigint, b boolean, f float, d double, dec decimal(4,1), s string, "
        "c char(2), v varchar(2), dt date, ts timestamp, bin binary"
    )
    regex = r"\|".join(["([^|]*)"] * len(cols))
    parser = writer(regex).bind(cols)
    result = parser.parse(
        [b"1|2|3|4|TRUE|0.5|1e1|1.25|s|abc|xyz|2020-01-02|2020-01-02 03:04:05|aGk=", b"|" * 13]
    )
    assert result.errors == []
    assert result.batch.to_pylist() == [
        {
            "ti": 1, "si": 2, "i": 3, "bi": 4, "b": True, "f": 0.5, "d": 10.0, "dec": decimal.Decimal("1.3"),
            "s": "s", "c": "ab", "v": "xy", "dt": dt.date(2020, 1, 2), "ts": dt.datetime(2020, 1, 2, 3, 4, 5),
            "bin": b"hi",
        },
        {
            "ti": None, "si": None, "i": None, "bi": None, "b": None, "f": None, "d": None, "dec": None,
            "s": "", "c": "", "v": "", "dt": None, "ts": None, "bin": b"",
        },
    ]  # fmt: skip
