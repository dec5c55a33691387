"""StrictDelimitedInputWriter's parser: LazySimpleSerDe text records, split and converted column-wise."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from acidstream.acid.types import Column
from acidstream.streaming.records.base import (
    ParseResult,
    RecordParser,
    RowErrors,
    texts_to_result,
)
from acidstream.streaming.records.text_values import TextFormat, levels_needed, split_fields


def records_as_text(records: pa.Array, errors: RowErrors, lenient: bool) -> pa.Array:
    """Records as UTF-8 strings; invalid UTF-8 is a bad record (strict) or decoded with U+FFFD (lenient)."""
    try:
        return records.cast(pa.large_string())
    except pa.ArrowInvalid:
        texts: list[str] = []
        invalid = np.zeros(len(records), dtype=bool)
        for i, raw in enumerate(records.to_pylist()):
            try:
                texts.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                invalid[i] = True
                texts.append(raw.decode("utf-8", "replace") if lenient else "")
        if not lenient:
            errors.add(invalid, None, lambda i: "record is not valid UTF-8")
        return pa.array(texts, pa.large_string())


class DelimitedParser(RecordParser):
    """Fields on the level-0 separator; trailing fields are the partition values when partitioning dynamically."""

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
        text = records_as_text(records, errors, self.lenient)
        width = len(self.data) + len(self.partitions)
        fields, counts = split_fields(text, self.fmt.separators[0], width)
        if not self.lenient:
            errors.add(
                counts > width,
                None,
                lambda i: f"record has {counts[i]} fields, the table has {width} columns",
            )
        return texts_to_result(
            fields,
            self.data,
            self.partitions,
            self.fmt,
            self.lenient,
            errors,
            self.parsed_schema,
        )
