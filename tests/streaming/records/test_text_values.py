"""Hive text forms → Arrow values, one type at a time (LazySimpleSerDe semantics)."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.types import parse_type
from acidstream.streaming.records import text_values
from acidstream.streaming.records.text_values import (
    TextFormat,
    canonical_partition_values,
    convert,
    decode_binary,
    java_double_str,
    split_fields,
)

BAD = object()  # marks a value Hive turns into NULL because it does not parse


def run(type_text: str, texts: list[str | None]) -> list[object]:
    conv = convert(pa.array(texts, pa.large_string()), parse_type(type_text), TextFormat())
    values = conv.values.to_pylist()
    return [BAD if bad else v for v, bad in zip(values, conv.bad, strict=True)]


@pytest.mark.parametrize(
    ("type_text", "text", "expected"),
    [
        ("int", "42", 42),
        ("int", "+42", 42),
        ("int", "-0042", -42),
        ("int", "2147483647", 2147483647),
        ("int", "2147483648", BAD),
        ("int", "-2147483648", -2147483648),
        ("int", " 1", BAD),
        ("int", "1 ", BAD),
        ("int", "1.0", 1),
        ("int", "12.9", 12),
        ("int", "-1.9", -1),
        ("int", "+.5", 0),
        ("int", "7.", 7),
        ("int", "1.x", BAD),
        ("int", "1.2.3", BAD),
        ("int", ".", BAD),
        ("int", "2147483647.99", 2147483647),
        ("int", "0x1F", BAD),
        ("int", "0X1F", BAD),
        ("int", "+", BAD),
        ("int", "", None),
        ("int", "\\N", None),
        ("tinyint", "127", 127),
        ("tinyint", "128", BAD),
        ("smallint", "-32769", BAD),
        ("bigint", "9223372036854775807", 9223372036854775807),
        ("bigint", "00000000000000000000009223372036854775807", 9223372036854775807),
        ("bigint", "9223372036854775808", BAD),
        ("bigint", "-9223372036854775808", -9223372036854775808),
        ("boolean", "true", True),
        ("boolean", "FaLsE", False),
        ("boolean", "1", BAD),
        ("boolean", "yes", BAD),
        ("double", "1.5", 1.5),
        ("double", " -2e3 ", -2000.0),
        ("double", "1.5d", 1.5),
        ("double", ".5", 0.5),
        ("double", "Infinity", float("inf")),
        ("double", "-Infinity", float("-inf")),
        ("double", "1e400", float("inf")),
        ("double", "inf", BAD),
        ("double", "1,5", BAD),
        ("float", "0.25f", 0.25),
        ("decimal(5,2)", "1.235", decimal.Decimal("1.24")),
        ("decimal(5,2)", "-1.235", decimal.Decimal("-1.24")),
        ("decimal(5,2)", "999.994", decimal.Decimal("999.99")),
        ("decimal(5,2)", "999.995", None),  # rounds to 1000.00: precision overflow → NULL, as HiveDecimal
        ("decimal(5,2)", " 12 ", decimal.Decimal("12.00")),
        ("decimal(5,2)", "1e2", decimal.Decimal("100.00")),
        ("decimal(5,2)", "abc", BAD),
        ("string", "", ""),
        ("string", "\\N", None),
        ("varchar(3)", "héllo", "hél"),
        ("char(4)", "ab   ", "ab"),
        ("char(2)", "abc", "ab"),
        ("date", "2020-02-29", dt.date(2020, 2, 29)),
        ("date", "2020-2-3", dt.date(2020, 2, 3)),
        ("date", " 2020-02-03 10:00:00", dt.date(2020, 2, 3)),
        ("date", "2021-02-29", BAD),
        ("date", "2020-02-0300", BAD),
        ("date", "20200203", BAD),
        ("timestamp", "2020-01-02 03:04:05", dt.datetime(2020, 1, 2, 3, 4, 5)),
        ("timestamp", "2020-01-02 03:04:05.5", dt.datetime(2020, 1, 2, 3, 4, 5, 500000)),
        ("timestamp", "2020-01-02", dt.datetime(2020, 1, 2)),
        ("timestamp", "2020-01-02T03:04", dt.datetime(2020, 1, 2, 3, 4)),
        ("timestamp", "2020-1-2 3:4:5", dt.datetime(2020, 1, 2, 3, 4, 5)),
        ("timestamp", "2020-01-02 03:04:05 UTC", dt.datetime(2020, 1, 2, 3, 4, 5)),
        ("timestamp", "2020-01-02T03:04:05.25Z", dt.datetime(2020, 1, 2, 3, 4, 5, 250000)),
        ("timestamp", "2020-01-02 03:04:05+05:30", dt.datetime(2020, 1, 2, 3, 4, 5)),
        ("timestamp", "2020-01-02 03:04:05 Europe/Paris", dt.datetime(2020, 1, 2, 3, 4, 5)),
        ("timestamp", "NULL", None),
        ("timestamp", "2020-01-02 24:00:00", BAD),
        ("timestamp", "2020-01-02 03:04", BAD),
        ("timestamp", "3000-01-01 00:00:00", BAD),  # beyond timestamp('ns')
        ("binary", "aGVsbG8=", b"hello"),
        ("binary", "not base64!", b"not base64!"),
    ],
)
def test_primitive_text_forms(type_text: str, text: str, expected: object) -> None:
    assert run(type_text, [text]) == [expected]


def test_timestamp_date_fallback_is_stored_by_lenient_and_rejected_by_strict() -> None:
    conv = convert(
        pa.array(["2020-01-02 03:04", "2020-01-02 garbage", "nope"]), parse_type("timestamp"), TextFormat()
    )
    assert conv.values.to_pylist() == [dt.datetime(2020, 1, 2), dt.datetime(2020, 1, 2), None]
    assert conv.bad.tolist() == [True, True, True]


def test_nanosecond_timestamp_is_exact() -> None:
    conv = convert(pa.array(["1969-12-31 23:59:59.000000001"]), parse_type("timestamp"), TextFormat())
    assert conv.values.cast(pa.int64()).to_pylist() == [-999_999_999]


def test_binary_decoding_falls_back_to_raw_bytes_when_decoding_yields_nothing() -> None:
    assert decode_binary(b"=") == b"="
    assert decode_binary(b"aGVs bG8") == b"hello"


def test_nested_levels_use_the_next_separators() -> None:
    fmt = TextFormat()
    text = pa.array(["a\x031\x042\x02b\x03\\N", "", None])
    conv = convert(text, parse_type("map<string,array<int>>"), fmt)
    assert conv.values.to_pylist() == [[("a", [1, 2]), ("b", None)], [], None]
    assert not conv.bad.any()


def test_struct_with_extra_fields_is_bad_and_missing_fields_are_null() -> None:
    conv = convert(pa.array(["1\x02x\x02extra", "2"]), parse_type("struct<a:int,b:string>"), TextFormat())
    assert conv.bad.tolist() == [True, False]
    assert conv.values.to_pylist()[1] == {"a": 2, "b": None}


def test_bad_element_marks_its_collection_bad() -> None:
    conv = convert(pa.array(["1\x02x", "3"]), parse_type("array<int>"), TextFormat())
    assert conv.bad.tolist() == [True, False]


def test_map_keeps_the_first_of_duplicate_keys_and_drops_null_keys_like_lazymap() -> None:
    conv = convert(
        pa.array(["a\x031\x02\\N\x032\x02a\x033\x02b\x034"]), parse_type("map<string,int>"), TextFormat()
    )
    assert conv.values.to_pylist() == [[("a", 1), ("b", 4)]]
    assert not conv.bad.any()


def test_unparsable_map_key_drops_entry_and_marks_value_bad() -> None:
    conv = convert(pa.array(["x\x031\x022\x032"]), parse_type("map<int,int>"), TextFormat())
    assert conv.values.to_pylist() == [[(2, 2)]]
    assert conv.bad.tolist() == [True]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1.0, "1.0"), (1e7, "1.0E7"), (1.5e-5, "1.5E-5"), (123.25, "123.25"), (0.001, "0.001"), (-0.0, "-0.0")],
)
def test_java_double_str(value: float, expected: str) -> None:
    assert java_double_str(value) == expected


@pytest.mark.parametrize(
    ("type_text", "texts", "expected"),
    [
        ("int", ["05", "x", "", None], ["5", None, None, None]),
        ("string", ["Asia", ""], ["Asia", None]),
        ("boolean", ["TRUE"], ["true"]),
        ("decimal(6,2)", ["1.50"], ["1.5"]),
        ("date", ["2020-1-2"], ["2020-01-02"]),
        ("timestamp", ["2020-01-02 03:04:05.120"], ["2020-01-02 03:04:05.12"]),
        ("timestamp", ["2020-01-02"], ["2020-01-02 00:00:00"]),
        ("timestamp", ["1900-01-02 00:00:00.000000001"], ["1900-01-02 00:00:00.000000001"]),
        ("date", ["999-1-2"], ["0999-01-02"]),
        ("double", ["1e7"], ["1.0E7"]),
    ],
)
def test_partition_values_print_the_hive_way(
    type_text: str, texts: list[str | None], expected: list[str | None]
) -> None:
    t = parse_type(type_text)
    typed = convert(pa.array(texts, pa.large_string()), t, TextFormat()).values
    assert canonical_partition_values(typed, t).to_pylist() == expected


def test_decimal_bulk_and_rounding_paths_agree() -> None:
    texts = ["12", " 1.5", "1e2", "+1", ".5", "-0.25"]
    exact = run("decimal(7,2)", texts)
    rounded = run(
        "decimal(7,2)", [*texts, "0.125"]
    )  # one value needing rounding → per-value HiveDecimal path
    assert rounded[:-1] == exact
    assert exact == [decimal.Decimal(v) for v in ("12.00", "1.50", "100.00", "1.00", "0.50", "-0.25")]
    assert rounded[-1] == decimal.Decimal("0.13")


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(
        st.one_of(
            st.none(),
            st.sampled_from(
                [
                    "\\N",
                    "",
                    "12",
                    "-7",
                    "0x1F",
                    "0X2",
                    "x",
                    "N",
                    "true",
                    "a,b",
                    "128",
                    "-32769",
                    "2147483648",
                    "007",
                ]
            ),
        ),
        max_size=12,
    ),
    cut=st.integers(0, 4),
    type_text=st.sampled_from(
        ["tinyint", "smallint", "int", "bigint", "string", "boolean", "double", "array<int>"]
    ),
    null_sequence=st.sampled_from(["\\N", "", "N", None]),
)
def test_buffer_scans_only_skip_checks_that_would_change_nothing(
    texts: list[str | None],
    cut: int,
    type_text: str,
    null_sequence: str | None,
) -> None:
    """convert() with its shortcuts (raw-buffer scans, the direct integer cast) equals convert() on the exact
    path, on slices too."""
    column = pa.array(texts, pa.large_string()).slice(min(cut, len(texts)))
    fmt = TextFormat(null_sequence=null_sequence)
    fast = convert(column, parse_type(type_text), fmt)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(text_values, "may_contain", lambda *_: True)
        m.setattr(text_values, "_may_be_empty", lambda *_: True)
        exact = convert(column, parse_type(type_text), fmt)
    assert fast.values.equals(exact.values)
    assert fast.bad.tolist() == exact.bad.tolist()


SPLITS = [
    pytest.param(True, id="c"),
    pytest.param(False, id="numpy"),
]


@contextmanager
def split_in(native: bool) -> Iterator[None]:
    """The uniform split in C (skipped if the extension is not built) or in numpy (as without it)."""
    if native and text_values.native_split_uniform is None:
        pytest.skip("the C extension is not built")
    with pytest.MonkeyPatch.context() as m:
        if not native:
            m.setattr(text_values, "native_split_uniform", None)
        yield


def python_split(
    texts: list[str | None], separator: str, count: int
) -> tuple[list[list[str | None]], list[int]]:
    parts = [t.split(separator) if t is not None else [] for t in texts]
    fields = [[p[i] if i < len(p) else None for p in parts] for i in range(count)]
    return fields, [len(p) for p in parts]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.text(alphabet="ab,\x01é¦", max_size=8)), max_size=12),
    st.sampled_from([",", "\x01", "¦"]),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=0, max_value=3),
)
@pytest.mark.parametrize("native", SPLITS)
def test_split_fields_is_str_split(
    native: bool, texts: list[str | None], separator: str, count: int, skip: int
) -> None:
    """Uniform records take the byte-level path (one-byte separator, no nulls, ``count`` fields each), the rest
    split_pattern; both must agree with str.split, on sliced arrays too."""
    array = pa.array(["pad"] * skip + texts, pa.large_string()).slice(skip)
    with split_in(native):
        fields, counts = split_fields(array, separator, count)
    expected_fields, expected_counts = python_split(texts, separator, count)
    assert [f.to_pylist() for f in fields] == expected_fields
    assert counts.tolist() == expected_counts


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=1, max_value=4).flatmap(
        lambda count: st.tuples(
            st.just(count),
            st.lists(
                st.lists(st.text(alphabet="ab\x02é", max_size=5), min_size=count, max_size=count), min_size=1
            ),
        )
    ),
    st.integers(min_value=0, max_value=3),
)
@pytest.mark.parametrize("native", SPLITS)
def test_split_fields_of_uniform_records(
    native: bool, records: tuple[int, list[list[str]]], skip: int
) -> None:
    count, rows = records
    texts = ["\x01".join(r) for r in rows]
    array = pa.array(["pad"] * skip + texts, pa.large_string()).slice(skip)
    with split_in(native):
        fields, counts = split_fields(array, "\x01", count)
    assert [f.to_pylist() for f in fields] == [list(column) for column in zip(*rows, strict=True)]
    assert counts.tolist() == [count] * len(rows)


@pytest.mark.parametrize("native", SPLITS)
def test_split_fields_uniform_records_keep_empty_fields(native: bool) -> None:
    array = pa.array(["1,", ",2", ",", "3,4"], pa.large_string())
    with split_in(native):
        fields, counts = split_fields(array, ",", 2)
    assert [f.to_pylist() for f in fields] == [["1", "", "", "3"], ["", "2", "", "4"]]
    assert counts.tolist() == [2, 2, 2, 2]


def test_native_split_refuses_offsets_that_leave_the_data() -> None:
    if text_values.native_split_uniform is None:
        pytest.skip("the C extension is not built")
    split = text_values.native_split_uniform
    with pytest.raises(ValueError, match="offsets"):
        split(b"a,b", np.array([0, 9], dtype=np.int64), ord(","), 2)
    with pytest.raises(ValueError, match="offsets"):
        split(b"a,b", np.array([2, 1], dtype=np.int64), ord(","), 2)
    with pytest.raises(ValueError, match="count"):
        split(b"a,b", np.array([0, 3], dtype=np.int64), ord(","), 0)
    assert split(b"", np.array([0], dtype=np.int64), ord(","), 2) == [(bytes(8), b""), (bytes(8), b"")]
