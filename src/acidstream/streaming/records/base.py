"""What every record parser returns, and the shared step from per-column texts to a checked Arrow batch."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.types import Column
from acidstream.errors import SerializationError
from acidstream.streaming.records.text_values import TextFormat, canonical_partition_values, convert

#: How much of a bad value an error message shows.
SHOWN_CHARS = 60


@dataclass
class ParseResult:
    """The good records as one batch (input order), one error per bad record, where each good row came from, and
    how many good records had fewer fields than the table's columns (their missing values are NULL)."""

    batch: pa.RecordBatch
    errors: list[SerializationError] = field(default_factory=list)
    good_indexes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    short: int = 0


def shown(value: object) -> str:
    """A bad value for a message: repr, truncated."""
    text = value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…")


def bad_value(texts: pa.Array, column: Column) -> Callable[[int], str]:
    """The message for element i of ``texts`` not parsing as the column's type."""

    def message(i: int) -> str:
        return f"cannot parse {shown(texts[i].as_py())} as {column.type}"

    return message


#: Partition values as parsers return them: dictionary-encoded strings. Canonicalising them takes the distinct
#: values anyway, and the router groups rows by these codes instead of encoding the strings again.
PARSED_PARTITION_VALUES = pa.dictionary(pa.int32(), pa.string())


def output_schema(
    data: Sequence[Column], partitions: Sequence[Column], partition_type: pa.DataType
) -> pa.Schema:
    """Data columns with their Arrow types, then one column per dynamic partition key."""
    return pa.schema([c.to_arrow() for c in data] + [pa.field(p.name, partition_type) for p in partitions])


class RecordParser(ABC):
    """A record writer bound to a table's columns: turns raw records into Arrow rows of those columns."""

    output_schema: pa.Schema  # what write_batch takes: partition values as strings
    parsed_schema: pa.Schema  # what parsing returns: partition values as PARSED_PARTITION_VALUES

    def _bind_schemas(self, data: Sequence[Column], partitions: Sequence[Column]) -> None:
        self.output_schema = output_schema(data, partitions, pa.string())
        self.parsed_schema = output_schema(data, partitions, PARSED_PARTITION_VALUES)

    def parse(self, records: Sequence[bytes], first_index: int = 0) -> ParseResult:
        """Parse records given one by one (see :meth:`parse_arrow`)."""
        return self.parse_arrow(records_array(records), first_index)

    @abstractmethod
    def parse_arrow(self, records: pa.BinaryArray | pa.LargeBinaryArray, first_index: int = 0) -> ParseResult:
        """Parse records held in one Arrow array; ``first_index`` numbers the first one in error messages."""


def records_array(records: Sequence[bytes]) -> pa.BinaryArray | pa.LargeBinaryArray:
    """Records given one by one as one Arrow array."""
    arr = pa.array(records, pa.binary())  # 3x faster to build than large_binary from Python bytes
    if isinstance(arr, pa.ChunkedArray):  # over 2 GiB: one large_binary array
        arr = arr.cast(pa.large_binary()).combine_chunks()
    return arr


def record_bytes(records: pa.Array) -> int:
    """The records' own bytes (what ``stats()`` counts), without Arrow's offsets and validity."""
    return int(pc.sum(pc.binary_length(records)).as_py() or 0)


class RowErrors:
    """The first error of each record, in the order found (records are reported once)."""

    def __init__(self, records: pa.Array, first_index: int) -> None:
        self.records, self.first_index = records, first_index
        self.bad = np.zeros(len(records), dtype=bool)
        self.found: dict[int, SerializationError] = {}

    def add(self, where: np.ndarray, field_name: str | None, message: Callable[[int], str]) -> None:
        """Report ``message(i)`` for every record i in ``where`` that has no error yet."""
        for i in np.flatnonzero(where & ~self.bad):
            self.add_one(int(i), field_name, message(int(i)))

    def add_one(self, i: int, field_name: str | None, message: str) -> None:
        if not self.bad[i]:
            self.bad[i] = True
            self.found[i] = SerializationError(
                message, record_index=self.first_index + i, field=field_name, record=self.records[i].as_py()
            )

    def errors(self) -> list[SerializationError]:
        return [self.found[i] for i in sorted(self.found)]


def texts_to_result(
    texts: Sequence[pa.Array],
    data: Sequence[Column],
    partitions: Sequence[Column],
    fmt: TextFormat,
    lenient: bool,
    errors: RowErrors,
    schema: pa.Schema,
) -> ParseResult:
    """Convert the text of every data column (then partition column) and keep the records that parsed."""
    arrays: list[pa.Array] = []
    for column, text in zip(data, texts, strict=False):
        conv = convert(text, column.type, fmt)
        if not lenient:
            errors.add(conv.bad, column.name, bad_value(text, column))
        arrays.append(conv.values)
    for column, text in zip(partitions, texts[len(data) :], strict=True):
        conv = convert(text, column.type, fmt)
        arrays.append(canonical_partition_values(conv.values, column.type))
    return finish(arrays, errors, schema)


def finish(arrays: list[pa.Array], errors: RowErrors, schema: pa.Schema) -> ParseResult:
    """Drop the bad records and build the result."""
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    good = np.flatnonzero(~errors.bad)
    if errors.bad.any():
        batch = batch.filter(pa.array(~errors.bad))
    return ParseResult(batch, errors.errors(), good.astype(np.int64))
