"""StrictJsonWriter: bulk (pyarrow.json) and per-record paths must agree; errors name record and field."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

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
