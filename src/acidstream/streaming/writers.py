"""The record writers a user hands to ``StreamingConnection.builder().with_record_writer(...)``.

Hive's StrictDelimitedInputWriter, StrictJsonWriter and StrictRegexWriter, and beyond Hive StrictCsvWriter
(RFC 4180: quoted fields), with immutable configuration built by a builder. ``bind`` ties a writer to a table's
columns and returns the bulk parser the connection uses; ``split`` cuts a stream into its records.

Where we differ from Hive, on purpose:

* Strict by default: a value that does not parse as its column type, or a delimited record with more fields
  than the table (data + dynamic partition) columns, is a SerializationError naming the record and column.
  Hive's SerDes silently store NULL / drop the extras; ``with_lenient(True)`` restores exactly that. Things
  Hive itself does not treat as errors stay silent in both modes: fewer fields than columns (NULL for the
  missing ones, counted as ``records_short``), empty text for a non-string type (NULL),
  decimal precision overflow (NULL), varchar/char over-length (truncated), NULL map keys (entry dropped).
* Partition values (dynamic partitioning) that do not parse as their key's type are None (Hive: NULL, hence
  ``__HIVE_DEFAULT_PARTITION__``) in both modes.
* Records must be UTF-8 (Arrow strings), in every writer: invalid bytes are an error naming the field that
  holds them (a partition value too), or decoded with U+FFFD when lenient; a JSON string escaping a lone
  surrogate (``\\ud800``) is not text either (lenient: NULL).
* ``write_stream`` skips empty records; Hive's Scanner yields one between ``\r\n`` under ``[\r\n]``.
* Delimiters are single ASCII characters (LazySimpleSerDe separators are single bytes).
* Regex: RE2 syntax (no backreferences or lookaround, rejected at build); a non-matching record is an error
  (lenient: Hive's all-NULL row); an optional group that did not take part reads as '' (RE2 extraction).
* JSON: values must have the column's JSON type (number for numeric columns, string for string/date/
  timestamp/char/varchar/binary, true/false for boolean); Hive's JsonSerDe converts token text instead.
  Lenient turns such values into NULL; a record that is not a JSON object is an error in both modes.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import BinaryIO, ClassVar, Generic, Self, TypeVar

import pyarrow as pa

from acidstream.acid.types import Column
from acidstream.streaming.records import RecordParser, split_records
from acidstream.streaming.records.delimited import DelimitedParser
from acidstream.streaming.records.json import JsonParser
from acidstream.streaming.records.quoted_csv import CsvParser
from acidstream.streaming.records.regex import RegexParser, compile_check, name_groups
from acidstream.streaming.records.streams import is_one_byte, split_quoted_records
from acidstream.streaming.records.text_values import DEFAULT_SEPARATORS, TextFormat

#: AbstractRecordWriter's default line delimiter for ``write(InputStream)``.
DEFAULT_LINE_DELIMITER_PATTERN = r"[\r\n]"

W = TypeVar("W", bound="RecordWriter")


@dataclass(frozen=True)
class RecordWriter(ABC):
    """Base of the writers: how records look, and how a stream is cut into records."""

    line_delimiter_pattern: str = DEFAULT_LINE_DELIMITER_PATTERN
    lenient: bool = False

    @abstractmethod
    def bind(
        self,
        columns: Sequence[Column],
        partition_keys: Sequence[Column] = (),
        *,
        dynamic_partitioning: bool = False,
    ) -> RecordParser:
        """A parser for this table; with dynamic partitioning records carry the partition values last."""

    def split(self, stream: BinaryIO) -> Iterator[pa.Array]:
        """The records of a binary stream (``write_stream``, the command line's stdin), in chunks."""
        return split_records(stream, self.line_delimiter_pattern)

    def check(self) -> None:
        """Raise ValueError for a configuration that cannot work (``build`` calls it, not the first record)."""
        _check_line_pattern(self.line_delimiter_pattern)


def _check_line_pattern(pattern: str) -> None:
    try:
        if re.compile(pattern.encode()).fullmatch(b""):
            raise ValueError(f"line delimiter pattern {pattern!r} matches the empty string")
    except re.error as exc:
        raise ValueError(f"invalid line delimiter pattern {pattern!r}: {exc}") from exc


class _Builder(Generic[W]):
    """Fluent builder over a frozen writer: every ``with_*`` returns the builder, ``build`` the writer."""

    def __init__(self, writer: W) -> None:
        self._writer = writer

    def with_line_delimiter_pattern(self, pattern: str) -> Self:
        """The regex (Python ``re`` syntax) that separates records in ``write_stream``."""
        _check_line_pattern(pattern)
        self._writer = replace(self._writer, line_delimiter_pattern=pattern)
        return self

    def with_lenient(self, lenient: bool) -> Self:
        self._writer = replace(self._writer, lenient=lenient)
        return self

    def build(self) -> W:
        self._writer.check()
        return self._writer


def _delimiter(value: str | bytes | int, what: str) -> str:
    """Hive's separators are single bytes; we accept one ASCII character as str, bytes or int."""
    if isinstance(value, int):
        value = bytes([value])
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    if len(text) != 1 or ord(text) > 0x7F:
        raise ValueError(
            f"{what} must be a single ASCII character (LazySimpleSerDe separators are one byte), got {value!r}"
        )
    return text


@dataclass(frozen=True)
class _TextFieldsWriter(RecordWriter):
    """Records of text fields in LazySimpleSerDe's forms: field, collection and map-key delimiters, null sequence."""

    field_delimiter: str = DEFAULT_SEPARATORS[0]
    collection_delimiter: str = DEFAULT_SEPARATORS[1]
    map_key_delimiter: str = DEFAULT_SEPARATORS[2]
    null_sequence: str = "\\N"
    parser_class: ClassVar[type[DelimitedParser]] = DelimitedParser

    def text_format(self) -> TextFormat:
        separators = (
            self.field_delimiter,
            self.collection_delimiter,
            self.map_key_delimiter,
            *DEFAULT_SEPARATORS[3:],
        )
        if len(set(separators)) != len(separators):
            raise ValueError(f"delimiters must differ from each other and from \\x04..\\x08: {separators!r}")
        return TextFormat(separators, self.null_sequence)

    def check(self) -> None:
        super().check()
        self.text_format()

    def bind(
        self,
        columns: Sequence[Column],
        partition_keys: Sequence[Column] = (),
        *,
        dynamic_partitioning: bool = False,
    ) -> RecordParser:
        parts = partition_keys if dynamic_partitioning else ()
        return self.parser_class(columns, parts, self.text_format(), self.lenient)


@dataclass(frozen=True)
class StrictDelimitedInputWriter(_TextFieldsWriter):
    """LazySimpleSerDe text records: field, collection and map-key delimiters (Hive defaults ^A, ^B, ^C)."""

    @staticmethod
    def builder() -> DelimitedBuilder[StrictDelimitedInputWriter]:
        return DelimitedBuilder(StrictDelimitedInputWriter())


@dataclass(frozen=True)
class StrictCsvWriter(_TextFieldsWriter):
    """RFC 4180 CSV as spreadsheets write it (beyond Hive): StrictDelimitedInputWriter's records, whose fields
    may be quoted (``"a, b"``, ``""`` for a quote, line breaks inside quotes). Field delimiter ``,`` by default;
    a record ends at an unquoted byte of the line delimiter pattern (one byte: ``[\\r\\n]`` by default)."""

    field_delimiter: str = ","
    parser_class: ClassVar[type[DelimitedParser]] = CsvParser

    @staticmethod
    def builder() -> DelimitedBuilder[StrictCsvWriter]:
        return DelimitedBuilder(StrictCsvWriter())

    def split(self, stream: BinaryIO) -> Iterator[pa.Array]:
        return split_quoted_records(stream, self.line_delimiter_pattern, self.field_delimiter)

    def check(self) -> None:
        super().check()
        if '"' in (self.field_delimiter, self.collection_delimiter, self.map_key_delimiter):
            raise ValueError("a CSV delimiter cannot be the quote character '\"'")
        table = re.compile(self.line_delimiter_pattern.encode())
        if any(table.fullmatch(d.encode()) for d in (self.field_delimiter, '"')):
            raise ValueError(
                f"the line delimiter pattern {self.line_delimiter_pattern!r} matches the field delimiter or "
                "the quote character"
            )
        if not is_one_byte(self.line_delimiter_pattern):
            raise ValueError(
                "CSV records end at one byte (a character or a class of them), "
                f"not at {self.line_delimiter_pattern!r}"
            )


D = TypeVar("D", bound=_TextFieldsWriter)


class DelimitedBuilder(_Builder[D]):
    def with_field_delimiter(self, delimiter: str | bytes | int) -> Self:
        self._writer = replace(self._writer, field_delimiter=_delimiter(delimiter, "field delimiter"))
        return self

    def with_collection_delimiter(self, delimiter: str | bytes | int) -> Self:
        self._writer = replace(
            self._writer, collection_delimiter=_delimiter(delimiter, "collection delimiter")
        )
        return self

    def with_map_key_delimiter(self, delimiter: str | bytes | int) -> Self:
        self._writer = replace(self._writer, map_key_delimiter=_delimiter(delimiter, "map key delimiter"))
        return self

    def with_null_sequence(self, sequence: str) -> Self:
        self._writer = replace(self._writer, null_sequence=sequence)
        return self


@dataclass(frozen=True)
class StrictJsonWriter(RecordWriter):
    """One JSON object per record (Hive's JsonSerDe)."""

    @staticmethod
    def builder() -> _Builder[StrictJsonWriter]:
        return _Builder(StrictJsonWriter())

    def bind(
        self,
        columns: Sequence[Column],
        partition_keys: Sequence[Column] = (),
        *,
        dynamic_partitioning: bool = False,
    ) -> RecordParser:
        return JsonParser(columns, partition_keys if dynamic_partitioning else (), self.lenient)


@dataclass(frozen=True)
class StrictRegexWriter(RecordWriter):
    """RegexSerDe: the whole record must match ``regex``; group i is column i (RE2 syntax)."""

    regex: str = ""

    @staticmethod
    def builder() -> RegexBuilder:
        return RegexBuilder(StrictRegexWriter())

    def bind(
        self,
        columns: Sequence[Column],
        partition_keys: Sequence[Column] = (),
        *,
        dynamic_partitioning: bool = False,
    ) -> RecordParser:
        return RegexParser(self.regex, columns, partition_keys if dynamic_partitioning else (), self.lenient)

    def check(self) -> None:
        super().check()
        if not self.regex:
            raise ValueError("StrictRegexWriter needs a regex (with_regex)")
        compile_check(self.regex)
        name_groups(self.regex)


class RegexBuilder(_Builder[StrictRegexWriter]):
    def with_regex(self, regex: str) -> Self:
        self._writer = replace(self._writer, regex=regex)
        return self


__all__ = [
    "DEFAULT_LINE_DELIMITER_PATTERN",
    "RecordWriter",
    "StrictCsvWriter",
    "StrictDelimitedInputWriter",
    "StrictJsonWriter",
    "StrictRegexWriter",
]
