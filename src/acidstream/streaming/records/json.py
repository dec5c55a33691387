"""StrictJsonWriter's parser: one JSON object per record, keys matched to columns case-insensitively.

Fast path: the records joined by newlines go through ``pyarrow.json`` with an explicit schema (numbers become
decimals exactly, unknown keys are inferred and dropped). Whenever that path cannot be trusted — a parse or
conversion error, a key whose case differs from its column, a record count mismatch, a map column — the batch is
parsed record by record with Python's ``json`` so that the exact bad record and field are reported.
"""

from __future__ import annotations

import decimal
import io
import json
import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from acidstream.acid.types import Column, HiveType
from acidstream.streaming.records.base import (
    ParseResult,
    RecordParser,
    RowErrors,
    bad_value,
    finish,
    shown,
)
from acidstream.streaming.records.text_values import (
    Converted,
    TextFormat,
    canonical_partition_values,
    convert,
    round_decimal,
)

_NATIVE = {"tinyint", "smallint", "int", "bigint", "boolean", "float", "double", "string", "decimal"}
_FROM_TEXT = {"char", "varchar", "date", "timestamp", "binary"}  # read as JSON strings, then Hive text rules


JSON_TEXT = TextFormat(null_sequence=None)


class BadValue(Exception):
    """A JSON value that does not fit its column (raised by the per-record path)."""


def _fast_type(t: HiveType, top: bool) -> pa.DataType | None:
    """The type pyarrow.json reads a column as, or None when only the per-record path handles it."""
    if t.name in _NATIVE:
        return t.to_arrow()
    if t.name in _FROM_TEXT:
        return pa.string() if top else None
    if t.name == "array":
        child = _fast_type(t.children[0], False)
        return pa.list_(child) if child is not None else None
    if t.name == "struct":
        children = [_fast_type(c, False) for c in t.children]
        if any(c is None for c in children):
            return None
        return pa.struct([pa.field(n, c) for n, c in zip(t.field_names, children, strict=True)])
    return None  # maps: pyarrow.json cannot read them


