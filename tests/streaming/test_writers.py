"""The public record-writer API: builders, immutable configuration, bind → parser schema."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from acidstream.acid.types import parse_columns
from acidstream.streaming.records import RecordParser
from acidstream.streaming.writers import (
    DEFAULT_LINE_DELIMITER_PATTERN,
    RecordWriter,
    StrictDelimitedInputWriter,
    StrictJsonWriter,
    StrictRegexWriter,
)

DATA = parse_columns("id int, msg string")
KEYS = parse_columns("continent string, year int")


def writers() -> list[RecordWriter]:
    return [
        StrictDelimitedInputWriter.builder().build(),
        StrictJsonWriter.builder().build(),
        StrictRegexWriter.builder().with_regex(r"(\d+),(.*)").build(),
    ]


def test_hive_defaults() -> None:
    w = StrictDelimitedInputWriter.builder().build()
    assert (w.field_delimiter, w.collection_delimiter, w.map_key_delimiter) == ("\x01", "\x02", "\x03")
    assert w.null_sequence == "\\N" and w.lenient is False
    assert DEFAULT_LINE_DELIMITER_PATTERN == r"[\r\n]"
    assert all(x.line_delimiter_pattern == r"[\r\n]" for x in writers())


def test_builders_set_every_option() -> None:
    w = (
        StrictDelimitedInputWriter.builder()
        .with_field_delimiter(",")
        .with_collection_delimiter(b"|")
        .with_map_key_delimiter(":")
        .with_line_delimiter_pattern(r"\n")
        .with_null_sequence("NULL")
        .with_lenient(True)
        .build()
    )
    assert (w.field_delimiter, w.collection_delimiter, w.map_key_delimiter) == (",", "|", ":")
    assert (w.line_delimiter_pattern, w.null_sequence, w.lenient) == (r"\n", "NULL", True)
    j = StrictJsonWriter.builder().with_line_delimiter_pattern("##").build()
    assert j.line_delimiter_pattern == "##"
    r = StrictRegexWriter.builder().with_regex("(a)").with_lenient(True).build()
    assert (r.regex, r.lenient) == ("(a)", True)


@pytest.mark.parametrize("writer", writers(), ids=lambda w: type(w).__name__)
def test_writers_are_immutable(writer: RecordWriter) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        writer.lenient = True  # type: ignore[misc]


@pytest.mark.parametrize("writer", writers(), ids=lambda w: type(w).__name__)
def test_bind_schema_static_and_dynamic(writer: RecordWriter) -> None:
    static = writer.bind(DATA, KEYS)
    assert isinstance(static, RecordParser)
    assert static.output_schema == pa.schema([("id", pa.int32()), ("msg", pa.string())])
    if isinstance(writer, StrictRegexWriter):
        writer = StrictRegexWriter.builder().with_regex(r"(\d+),(.*),(.*),(.*)").build()
    dynamic = writer.bind(DATA, KEYS, dynamic_partitioning=True)
    assert dynamic.output_schema.names == ["id", "msg", "continent", "year"]
    assert dynamic.output_schema.field("year").type == pa.string()


def test_the_three_writers_agree_on_one_row() -> None:
    delimited = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build().bind(DATA)
    regex = StrictRegexWriter.builder().with_regex(r"(\d+),(.*)").build().bind(DATA)
    json = StrictJsonWriter.builder().build().bind(DATA)
    rows = [
        delimited.parse([b"1,hello"]).batch,
        regex.parse([b"1,hello"]).batch,
        json.parse([b'{"id":1,"msg":"hello"}']).batch,
    ]
    assert rows[0].equals(rows[1]) and rows[0].equals(rows[2])


@pytest.mark.parametrize("pattern", ["(", r"\n*", ""])
def test_bad_line_delimiter_patterns_are_rejected(pattern: str) -> None:
    with pytest.raises(ValueError, match="line delimiter pattern"):
        StrictJsonWriter.builder().with_line_delimiter_pattern(pattern)


def test_builder_methods_chain_in_any_order() -> None:
    w = (
        StrictDelimitedInputWriter.builder()
        .with_lenient(True)
        .with_line_delimiter_pattern(r"\n")
        .with_null_sequence("")
    )
    assert w.build().null_sequence == "" and w.build().lenient


def _utf8_case(kind: str, field: str) -> tuple[RecordWriter, list[bytes]]:
    """A writer and 4 records (id, msg, continent, year) whose record 2 holds invalid UTF-8 in ``field``."""
    values = [[b"%d" % i, b"m%d" % i, b"Asia", b"2024"] for i in range(4)]
    values[2][["id", "msg", "continent", "year"].index(field)] = b"x\xff\xfey"
    if kind == "delimited":
        return StrictDelimitedInputWriter.builder().with_field_delimiter(",").build(), [
            b",".join(v) for v in values
        ]
    if kind == "regex":
        writer = StrictRegexWriter.builder().with_regex(r"([^,]*),([^,]*),([^,]*),([^,]*)").build()
        return writer, [b",".join(v) for v in values]
    return StrictJsonWriter.builder().build(), [
        b'{"id": %s, "msg": "%s", "continent": "%s", "year": %s}' % tuple(v) for v in values
    ]


@pytest.mark.parametrize("field", ["msg", "continent"])
@pytest.mark.parametrize("kind", ["delimited", "json", "regex"])
def test_every_writer_refuses_invalid_utf8_naming_record_and_field(kind: str, field: str) -> None:
    """Regression: StrictJsonWriter stored invalid strings (every later full read of the table failed) and an
    invalid partition value raised a raw UnicodeDecodeError; the others named no field."""
    writer, records = _utf8_case(kind, field)
    parser = writer.bind(DATA, KEYS, dynamic_partitioning=True)
    result = parser.parse(records, first_index=10)
    assert result.good_indexes.tolist() == [0, 1, 3]
    [error] = result.errors
    assert (error.record_index, error.field) == (12, field)
    assert "UTF-8" in str(error)
    result.batch.validate(full=True)  # every string kept is valid UTF-8
    lenient = dataclasses.replace(writer, lenient=True).bind(DATA, KEYS, dynamic_partitioning=True)
    kept = lenient.parse(records)
    kept.batch.validate(full=True)
    assert kept.batch.num_rows == 4 and kept.batch.column(field)[2].as_py() == "x\ufffd\ufffdy"


@pytest.mark.parametrize("kind", ["delimited", "json", "regex"])
def test_invalid_utf8_outside_any_column_names_no_field(kind: str) -> None:
    """Bytes no column takes (an unknown JSON key, a delimited extra field) still make the record bad."""
    writer, records = _utf8_case(kind, "msg")
    bad = {
        "delimited": b"1,a,Asia,2024,\xff",
        "regex": b"1,a\xff,Asia",  # does not match: no group holds the bytes
        "json": b'{"id": 1, "\xff": "x"}',
    }[kind]
    result = writer.bind(DATA, KEYS, dynamic_partitioning=True).parse([records[0], bad])
    assert result.good_indexes.tolist() == [0]
    [error] = result.errors
    assert (error.record_index, error.field) == (1, None)
    assert "UTF-8" in str(error)
