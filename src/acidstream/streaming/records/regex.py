"""StrictRegexWriter's parser: RegexSerDe semantics on RE2 (pyarrow's vectorised ``extract_regex``).

Java's ``Matcher.matches()`` must match the whole record; group i is column i (then partition columns). RE2
has no backreferences or lookaround: such patterns are rejected when the writer is built, not per record.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.types import Column
from acidstream.streaming.records.base import (
    ParseResult,
    RecordParser,
    RowErrors,
    texts_to_result,
)
from acidstream.streaming.records.delimited import records_as_text
from acidstream.streaming.records.text_values import TextFormat, mask


def name_groups(pattern: str) -> tuple[str, int]:
    """Give every capturing group of ``pattern`` a name ``g<i>`` (extract_regex needs names); count them."""
    out: list[str] = []
    count, i, in_class = 0, 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "]":  # a leading ']' is literal
                out.append("[]")
                i += 2
                continue
        elif ch == "(":
            if pattern[i + 1 : i + 2] != "?":
                count += 1
                out.append(f"(?P<g{count}>")
                i += 1
                continue
            if pattern[i + 2 : i + 3] in ("P", "<") and pattern[i + 3 : i + 4] not in ("=", "!"):
                raise ValueError(
                    "named groups are not supported in StrictRegexWriter patterns; use plain (...)"
                )
        out.append(ch)
        i += 1
    return "".join(out), count


def compile_check(pattern: str) -> None:
    """Make RE2 compile the pattern now so unsupported Java syntax fails at build time."""
    try:
        pc.match_substring_regex(pa.array([""]), pattern)
    except pa.ArrowInvalid as exc:
        raise ValueError(
            f"regex {pattern!r} is not supported by RE2 (no backreferences, lookahead/lookbehind, possessive "
            f"quantifiers or Java-only classes): {exc}"
        ) from exc


class RegexParser(RecordParser):
    """Strict: a record that does not match is a SerializationError. Lenient: Hive's null row."""

    def __init__(
        self, regex: str, data: Sequence[Column], partitions: Sequence[Column], lenient: bool
    ) -> None:
        compile_check(regex)
        named, groups = name_groups(regex)
        width = len(data) + len(partitions)
        if groups != width:
            raise ValueError(f"regex has {groups} capturing groups but the record has {width} columns")
        for column in data:
            if not column.type.is_primitive:
                raise ValueError(f"RegexSerDe supports primitive columns only; {column} is not")
        self.pattern = f"^(?:{named})$"
        self.data, self.partitions, self.lenient = list(data), list(partitions), lenient
        self.fmt = TextFormat()
        self._bind_schemas(data, partitions)

    def parse_arrow(self, records: pa.BinaryArray | pa.LargeBinaryArray, first_index: int = 0) -> ParseResult:
        errors = RowErrors(records, first_index)
        text, invalid = records_as_text(records, errors, self.lenient)
        groups = pc.extract_regex(text, self.pattern)
        width = len(self.data) + len(self.partitions)
        fields = [pc.struct_field(groups, [i]) for i in range(width)] if len(text) else []
        fields = fields or [pa.array([], pa.large_string())] * width
        if invalid is not None:
            invalid.report(fields, [c.name for c in (*self.data, *self.partitions)])
        if not self.lenient:
            errors.add(~mask(pc.is_valid(groups)), None, lambda i: "record does not match the regex")
        return texts_to_result(
            fields,
            self.data,
            self.partitions,
            self.fmt,
            self.lenient,
            errors,
            self.parsed_schema,
        )