class JsonParser(RecordParser):
    """Missing keys and JSON null → NULL; unknown keys ignored; a value of the wrong JSON type is an error."""

    def __init__(self, data: Sequence[Column], partitions: Sequence[Column], lenient: bool) -> None:
        self.data, self.partitions, self.lenient = list(data), list(partitions), lenient
        self.columns = self.data + self.partitions
        self._bind_schemas(data, partitions)
        fast = [(c.name, _fast_type(c.type, True)) for c in self.data]
        fast += [(p.name, _fast_type(p.type, True) if p.type.is_primitive else None) for p in self.partitions]
        self.fast_schema = None if any(t is None for _, t in fast) else pa.schema(fast)

    def parse_arrow(self, records: pa.BinaryArray | pa.LargeBinaryArray, first_index: int = 0) -> ParseResult:
        fast = self._parse_fast(records, first_index) if self.fast_schema is not None else None
        return fast if fast is not None else self._parse_slow(records, first_index)

    # --- bulk ---------------------------------------------------------------------------------------------

    def _parse_fast(self, records: pa.Array, first_index: int) -> ParseResult | None:
        assert self.fast_schema is not None
        if len(records) == 0 or pc.any(pc.equal(pc.binary_length(records), 0)).as_py():
            return None
        buf = _join_lines(records.cast(pa.large_binary()))
        options = pj.ParseOptions(explicit_schema=self.fast_schema, unexpected_field_behavior="infer")
        longest = pc.max(pc.binary_length(records)).as_py()
        blocks = pj.ReadOptions(block_size=max(1 << 20, 2 * longest + 2))  # a record must fit in one block
        try:
            table = pj.read_json(io.BytesIO(buf), read_options=blocks, parse_options=options)
            table.validate(full=True)  # pyarrow.json keeps invalid UTF-8 in strings: the slow path names it
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError):  # the last: in a key
            return None
        known = {c.name for c in self.columns}
        if table.num_rows != len(records) or any(
            n not in known and n.lower() in known for n in table.column_names
        ):
            return None
        if any(table.schema.field(f.name).type != f.type for f in self.fast_schema):
            return None  # nested keys pyarrow did not know (other case, unknown fields): let the slow path decide
        errors = RowErrors(records, first_index)
        arrays = []
        for column in self.data:
            values = table.column(column.name).combine_chunks()
            if column.type.name in _FROM_TEXT:
                conv = convert(values, column.type, JSON_TEXT)
                if not self.lenient:
                    errors.add(conv.bad, column.name, bad_value(values, column))
                values = conv.values
            arrays.append(values.cast(column.to_arrow().type))
        for column in self.partitions:
            values = table.column(column.name).combine_chunks()
            if column.type.name in _FROM_TEXT:
                values = convert(values, column.type, TextFormat()).values
            arrays.append(canonical_partition_values(values, column.type))
        return finish(arrays, errors, self.parsed_schema)

    # --- record by record -------------------------------------------------------------------------------

    def _parse_slow(self, records: pa.Array, first_index: int) -> ParseResult:
        errors = RowErrors(records, first_index)
        rows: list[list[object]] = [[] for _ in self.columns]
        for i, raw in enumerate(records.to_pylist()):
            values, problem = self._record(raw)
            if problem is not None:
                field_name, message = problem
                errors.add_one(i, field_name, message)
            for col_values, value in zip(rows, values, strict=True):
                col_values.append(value)
        arrays: list[pa.Array] = []
        for column, values in zip(self.data, rows, strict=False):
            arrays.append(pa.array(values, column.to_arrow().type))
        for column, values in zip(self.partitions, rows[len(self.data) :], strict=True):
            typed = convert(pa.array(values, pa.large_string()), column.type, TextFormat()).values
            arrays.append(canonical_partition_values(typed, column.type))
        return finish(arrays, errors, self.parsed_schema)

    def _record(self, raw: bytes) -> tuple[list[object], tuple[str | None, str] | None]:
        """One record's column values (None where bad) and its first problem (field, message), if any.

        Text that is not valid UTF-8 (invalid bytes, or lone surrogates escaped as ``\\ud800``) is never
        taken: strict, the record is bad and the error names the first column holding such text (none when
        only an ignored key does); lenient, invalid bytes read as U+FFFD and lone surrogates as NULL."""
        nulls: list[object] = [None] * len(self.columns)
        invalid_bytes = False
        try:  # decoded here: json.loads would let UTF-8-encoded surrogates through (surrogatepass)
            obj = json.loads(raw.decode("utf-8"), parse_float=decimal.Decimal)
        except UnicodeDecodeError:
            invalid_bytes = not self.lenient
            text = raw.decode("utf-8", "replace" if self.lenient else "surrogateescape")
            try:
                obj = json.loads(text, parse_float=decimal.Decimal)
            except ValueError as exc:
                return nulls, (None, f"not valid JSON ({exc})")
        except ValueError as exc:
            return nulls, (None, f"not valid JSON ({exc})")
        if not isinstance(obj, dict):
            return nulls, (None, f"not a JSON object: {shown(raw)}")
        suspect = invalid_bytes or _SURROGATE_ESCAPE.search(raw) is not None
        lowered = {k.lower(): v for k, v in obj.items()}
        values: list[object] = []
        problem: tuple[str | None, str] | None = None
        invalid_text: tuple[str, str] | None = None  # the first column whose text is not valid UTF-8, why
        for n, column in enumerate(self.columns):
            value = lowered.get(column.name)
            if suspect and _has_surrogates(value):
                values.append(None)
                if invalid_text is None:
                    shown_value = shown(_SURROGATES.sub("\ufffd", str(value)))
                    invalid_text = (column.name, f"{shown_value} is not valid UTF-8")
                continue
            try:
                if n >= len(self.data):
                    values.append(_partition_text(value))
                else:
                    values.append(_value(value, column.type))
            except BadValue as exc:
                values.append(None)
                if problem is None and not self.lenient:
                    problem = (column.name, f"{exc} for {column.type}")
        if invalid_text is not None and not self.lenient:
            problem = invalid_text
        elif invalid_bytes:
            problem = (None, "record is not valid UTF-8")
        return values, problem


