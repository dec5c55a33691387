"""StrictDelimitedInputWriter: whole records through the bulk parser, strict and lenient."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.types import Column, parse_columns
from acidstream.errors import SerializationError
from acidstream.streaming.writers import StrictDelimitedInputWriter

ALL = parse_columns(
    "ti tinyint, si smallint, i int, bi bigint, b boolean, f float, d double, dec decimal(10,3), s string, "
    "c char(5), v varchar(4), dt date, ts timestamp, bin binary, a array<string>, m map<string,int>, "
    "st struct<x:int,y:array<int>>"
)


def comma(lenient: bool = False) -> StrictDelimitedInputWriter:
    return StrictDelimitedInputWriter.builder().with_field_delimiter(",").with_lenient(lenient).build()


def test_every_hive_type_with_default_separators() -> None:
    fields = [
        "-1", "300", "70000", "-5000000000", "true", "0.5", "-1.25e2", "12.3456", "hé", "ab", "abcdef",
        "2024-02-29", "2024-02-29 12:00:00.000001", "AAEC", "x\x02\\N\x02", "k\x031\x02j\x03\\N",
        "7\x028\x039",  # struct fields on level 1 (\x02), its array items on level 2
    ]  # fmt: skip
    parser = StrictDelimitedInputWriter.builder().build().bind(ALL)
    result = parser.parse(["\x01".join(fields).encode()])
    assert result.errors == []
    assert result.batch.schema == parser.output_schema
    assert result.batch.to_pylist() == [
        {
            "ti": -1, "si": 300, "i": 70000, "bi": -5000000000, "b": True, "f": 0.5, "d": -125.0,
            "dec": decimal.Decimal("12.346"), "s": "hé", "c": "ab", "v": "abcd", "dt": dt.date(2024, 2, 29),
            "ts": dt.datetime(2024, 2, 29, 12, 0, 0, 1), "bin": b"\x00\x01\x02", "a": ["x", None, ""],
            "m": [("k", 1), ("j", None)], "st": {"x": 7, "y": [8, 9]},
        }
    ]  # fmt: skip


def test_null_sequence_and_empty_fields() -> None:
    parser = StrictDelimitedInputWriter.builder().build().bind(ALL)
    row = parser.parse([b"\x01".join([b"\\N"] * len(ALL))]).batch.to_pylist()[0]
    assert set(row.values()) == {None}
    empty = parser.parse([b"\x01" * (len(ALL) - 1)]).batch.to_pylist()[0]
    assert empty["s"] == "" and empty["c"] == "" and empty["bin"] == b""
    assert empty["a"] == [] and empty["m"] == [] and empty["st"] == {"x": None, "y": None}
    assert empty["i"] is None and empty["dt"] is None and empty["dec"] is None


def test_custom_null_sequence() -> None:
    parser = comma().__class__.builder().with_field_delimiter(",").with_null_sequence("NULL").build()
    result = parser.bind(parse_columns("i int, s string")).parse([b"NULL,NULL", b"1,\\N"])
    assert result.batch.to_pylist() == [{"i": None, "s": None}, {"i": 1, "s": "\\N"}]


def test_missing_trailing_fields_are_null() -> None:
    result = comma().bind(parse_columns("i int, s string, d double")).parse([b"1", b"2,x"])
    assert result.errors == []
    assert result.batch.to_pylist() == [{"i": 1, "s": None, "d": None}, {"i": 2, "s": "x", "d": None}]


def test_strict_reports_bad_value_with_index_field_and_record() -> None:
    parser = comma().bind(parse_columns("i int, s string, d date"))
    result = parser.parse([b"1,a,2020-01-01", b"x,b,2020-01-01", b"3,c,2020-13-01", b"4,d"], first_index=10)
    assert result.batch.column("i").to_pylist() == [1, 4]
    assert result.good_indexes.tolist() == [0, 3]
    assert [(e.record_index, e.field, e.record) for e in result.errors] == [
        (11, "i", b"x,b,2020-01-01"),
        (12, "d", b"3,c,2020-13-01"),
    ]
    assert all(isinstance(e, SerializationError) for e in result.errors)
    assert "'x'" in str(result.errors[0]) and "int" in str(result.errors[0])


def test_strict_reports_extra_fields_lenient_ignores_them() -> None:
    cols = parse_columns("i int, s string")
    strict = comma().bind(cols).parse([b"1,a,extra"])
    assert strict.batch.num_rows == 0
    assert strict.errors[0].field is None and "3 fields" in str(strict.errors[0])
    lenient = comma(lenient=True).bind(cols).parse([b"1,a,extra", b"x,b"])
    assert lenient.errors == []
    assert lenient.batch.to_pylist() == [{"i": 1, "s": "a"}, {"i": None, "s": "b"}]


def test_error_message_truncates_long_values() -> None:
    result = comma().bind(parse_columns("i int")).parse([b"9" * 500])
    assert len(str(result.errors[0])) < 200


def test_invalid_utf8_is_a_bad_record_unless_lenient() -> None:
    cols = parse_columns("i int, s string")
    strict = comma().bind(cols).parse([b"1,ok", b"2,\xff"])
    assert strict.good_indexes.tolist() == [0]
    assert "UTF-8" in str(strict.errors[0])
    lenient = comma(lenient=True).bind(cols).parse([b"2,\xff"])
    assert lenient.batch.to_pylist() == [{"i": 2, "s": "\ufffd"}]


def test_dynamic_partition_values_are_the_trailing_fields_in_canonical_form() -> None:
    data = parse_columns("id int, msg string")
    keys = parse_columns("year int, country string")
    parser = comma().bind(data, keys, dynamic_partitioning=True)
    assert parser.output_schema.names == ["id", "msg", "year", "country"]
    result = parser.parse([b"1,a,05,India", b"2,b,,", b"3,c", b"4,d,x,\\N", b"5,e,2020,FR,extra"])
    assert [r[2:] for r in map(lambda d: tuple(d.values()), result.batch.to_pylist())] == [
        ("5", "India"),
        (None, None),
        (None, None),
        (None, None),
    ]
    assert [(e.record_index, e.field) for e in result.errors] == [(4, None)]
    # partition values come dictionary-encoded (the router groups by the codes); write_batch takes strings
    assert result.batch.schema == parser.parsed_schema
    assert parser.parsed_schema.field("year").type == pa.dictionary(pa.int32(), pa.string())
    assert parser.output_schema.field("year").type == pa.string()


def test_partition_keys_ignored_without_dynamic_partitioning() -> None:
    parser = comma().bind(parse_columns("id int"), parse_columns("year int"))
    assert parser.output_schema.names == ["id"]


@pytest.mark.parametrize("delimiter", [",", b",", 44])
def test_delimiters_as_str_bytes_or_int(delimiter: str | bytes | int) -> None:
    writer = StrictDelimitedInputWriter.builder().with_field_delimiter(delimiter).build()
    assert writer.field_delimiter == ","
    assert writer.bind(parse_columns("a int, b int")).parse([b"1,2"]).batch.to_pylist() == [{"a": 1, "b": 2}]


@pytest.mark.parametrize("delimiter", ["||", b"ab", "é", ""])
def test_multi_character_or_non_ascii_delimiters_are_rejected(delimiter: str | bytes) -> None:
    with pytest.raises(ValueError, match="single ASCII character"):
        StrictDelimitedInputWriter.builder().with_field_delimiter(delimiter)


def test_clashing_delimiters_are_rejected_at_build() -> None:
    with pytest.raises(ValueError, match="differ"):
        StrictDelimitedInputWriter.builder().with_field_delimiter(",").with_collection_delimiter(",").build()


def test_custom_collection_and_map_key_delimiters() -> None:
    writer = (
        StrictDelimitedInputWriter.builder()
        .with_field_delimiter("\t")
        .with_collection_delimiter("|")
        .with_map_key_delimiter(":")
        .build()
    )
    parser = writer.bind(parse_columns("a array<int>, m map<string,string>"))
    assert parser.parse([b"1|2\tk:v|k2:v:w"]).batch.to_pylist() == [
        {"a": [1, 2], "m": [("k", "v"), ("k2", "v:w")]}
    ]


def test_too_deep_nesting_is_rejected_at_bind() -> None:
    deep = "int"
    for _ in range(8):
        deep = f"array<{deep}>"
    with pytest.raises(ValueError, match="nest"):
        StrictDelimitedInputWriter.builder().build().bind([Column("x", parse_columns(f"x {deep}")[0].type)])


def test_parse_and_parse_arrow_agree_and_empty_input() -> None:
    import pyarrow as pa

    parser = comma().bind(parse_columns("i int, s string"))
    records = [b"1,a", b"y,b"]
    one = parser.parse(records)
    two = parser.parse_arrow(pa.array(records, pa.binary()))
    assert one.batch.equals(two.batch) and [str(e) for e in one.errors] == [str(e) for e in two.errors]
    empty = parser.parse([])
    assert empty.batch.num_rows == 0 and empty.batch.schema == parser.output_schema


# --- round trip: random rows → Hive text → parse → the same values ---------------------------------------

PRIMITIVES = parse_columns(
    "ti tinyint, si smallint, i int, bi bigint, b boolean, d double, dec decimal(12,4), s string, "
    "dt date, ts timestamp"
)
TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02\x03\r\n"), max_size=8
)


def hive_text(value: object) -> str:
    """How Hive's LazySimpleSerDe writes a value (the formatter the parser must invert)."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S") + (
            f".{value.microsecond:06d}" if value.microsecond else ""
        )
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float):
        return repr(value).replace("inf", "Infinity").replace("nan", "NaN")
    return str(value)


rows = st.tuples(
    st.none() | st.integers(-(2**7), 2**7 - 1),
    st.none() | st.integers(-(2**15), 2**15 - 1),
    st.none() | st.integers(-(2**31), 2**31 - 1),
    st.none() | st.integers(-(2**63), 2**63 - 1),
    st.none() | st.booleans(),
    st.none() | st.floats(allow_nan=False),
    st.none() | st.decimals(min_value=-(10**8) + 1, max_value=10**8 - 1, places=4),
    st.none() | TEXT.filter(lambda s: s != "\\N"),
    st.none() | st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)),
    st.none() | st.datetimes(dt.datetime(1678, 1, 1), dt.datetime(2261, 12, 31)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(rows, min_size=1, max_size=20))
def test_round_trip_of_random_primitive_rows(values: list[tuple[object, ...]]) -> None:
    records = ["\x01".join(hive_text(v) for v in row).encode() for row in values]
    result = StrictDelimitedInputWriter.builder().build().bind(PRIMITIVES).parse(records)
    assert result.errors == []
    parsed = [tuple(r.values()) for r in result.batch.to_pylist()]
    expected = [tuple(None if v == "" and i != 7 else v for i, v in enumerate(row)) for row in values]
    assert parsed == expected
