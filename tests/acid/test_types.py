from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.types import HiveType, parse_columns, parse_type
from acidstream.errors import InvalidObjectException


@pytest.mark.parametrize(
    ("text", "canonical", "arrow"),
    [
        ("INT", "int", pa.int32()),
        ("integer", "int", pa.int32()),
        ("double precision", "double", pa.float64()),
        ("decimal", "decimal(10,0)", pa.decimal128(10, 0)),
        ("DECIMAL(38, 18)", "decimal(38,18)", pa.decimal128(38, 18)),
        ("numeric(5)", "decimal(5,0)", pa.decimal128(5, 0)),
        ("varchar(20)", "varchar(20)", pa.string()),
        ("char(3)", "char(3)", pa.string()),
        ("timestamp", "timestamp", pa.timestamp("ns")),
        (
            "array<map<string,array<int>>>",
            "array<map<string,array<int>>>",
            pa.list_(pa.map_(pa.string(), pa.list_(pa.int32()))),
        ),
        (
            "struct<A:int, b:varchar(3)>",
            "struct<a:int,b:varchar(3)>",
            pa.struct([("a", pa.int32()), ("b", pa.string())]),
        ),
    ],
)
def test_parse_canonical_and_arrow(text: str, canonical: str, arrow: pa.DataType) -> None:
    t = parse_type(text)
    assert str(t) == canonical
    assert t.to_arrow() == arrow
    assert parse_type(canonical) == t


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("integr", "unknown type 'integr'"),
        ("decimal(40,2)", "invalid decimal(40,2)"),
        ("decimal(5,6)", "invalid decimal(5,6)"),
        ("varchar(0)", "invalid varchar length"),
        ("map<array<int>,int>", "map keys must be primitive"),
        ("array<int", "expected '>'"),
        ("struct<a:int,a:int>", "duplicate struct field 'a'"),
        ("int int", "unexpected trailing input"),
    ],
)
def test_bad_types_are_typed_errors(text: str, needle: str) -> None:
    with pytest.raises(InvalidObjectException, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse_type(text)


def test_parse_columns() -> None:
    cols = parse_columns("ID int, Msg string, amount decimal(10,2)")
    assert [str(c) for c in cols] == ["id int", "msg string", "amount decimal(10,2)"]
    with pytest.raises(InvalidObjectException, match="duplicate column 'id'"):
        parse_columns("id int, ID bigint")


_primitive = st.sampled_from(
    [
        "tinyint",
        "smallint",
        "int",
        "bigint",
        "boolean",
        "float",
        "double",
        "string",
        "date",
        "timestamp",
        "binary",
        "decimal(12,3)",
        "char(5)",
        "varchar(9)",
    ]
).map(parse_type)


def _complex(children: st.SearchStrategy[HiveType]) -> st.SearchStrategy[HiveType]:
    names = st.lists(
        st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True), min_size=1, max_size=3, unique=True
    )
    return st.one_of(
        children.map(lambda c: HiveType("array", children=(c,))),
        st.tuples(_primitive, children).map(lambda kv: HiveType("map", children=kv)),
        names.flatmap(
            lambda ns: st.lists(children, min_size=len(ns), max_size=len(ns)).map(
                lambda ts: HiveType("struct", children=tuple(ts), field_names=tuple(ns))
            )
        ),
    )


@given(st.recursive(_primitive, _complex, max_leaves=6))
def test_type_string_round_trip(t: HiveType) -> None:
    assert parse_type(str(t)) == t
    assert isinstance(t.to_arrow(), pa.DataType)