#: A JSON escape of a UTF-16 surrogate, which may stand alone (not encodable as UTF-8).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _has_surrogates(value: object) -> bool:
    """Whether a parsed JSON value holds a lone surrogate (invalid bytes, or an escape of one) anywhere."""
    if isinstance(value, str):
        return not value.isascii() and _SURROGATES.search(value) is not None
    if isinstance(value, list):
        return any(_has_surrogates(v) for v in value)
    if isinstance(value, dict):
        return any(_has_surrogates(k) or _has_surrogates(v) for k, v in value.items())
    return False


def _join_lines(records: pa.Array) -> bytes:
    """Every record followed by a newline, as one buffer built by Arrow (no Python loop over records)."""
    empty, newline = pa.scalar(b"", pa.large_binary()), pa.scalar(b"\n", pa.large_binary())
    lines = pc.binary_join_element_wise(records, empty, newline)
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)
    start, end = offsets[lines.offset], offsets[lines.offset + len(lines)]
    return lines.buffers()[2].to_pybytes()[start:end]


def _partition_text(value: object) -> str | None:
    """A partition value as the text Hive would convert: JSON scalars printed, objects and arrays unusable."""
    if value is None or isinstance(value, dict | list):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _value(value: object, t: HiveType) -> object:
    """A JSON value as the Python value of ``t.to_arrow()``; BadValue when its JSON type does not fit."""
    if value is None:
        return None
    name = t.name
    if name in ("tinyint", "smallint", "int", "bigint"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadValue(f"expected a JSON integer, got {shown(value)}")
        bits = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}[name]
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise BadValue(f"{value} is out of range")
        return value
    if name in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, int | decimal.Decimal):
            raise BadValue(f"expected a JSON number, got {shown(value)}")
        return float(value)
    if name == "boolean":
        if not isinstance(value, bool):
            raise BadValue(f"expected true or false, got {shown(value)}")
        return value
    if name == "decimal":
        if isinstance(value, bool) or not isinstance(value, int | decimal.Decimal | str):
            raise BadValue(f"expected a JSON number, got {shown(value)}")
        try:
            return round_decimal(decimal.Decimal(value), t)
        except decimal.InvalidOperation as exc:
            raise BadValue(f"cannot parse {shown(value)}") from exc
    if t.is_string_like or name in ("date", "timestamp", "binary"):
        if not isinstance(value, str):
            raise BadValue(f"expected a JSON string, got {shown(value)}")
        if name == "string":
            return value
        conv: Converted = convert(pa.array([value], pa.large_string()), t, JSON_TEXT)
        if conv.bad[0]:
            raise BadValue(f"cannot parse {shown(value)}")
        return conv.values[0].as_py()
    if name == "array":
        if not isinstance(value, list):
            raise BadValue(f"expected a JSON array, got {shown(value)}")
        return [_value(v, t.children[0]) for v in value]
    if name == "map":
        if not isinstance(value, dict):
            raise BadValue(f"expected a JSON object, got {shown(value)}")
        key_type = t.children[0]
        entries = []
        for k, v in value.items():
            key = convert(pa.array([k], pa.large_string()), key_type, JSON_TEXT)
            if key.bad[0] or not key.values[0].is_valid:
                raise BadValue(f"map key {shown(k)} is not a {key_type}")
            entries.append((key.values[0].as_py(), _value(v, t.children[1])))
        return entries
    if not isinstance(value, dict):
        raise BadValue(f"expected a JSON object, got {shown(value)}")
    lowered = {k.lower(): v for k, v in value.items()}
    return {n: _value(lowered.get(n), c) for n, c in zip(t.field_names, t.children, strict=True)}
