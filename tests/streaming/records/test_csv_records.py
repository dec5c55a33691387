"""StrictCsvWriter: RFC 4180 CSV as spreadsheets write it (quoted fields), split from a stream and parsed."""

from __future__ import annotations

import csv
import decimal
import io
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.types import parse_columns
from acidstream.streaming.records.streams import split_quoted_records
from acidstream.streaming.writers import DelimitedBuilder, StrictCsvWriter, StrictDelimitedInputWriter

TEXT = parse_columns("a string, b string, c string")
WRITER = StrictCsvWriter.builder().build()


def records(data: bytes, chunk_size: int = 1 << 20, delimiter: str = ",") -> list[bytes]:
    chunks = split_quoted_records(io.BytesIO(data), r"[\r\n]", delimiter, chunk_size)
    return [r for chunk in chunks for r in chunk.to_pylist()]


def spreadsheet(rows: list[list[str]], quoting: int = csv.QUOTE_MINIMAL, delimiter: str = ",") -> bytes:
    out = io.StringIO(newline="")
    csv.writer(out, quoting=quoting, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    return out.getvalue().encode()


def test_quoted_fields_hold_delimiters_quotes_and_line_breaks() -> None:
    data = b'1,"hello, world",x\r\n2,"say ""hi""","two\nlines"\n3,plain,"crlf\r\ninside"\n'
    assert records(data) == [
        b'1,"hello, world",x',
        b'2,"say ""hi""","two\nlines"',
        b'3,plain,"crlf\r\ninside"',
    ]
    result = WRITER.bind(TEXT).parse(records(data))
    assert result.errors == []
    assert result.batch.to_pylist() == [
        {"a": "1", "b": "hello, world", "c": "x"},
        {"a": "2", "b": 'say "hi"', "c": "two\nlines"},
        {"a": "3", "b": "plain", "c": "crlf\r\ninside"},
    ]


def test_a_quote_inside_an_unquoted_field_is_data() -> None:
    data = b'1,5" screen,x\n2,b,c\n'
    assert records(data) == [b'1,5" screen,x', b"2,b,c"]
    assert WRITER.bind(TEXT).parse(records(data)).batch.column("b").to_pylist() == ['5" screen', "b"]


def test_values_convert_as_the_delimited_writers_do() -> None:
    columns = parse_columns("i int, d decimal(5,2), s string, xs array<int>")
    result = WRITER.bind(columns).parse([b'1,"2.50","\\N","1\x022"', b'"",,"",'])
    assert result.errors == []
    assert result.batch.to_pylist() == [
        {"i": 1, "d": decimal.Decimal("2.50"), "s": None, "xs": [1, 2]},
        {"i": None, "d": None, "s": "", "xs": []},
    ]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (b'1,"open,x', "unexpected end of data"),
        (b'1,"ab"c,x', "expected after"),
    ],
)
def test_strict_refuses_a_record_that_is_not_csv(record: bytes, message: str) -> None:
    result = WRITER.bind(TEXT).parse([b"0,a,b", record], first_index=4)
    assert result.batch.column("a").to_pylist() == ["0"]
    [error] = result.errors
    assert error.record_index == 5 and error.record == record
    assert "not a CSV record (RFC 4180)" in str(error) and message in str(error)


def test_lenient_reads_what_it_can() -> None:
    lenient = StrictCsvWriter.builder().with_lenient(True).build().bind(TEXT)
    result = lenient.parse([b'1,"ab"c,x', b"2,b,c,extra"])
    assert result.errors == []
    assert result.batch.to_pylist() == [{"a": "1", "b": "abc", "c": "x"}, {"a": "2", "b": "b", "c": "c"}]


def test_more_fields_than_columns_is_an_error_and_fewer_are_counted() -> None:
    result = WRITER.bind(TEXT).parse([b'1,"b",c,d', b'2,"b"', b"3", b"4,b,c"])
    assert [e.record_index for e in result.errors] == [0]
    assert "record has 4 fields, the table has 3 columns" in str(result.errors[0])
    assert result.batch.to_pylist() == [
        {"a": "2", "b": "b", "c": None},
        {"a": "3", "b": None, "c": None},
        {"a": "4", "b": "b", "c": "c"},
    ]
    assert result.short == 2


def test_delimited_writer_counts_short_records_too() -> None:
    parser = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build().bind(TEXT)
    assert parser.parse([b"1", b"1,2,3", b"1,2"]).short == 2


@pytest.mark.parametrize(
    ("configure", "message"),
    [
        (lambda b: b.with_field_delimiter('"'), "quote character"),
        (lambda b: b.with_field_delimiter("\n"), "matches the field delimiter"),
        (lambda b: b.with_line_delimiter_pattern(r"\r\n"), "one byte"),
    ],
)
def test_impossible_configurations_fail_at_build(
    configure: Callable[[DelimitedBuilder[StrictCsvWriter]], DelimitedBuilder[StrictCsvWriter]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        configure(StrictCsvWriter.builder()).build()


field = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\\"), max_size=8
) | st.sampled_from(['"', '""', ",", "\n", "\r\n", '"a,b"', " x ", 'a"b'])
rows = st.lists(st.lists(field, min_size=3, max_size=3), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    rows,
    st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]),
    st.sampled_from([",", ";", "\t"]),
    st.integers(1, 64),
)
def test_what_a_spreadsheet_writes_reads_back(
    table: list[list[str]], quoting: int, delimiter: str, chunk_size: int
) -> None:
    """Rows written by Python's csv writer (Excel's dialect), cut at any read boundary, parse to the rows."""
    data = spreadsheet(table, quoting, delimiter)
    writer = StrictCsvWriter.builder().with_field_delimiter(delimiter).build()
    split = records(data, chunk_size, delimiter)
    result = writer.bind(TEXT).parse(split)
    assert result.errors == []
    assert [list(r.values()) for r in result.batch.to_pylist()] == table


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=20), min_size=1, max_size=10), st.integers(1, 32))
def test_the_split_agrees_with_pythons_csv_reader(pieces: list[bytes], chunk_size: int) -> None:
    """Whatever the bytes, records end where Python's csv reader ends them (at a line break outside quotes)."""
    data = b"\n".join(pieces).replace(b"\r", b"")
    text = data.decode("latin-1")
    expected = [row for row in csv.reader(io.StringIO(text, newline=""), strict=False) if row and row != [""]]
    got = [next(csv.reader([r.decode("latin-1")], strict=False)) for r in records(data, chunk_size)]
    assert [row for row in got if row != [""]] == expected


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(
            st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters='"\r\n,'), max_size=6),
            min_size=1,
            max_size=4,
        ),
        min_size=1,
        max_size=10,
    )
)
def test_records_without_quotes_parse_as_the_delimited_writer_parses_them(table: list[list[str]]) -> None:
    raw = [",".join(row).encode() for row in table]
    delimited = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build().bind(TEXT).parse(raw)
    quoted = WRITER.bind(TEXT).parse(raw)
    assert quoted.batch.equals(delimited.batch)
    assert [str(e) for e in quoted.errors] == [str(e) for e in delimited.errors]
    assert quoted.short == delimited.short


def test_a_record_left_open_is_refused_alone_and_the_next_one_read() -> None:
    """Read together, an open quoted field would run into the next record: each is then read alone."""
    result = WRITER.bind(TEXT).parse([b'1,"open,x', b'2,"b",c', b'3,"d",e'])
    assert [e.record_index for e in result.errors] == [0]
    assert result.batch.to_pylist() == [{"a": "2", "b": "b", "c": "c"}, {"a": "3", "b": "d", "c": "e"}]
