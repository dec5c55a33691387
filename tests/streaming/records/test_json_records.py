"""StrictJsonWriter: bulk (pyarrow.json) and per-record paths must agree; errors name record and field."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.types import parse_columns
from acidstream.streaming.records.json import JsonParser
from acidstream.streaming.writers import StrictJsonWriter

COLS = parse_columns(
    "ti tinyint, i int, bi bigint, b boolean, f float, d double, dec decimal(6,2), s string, c char(3), "
    "v varchar(2), dt date, ts timestamp, bin binary, a array<int>, st struct<x:int,y:string>"
)
GOOD = [
    b'{"ti":1,"i":2,"bi":3,"b":true,"f":1.5,"d":2,"dec":1.10,"s":"x","c":"ab ","v":"xyz","dt":"2020-01-02",'
    b'"ts":"2020-01-02 03:04:05.5","bin":"aGk=","a":[1,null],"st":{"x":1,"y":"q"},"unknown":{"z":[1]}}',
    b'{"i":null}',
]
EXPECTED = [
    {
        "ti": 1, "i": 2, "bi": 3, "b": True, "f": 1.5, "d": 2.0, "dec": decimal.Decimal("1.10"), "s": "x",
        "c": "ab", "v": "xy", "dt": dt.date(2020, 1, 2), "ts": dt.datetime(2020, 1, 2, 3, 4, 5, 500000),
        "bin": b"hi", "a": [1, None], "st": {"x": 1, "y": "q"},
    },
    dict.fromkeys(["ti", "i", "bi", "b", "f", "d", "dec", "s", "c", "v", "dt", "ts", "bin", "a", "st"]),
]  # fmt: skip


def parser(lenient: bool = False) -> JsonParser:
    p = StrictJsonWriter.builder().with_lenient(lenient).build().bind(COLS)
    assert isinstance(p, JsonParser)
    return p


def test_bulk_path_reads_every_type() -> None:
    p = parser()
    assert p._parse_fast(pa.array(GOOD, pa.large_binary()), 0) is not None
    result = p.parse(GOOD)
    assert result.errors == [] and result.batch.to_pylist() == EXPECTED


def test_per_record_path_gives_the_same_values() -> None:
    p = parser()
    slow = p._parse_slow(pa.array(GOOD, pa.large_binary()), 0)
    assert slow.batch.equals(p.parse(GOOD).batch)


def test_keys_match_case_insensitively() -> None:
    result = parser().parse([b'{"I":5,"ST":{"X":2}}'])
    assert result.errors == []
    row = result.batch.to_pylist()[0]
    assert row["i"] == 5 and row["st"] == {"x": 2, "y": None}


@pytest.mark.parametrize(
    ("record", "field", "message"),
    [
        (b'{"i":"5"}', "i", "integer"),
        (b'{"i":1.5}', "i", "integer"),
        (b'{"ti":300}', "ti", "range"),
        (b'{"b":1}', "b", "true or false"),
        (b'{"s":5}', "s", "string"),
        (b'{"a":{"x":1}}', "a", "array"),
        (b'{"ts":"yesterday"}', "ts", "yesterday"),
        (b"[1,2]", None, "not a JSON object"),
        (b"{oops", None, "not valid JSON"),
        (b"", None, "not valid JSON"),
    ],
)
def test_bad_records_are_reported_with_index_and_field(
    record: bytes, field: str | None, message: str
) -> None:
    result = parser().parse([GOOD[1], record, GOOD[1]], first_index=7)
    assert result.batch.num_rows == 2 and result.good_indexes.tolist() == [0, 2]
    [error] = result.errors
    assert (error.record_index, error.field, error.record) == (8, field, record)
    assert message in str(error)


def test_lenient_nulls_wrong_types_but_still_rejects_non_json() -> None:
    result = parser(lenient=True).parse([b'{"i":"5","s":"ok"}', b"nope"])
    assert result.batch.to_pylist() == [{**EXPECTED[1], "s": "ok"}]
    assert [e.record_index for e in result.errors] == [1]


def test_decimals_are_exact_and_rounded_half_up() -> None:
    result = parser().parse([b'{"dec":0.125}', b'{"dec":"2.5"}', b'{"dec":99999.99}', b'{"dec":1e1}'])
    assert result.batch.column("dec").to_pylist() == [
        decimal.Decimal("0.13"),
        decimal.Decimal("2.50"),
        None,  # precision overflow → NULL, as HiveDecimal
        decimal.Decimal("10.00"),
    ]


def test_maps_use_the_per_record_path() -> None:
    p = StrictJsonWriter.builder().build().bind(parse_columns("m map<int,array<string>>"))
    result = p.parse([b'{"m":{"1":["a"],"2":null}}', b'{"m":{"x":[]}}'])
    assert result.batch.to_pylist() == [{"m": [(1, ["a"]), (2, None)]}]
    assert result.errors[0].field == "m" and "map key" in str(result.errors[0])


def test_dynamic_partition_values() -> None:
    data, keys = parse_columns("id int"), parse_columns("year int, region string")
    p = StrictJsonWriter.builder().build().bind(data, keys, dynamic_partitioning=True)
    fast = p.parse([b'{"id":1,"year":2020,"region":"EU"}', b'{"id":2}'])
    assert fast.batch.to_pylist() == [
        {"id": 1, "year": "2020", "region": "EU"},
        {"id": 2, "year": None, "region": None},
    ]
    slow = p.parse([b'{"id":1,"Year":"05","region":""}', b'{"id":2,"year":"x","region":7}'])
    assert slow.errors == []
    assert slow.batch.to_pylist() == [
        {"id": 1, "year": "5", "region": None},
        {"id": 2, "year": None, "region": "7"},
    ]


def test_two_objects_in_one_record_are_caught() -> None:
    result = parser().parse([b'{"i":1}{"i":2}'])
    assert result.batch.num_rows == 0 and "not valid JSON" in str(result.errors[0])


def test_newlines_inside_a_record() -> None:
    result = parser().parse([b'{"i":\n1,\n"s":"a"}', b'{"i":2}'])
    assert result.errors == [] and result.batch.column("i").to_pylist() == [1, 2]


def test_nested_text_types_use_the_per_record_path() -> None:
    p = (
        StrictJsonWriter.builder()
        .build()
        .bind(parse_columns("a array<date>, s struct<t:timestamp,c:char(2)>"))
    )
    assert isinstance(p, JsonParser) and p.fast_schema is None
    result = p.parse([b'{"a":["2020-01-02",null],"s":{"T":"2020-01-02 03:04:05","c":"xyz"}}', b'{"a":["x"]}'])
    assert result.batch.to_pylist() == [
        {"a": [dt.date(2020, 1, 2), None], "s": {"t": dt.datetime(2020, 1, 2, 3, 4, 5), "c": "xy"}}
    ]
    assert result.errors[0].field == "a"


ROUND_TRIP = parse_columns("i int, bi bigint, b boolean, d double, dec decimal(10,2), s string, a array<int>")
json_rows = st.fixed_dictionaries(
    {
        "i": st.none() | st.integers(-(2**31), 2**31 - 1),
        "bi": st.none() | st.integers(-(2**63), 2**63 - 1),
        "b": st.none() | st.booleans(),
        "d": st.none() | st.floats(allow_nan=False, allow_infinity=False),
        "dec": st.none() | st.decimals(min_value=-(10**7), max_value=10**7, places=2),
        "s": st.none() | st.text(max_size=6),
        "a": st.none() | st.lists(st.none() | st.integers(-(2**31), 2**31 - 1), max_size=3),
    }
)


def to_json(row: dict[str, object]) -> bytes:
    """json.dumps, but the decimal written as a JSON number (json cannot emit Decimal)."""
    rest = json.dumps({k: v for k, v in row.items() if k != "dec"})
    dec = "null" if row["dec"] is None else str(row["dec"])
    return f'{rest[:-1]}, "dec": {dec}}}'.encode()


@settings(max_examples=60, deadline=None)
@given(st.lists(json_rows, min_size=1, max_size=15))
def test_bulk_and_per_record_paths_agree_on_random_rows(rows: list[dict[str, object]]) -> None:
    p = StrictJsonWriter.builder().build().bind(ROUND_TRIP)
    assert isinstance(p, JsonParser)
    records = pa.array([to_json(r) for r in rows], pa.large_binary())
    fast = p._parse_fast(records, 0)
    slow = p._parse_slow(records, 0)
    assert fast is not None and fast.errors == [] and slow.errors == []
    assert fast.batch.equals(slow.batch)
    assert slow.batch.to_pylist() == rows


def test_records_larger_than_a_read_block_stay_on_the_bulk_path() -> None:
    p = parser()
    big = b'{"s":"' + b"x" * (3 << 20) + b'","i":1}'
    records = pa.array([big, GOOD[1]], pa.large_binary())
    fast = p._parse_fast(records, 0)
    assert fast is not None and fast.batch.column("i").to_pylist() == [1, None]


def test_escaped_lone_surrogates_are_not_text() -> None:
    """``"\\ud800"`` is valid JSON but no UTF-8 string: strict names the field, lenient reads NULL."""
    cols = parse_columns("i int, s string, a array<string>")
    records = [
        b'{"i": 1, "s": "ok \\ud83d\\ude00"}',
        b'{"i": 2, "s": "x\\ud800"}',
        b'{"i": 3, "a": ["\\udfff"]}',
    ]
    strict = StrictJsonWriter.builder().build().bind(cols).parse(records)
    assert strict.batch.to_pylist() == [{"i": 1, "s": "ok \U0001f600", "a": None}]
    assert [(e.record_index, e.field) for e in strict.errors] == [(1, "s"), (2, "a")]
    lenient = StrictJsonWriter.builder().with_lenient(True).build().bind(cols).parse(records)
    assert [r["s"] for r in lenient.batch.to_pylist()] == ["ok \U0001f600", None, None]


def test_utf8_encoded_surrogates_are_invalid_bytes() -> None:
    """``json.loads`` of bytes lets them through (surrogatepass); UTF-8 forbids them."""
    cols = parse_columns("i int, s string")
    result = (
        StrictJsonWriter.builder().build().bind(cols).parse([b'{"i": 1, "s": "\xed\xa0\x80"}', b'{"i": 2}'])
    )
    assert [(e.record_index, e.field) for e in result.errors] == [(0, "s")]
    assert result.batch.to_pylist() == [{"i": 2, "s": None}]
