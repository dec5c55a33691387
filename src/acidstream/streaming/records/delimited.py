"""StrictDelimitedInputWriter's parser: LazySimpleSerDe text records, split and converted column-wise."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from acidstream.acid.types import Column
from acidstream.streaming.records.base import (
    ParseResult,
    RecordParser,
    RowErrors,
    shown,
    texts_to_result,
)
from acidstream.streaming.records.text_values import TextFormat, levels_needed, split_fields


def records_as_text(
    records: pa.Array, errors: RowErrors, lenient: bool
) -> tuple[pa.Array, InvalidText | None]:
    """Records as UTF-8 strings. A record that is not valid UTF-8 is decoded with U+FFFD when lenient; when
    strict it is bad, and the returned :class:`InvalidText` names its field once the caller has split it."""
    try:
        return records.cast(pa.large_string()), None
    except pa.ArrowInvalid:
        pass
    raw = records.to_pylist()
    if lenient:
        texts = [r.decode("utf-8", "replace") if r is not None else None for r in raw]
        return pa.array(texts, pa.large_string()), None
    invalid = InvalidText(errors, raw)
    return pa.array(invalid.texts, pa.large_string()), invalid


class InvalidText:
    """Strict mode's view of records of which some are not valid UTF-8: those are decoded with a marker
    character for every invalid byte, so that once a record is split into fields, the field holding the
    marker is the one an error names.

    The marker is a Unicode noncharacter that none of these records contains (so never a character of their
    own); if all 32 occur, U+FFFD stands in, and a field may be named wrongly but the record is still bad."""

    def __init__(self, errors: RowErrors, records: list[bytes | None]) -> None:
        self._errors = errors
        self.texts: list[str | None] = []
        self._rows: list[int] = []
        for i, record in enumerate(records):
            if record is None:
                self.texts.append(None)
                continue
            try:
                self.texts.append(record.decode("utf-8"))
            except UnicodeDecodeError:
                self.texts.append(record.decode("utf-8", "surrogateescape"))
                self._rows.append(i)
        bad = [self.texts[i] for i in self._rows]
        self._marker = next((m for m in _MARKERS if not any(m in t for t in bad if t)), "\ufffd")
        for i in self._rows:
            self.texts[i] = _ESCAPED_BYTES.sub(self._marker, self.texts[i] or "")

    def report(self, fields: Sequence[pa.Array], names: Sequence[str]) -> None:
        """One error per invalid record, naming its first field that holds invalid bytes (None: no field does,
        e.g. bytes in a field beyond the table's columns). Call before any other check of these records."""
        for i in self._rows:
            for name, values in zip(names, fields, strict=False):
                value = values[i].as_py()
                if isinstance(value, str) and self._marker in value:
                    shown_value = shown(value.replace(self._marker, "\ufffd"))
                    self._errors.add_one(i, name, f"{shown_value} is not valid UTF-8")
                    break
            else:
                self._errors.add_one(i, None, "record is not valid UTF-8")


#: The noncharacters U+FDD0..U+FDEF, candidates for :class:`InvalidText`'s marker.
_MARKERS = tuple(chr(c) for c in range(0xFDD0, 0xFDF0))
#: The lone surrogates ``surrogateescape`` decodes invalid bytes to.
_ESCAPED_BYTES = re.compile("[\udc80-\udcff]")


class DelimitedParser(RecordParser):
    """Fields on the level-0 separator; trailing fields are the partition values when partitioning dynamically.

    A record with fewer fields than the table's columns has NULL for the missing ones, as LazySimpleSerDe reads
    it (a missing partition value puts the row in ``__HIVE_DEFAULT_PARTITION__``); the result counts such
    records (``short``). More fields than columns is an error (lenient: the extra ones are dropped, as Hive does).
    """

    def __init__(
        self, data: Sequence[Column], partitions: Sequence[Column], fmt: TextFormat, lenient: bool
    ) -> None:
        deepest = max((levels_needed(c.type) for c in data), default=0)
        if deepest >= len(fmt.separators):
            raise ValueError(
                f"types nest {deepest} levels deep; LazySimpleSerDe has separators for {len(fmt.separators) - 1}"
            )
        self.data, self.partitions, self.fmt, self.lenient = list(data), list(partitions), fmt, lenient
        self._bind_schemas(data, partitions)

    def parse_arrow(self, records: pa.BinaryArray | pa.LargeBinaryArray, first_index: int = 0) -> ParseResult:
        errors = RowErrors(records, first_index)
        text, invalid = records_as_text(records, errors, self.lenient)
        width = len(self.data) + len(self.partitions)
        fields, counts = self.split(text, width, errors)
        if invalid is not None:
            invalid.report(fields, [c.name for c in (*self.data, *self.partitions)])
        if not self.lenient:
            errors.add(
                counts > width,
                None,
                lambda i: f"record has {counts[i]} fields, the table has {width} columns",
            )
        result = texts_to_result(
            fields,
            self.data,
            self.partitions,
            self.fmt,
            self.lenient,
            errors,
            self.parsed_schema,
        )
        result.short = int(np.count_nonzero((counts < width) & ~errors.bad))
        return result

    def split(self, text: pa.Array, width: int, errors: RowErrors) -> tuple[list[pa.Array], np.ndarray]:
        """The first ``width`` fields of every record (null where it has fewer) and each one's field count."""
        return split_fields(text, self.fmt.separators[0], width)
