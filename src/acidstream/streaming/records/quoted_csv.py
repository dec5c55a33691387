"""StrictCsvWriter's parser: RFC 4180 CSV, as spreadsheets write it, over LazySimpleSerDe's value forms.

A field may be quoted (``"a, b"``; ``""`` inside is a quote; a line break inside is kept); a quote elsewhere in a field is a
character of it, as Python's ``csv`` (and Excel) read it. Records without a quote take the delimited parser's
vectorised split; the others go through Python's ``csv`` one by one. The unquoted text then converts exactly as
StrictDelimitedInputWriter's fields do (``\\N`` is NULL, quoted or not; an empty field of a non-string column is
NULL; collections use the collection and map-key delimiters inside the field).
"""

from __future__ import annotations

import csv

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.streaming.records.base import RowErrors
from acidstream.streaming.records.delimited import DelimitedParser
from acidstream.streaming.records.text_values import mask, may_contain, split_fields

QUOTE = '"'


def csv_fields(record: str, delimiter: str, *, strict: bool) -> list[str]:
    """The fields of one CSV record. ``csv.Error`` when it is not one well-formed record (strict: a quoted field
    not closed, or text after a closing quote; either mode: a line break outside quotes, i.e. two records)."""
    rows = list(csv.reader([record], delimiter=delimiter, quotechar=QUOTE, doublequote=True, strict=strict))
    if len(rows) != 1:
        raise csv.Error(f"{len(rows)} records in one (a line break outside quotes)")
    return rows[0]


class CsvParser(DelimitedParser):
    """:class:`DelimitedParser` whose fields may be quoted."""

    def split(self, text: pa.Array, width: int, errors: RowErrors) -> tuple[list[pa.Array], np.ndarray]:
        delimiter = self.fmt.separators[0]
        if not may_contain(text, ord(QUOTE)):  # the usual case, found on the raw bytes
            return split_fields(text, delimiter, width)
        quoted = mask(pc.match_substring(text, QUOTE))
        # The quoted records stand aside as `width` empty fields, so the others keep the uniform fast path.
        filler = pa.scalar(delimiter * (width - 1), pa.large_string())
        fields, counts = split_fields(pc.if_else(pa.array(quoted), filler, text), delimiter, width)
        counts = counts.copy()
        rows = np.flatnonzero(quoted)
        parsed = self._parse(text.take(pa.array(rows)).to_pylist(), rows, errors)
        counts[rows] = [len(values) for values in parsed]
        where = pa.array(quoted)
        for c in range(width):
            column = pa.array([v[c] if c < len(v) else None for v in parsed], fields[c].type)
            fields[c] = pc.replace_with_mask(fields[c], where, column)
        return fields, counts

    def _parse(self, records: list[str], rows: np.ndarray, errors: RowErrors) -> list[list[str]]:
        """The fields of each record (``rows``: their indexes, for errors). One reader takes them all, as the
        lines of one file; only when a record is not one well-formed CSV record (the reader then fails, or one
        record runs into the next, leaving fewer rows) is each read alone, to say which."""
        delimiter, strict = self.fmt.separators[0], not self.lenient
        try:
            reader = csv.reader(
                records, delimiter=delimiter, quotechar=QUOTE, doublequote=True, strict=strict
            )
            together = list(reader)
        except csv.Error:
            together = []
        if len(together) == len(records):
            return together
        parsed: list[list[str]] = []
        for i, record in zip(rows.tolist(), records, strict=True):
            try:
                values = csv_fields(record, delimiter, strict=strict)
            except csv.Error as exc:
                if strict:
                    errors.add_one(i, None, f"not a CSV record (RFC 4180): {exc}")
                values = record.split(delimiter)  # lenient: as the delimited parser splits it
            parsed.append(values)
        return parsed
