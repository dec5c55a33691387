"""Timestamps before 1970 with a fraction of a second, stored as ORC's Java writer stores them (docs/format.md,
Event files: timestamps).

ORC stores a timestamp as seconds since 2015-01-01 in the writer's time zone (DATA, signed RLEv2) and its
nanoseconds (SECONDARY, unsigned, trailing zeros folded). ORC's Java writer takes the seconds of a value before
1970 with a fraction of at least 1 ms one second *later* than its floor (it truncates milliseconds toward
zero), and every reader (orc-core, ORC C++ since ORC-763, so Hive and pyarrow alike) takes that second back:
a negative stored second with more than 999,999 nanoseconds means one second less. pyarrow 26's ORC adapter
instead splits a value by truncating division, so such a value gets negative nanoseconds, which Hive reads as
invalid ("nanos > 999999999 or < 0").

So such a column goes to pyarrow as the values' fractions alone (non-negative: its PRESENT and SECONDARY
streams are then right), and its DATA stream is encoded here (:mod:`rlev2`) from the true values, with its
statistics; a file holding one declares no row index (its index positions into DATA are pyarrow's), as every
streaming delta does. One window stays unwritable, for Hive's writer too: from 1969-12-31 23:59:59.001 to
23:59:59.999999999 the stored second would be 0, which readers do not adjust (ORC-763's "sql.Timestamp bug"),
so they would read the value one second later: refused.

Inside lists and maps a column's DATA stream holds the non-null values of the lists' (maps') elements in order,
of the rows the stripe holds: so the lists are handed to pyarrow rebuilt from their elements as their offsets
(slices, null lists) select them, and the DATA stream of each stripe is encoded from the true values of its
rows' elements.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from acidstream.acid.orc.compression import CompressionKind, compress
from acidstream.acid.orc.protobuf import LENGTH_DELIMITED, VARINT, Message, encode_fields, encode_varint
from acidstream.acid.orc.rlev2 import encode
from acidstream.acid.orc.stripes import stripe_parts
from acidstream.acid.orc.tail import FOOTER, MAGIC, STRIPE, PostscriptTemplate, build_tail, read_tail

SECOND = 1_000_000_000
_NANOS_PER_UNIT = {"s": SECOND, "ms": 1_000_000, "us": 1_000, "ns": 1}
#: 2015-01-01 00:00:00 UTC in seconds: ORC's timestamp base, for the UTC/GMT writer zone pyarrow writes.
ORC_EPOCH = 1_420_070_400
_UTC_ZONES = (b"UTC", b"GMT", b"")
#: ColumnStatistics' timestampStatistics field, and the stripe footer's writerTimezone.
_TIMESTAMP_STATISTICS = 9
_WRITER_TIMEZONE = 3
_DATA_STREAM = 1
_SMALLEST_COMPRESSED = 128  # as stripes frames its streams


def has_timestamp(t: pa.DataType) -> bool:
    if pa.types.is_timestamp(t):
        return True
    if pa.types.is_struct(t):
        return any(has_timestamp(f.type) for f in t)
    if pa.types.is_map(t):
        return has_timestamp(t.key_type) or has_timestamp(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return has_timestamp(t.value_type)
    return False


def _nanos(arr: pa.Array) -> npt.NDArray[np.int64]:
    """A timestamp array's values in nanoseconds (nulls as 0)."""
    values = arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return values * _NANOS_PER_UNIT[arr.type.unit]


def _before_1970_with_fraction(arr: pa.Array) -> npt.NDArray[np.bool_]:
    values = _nanos(arr)
    return (values < 0) & (values % SECOND != 0) & arr.is_valid().to_numpy(zero_copy_only=False)


def check_writable(arr: pa.Array, name: str) -> bool:
    """Whether ``arr`` holds a timestamp before 1970 with a fraction of a second (anywhere inside), which
    :func:`prepare` then takes care of. Raises ValueError for values no ORC reader of Java reads back: the
    second before 1970 with a fraction of 1 ms or more."""
    t = arr.type
    if not has_timestamp(t):
        return False
    if pa.types.is_timestamp(t):
        bad = _before_1970_with_fraction(arr)
        if not bad.any():
            return False
        values = _nanos(arr)
        window = bad & (values >= -SECOND) & (values % SECOND > 999_999)
        if window.any():
            raise ValueError(
                f"column {name}: timestamp {arr[int(np.argmax(window))]} is in the last second before 1970 "
                "with a fraction of 1 ms or more, which ORC's readers (Hive's) cannot read back as written; "
                "round it to whole seconds"
            )
        return True
    if pa.types.is_struct(t):
        found = False
        for f, child in zip(t, arr.flatten(), strict=True):
            found |= check_writable(child, f"{name}.{f.name}")
        return found
    elements = _elements(arr)
    if pa.types.is_map(t):
        keys = check_writable(elements.take(arr.keys), f"{name}.key")
        return check_writable(elements.take(arr.items), f"{name}.value") or keys
    return check_writable(elements.take(arr.values), f"{name}[]")


@dataclass(frozen=True)
class _Elements:
    """The elements a list (or map) array's rows hold, as its offsets select them (a slice's rows, none of a
    null list's): where they are in the child arrays, and each one's row."""

    indices: npt.NDArray[np.int64]
    rows: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.int64]  # each row's first element, from 0 (nulls: none)
    valid: npt.NDArray[np.bool_]

    def take(self, child: pa.Array) -> pa.Array:
        return child.take(pa.array(self.indices, pa.int64()))


def _elements(arr: pa.Array) -> _Elements:
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    bounds = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = np.where(valid, np.diff(bounds), 0)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    rows = np.repeat(np.arange(len(arr), dtype=np.int64), lengths)
    indices = np.arange(offsets[-1], dtype=np.int64) - offsets[rows] + bounds[rows]
    return _Elements(indices, rows, offsets, valid)


@dataclass(frozen=True)
class Repair:
    """The true values of the columns :func:`prepare` changed, by ORC column id: each column's non-null
    values in nanoseconds and, per row of the table, how many of them come before it."""

    values: dict[int, npt.NDArray[np.int64]]
    before_row: dict[int, npt.NDArray[np.int64]]


def prepare(table: pa.Table) -> tuple[pa.Table, Repair | None]:
    """``table`` as pyarrow is to encode it: each timestamp before 1970 with a fraction replaced by its
    fraction alone (lists and maps holding one rebuilt from their elements); with what :func:`repair` needs,
    or None if nothing changed."""
    if not any(has_timestamp(f.type) for f in table.schema):
        return table, None
    repair = Repair({}, {})
    columns = []
    column_id = 1
    for field, column in zip(table.schema, table.columns, strict=True):
        arr = column.combine_chunks() if has_timestamp(field.type) else column
        if isinstance(arr, pa.Array):
            rows = np.arange(len(arr), dtype=np.int64)
            arr = _prepared(arr, column_id, repair, rows, table.num_rows)
        columns.append(arr)
        column_id += _column_count(field.type)
    if not repair.values:
        return table, None
    return pa.Table.from_arrays(columns, schema=table.schema), repair


def _column_count(t: pa.DataType) -> int:
    """ORC columns a type takes: itself and its children (pre-order ids)."""
    if pa.types.is_struct(t):
        return 1 + sum(_column_count(f.type) for f in t)
    if pa.types.is_map(t):
        return 1 + _column_count(t.key_type) + _column_count(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return 1 + _column_count(t.value_type)
    return 1


def _prepared(
    arr: pa.Array, column_id: int, repair: Repair, rows: npt.NDArray[np.int64], table_rows: int
) -> pa.Array:
    """``arr`` prepared; ``rows``: the table's row each of its values belongs to (non-decreasing)."""
    t = arr.type
    if pa.types.is_timestamp(t):
        bad = _before_1970_with_fraction(arr)
        if not bad.any():
            return arr
        values = _nanos(arr)
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        repair.values[column_id] = values[valid]
        repair.before_row[column_id] = np.searchsorted(rows[valid], np.arange(table_rows + 1)).astype(
            np.int64
        )
        fractions = np.where(bad, values % SECOND, values) // _NANOS_PER_UNIT[t.unit]
        return pa.array(fractions, t, mask=~valid)
    if not has_timestamp(t):
        return arr
    if pa.types.is_struct(t):
        children = []
        child_id = column_id + 1
        for f, child in zip(t, arr.flatten(), strict=True):  # flatten: the struct's nulls in every child
            children.append(_prepared(child, child_id, repair, rows, table_rows))
            child_id += _column_count(f.type)
        return pa.StructArray.from_arrays(children, fields=list(t), mask=arr.is_null())
    elements = _elements(arr)
    element_rows = rows[elements.rows]
    offsets = pa.array(elements.offsets, pa.int64() if pa.types.is_large_list(t) else pa.int32())
    mask = pa.array(~elements.valid)
    if pa.types.is_map(t):
        key_id = column_id + 1
        keys = _prepared(elements.take(arr.keys), key_id, repair, element_rows, table_rows)
        item_id = key_id + _column_count(t.key_type)
        items = _prepared(elements.take(arr.items), item_id, repair, element_rows, table_rows)
        return pa.MapArray.from_arrays(offsets, keys, items, type=t, mask=mask)
    values = _prepared(elements.take(arr.values), column_id + 1, repair, element_rows, table_rows)
    cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
    return cls.from_arrays(offsets, values, type=t, mask=mask)


def repair(data: pa.Buffer, fix: Repair) -> pa.Buffer:
    """pyarrow's file of a :func:`prepare`-d table with the changed columns' DATA streams encoded from the
    true values, and their statistics (stripe and file) computed from them."""
    tail = read_tail(pa.BufferReader(data), data.size)
    kind, block = tail.compression, tail.block_size
    raw = memoryview(data)
    body: list[bytes] = [MAGIC]
    infos: list[bytes] = []
    stripe_stats: list[bytes] = []
    offset, rows = len(MAGIC), 0
    for info, theirs in zip(tail.stripes, tail.stripe_statistics, strict=True):
        n = info.uint(STRIPE.NUMBER_OF_ROWS, 0) or 0
        stripe, stripe_info = _repaired_stripe(raw, info, kind, block, fix, rows, rows + n)
        stripe_info.set_uint(STRIPE.OFFSET, offset)
        body.append(stripe)
        infos.append(stripe_info.encode())
        stats = Message.decode(theirs).repeated_bytes(1)
        for column, values in fix.values.items():
            before = fix.before_row[column]
            stats[column] = _with_timestamp_statistics(stats[column], values[before[rows] : before[rows + n]])
        stripe_stats.append(encode_fields([(1, LENGTH_DELIMITED, s) for s in stats]))
        offset += len(stripe)
        rows += n
    footer = tail.footer.copy()
    footer.set_uint(FOOTER.CONTENT_LENGTH, offset - len(MAGIC))
    footer.set_repeated(FOOTER.STRIPES, infos)
    statistics = footer.repeated_bytes(FOOTER.STATISTICS)
    for column, values in fix.values.items():
        statistics[column] = _with_timestamp_statistics(statistics[column], values)
    footer.set_repeated(FOOTER.STATISTICS, statistics)
    metadata = encode_fields([(1, LENGTH_DELIMITED, s) for s in stripe_stats])
    body.append(build_tail(PostscriptTemplate(tail.postscript), footer.encode(), metadata))
    return pa.py_buffer(b"".join(body))


def _repaired_stripe(
    raw: memoryview, info: Message, kind: CompressionKind, block: int, fix: Repair, first: int, end: int
) -> tuple[bytes, Message]:
    """One stripe with the changed columns' DATA streams encoded from their true values (rows [first, end))."""
    streams, encodings, other = stripe_parts(raw, info, kind, block)
    zone = next((v for n, _, v in other if n == _WRITER_TIMEZONE), b"")
    if zone not in _UTC_ZONES:
        raise AssertionError(f"pyarrow wrote timestamps in time zone {zone!r}, not UTC")
    index_length = data_length = 0
    parts: list[bytes | memoryview] = []
    listed: list[bytes] = []
    for stream_kind, column, stream in streams:
        if stream_kind == _DATA_STREAM and column in fix.values:
            before = fix.before_row[column]
            values = fix.values[column][before[first] : before[end]]
            stream = compress(kind, _data_stream(values), block, _SMALLEST_COMPRESSED)
        parts.append(stream)
        listed.append(
            encode_fields([(1, VARINT, stream_kind), (2, VARINT, column), (3, VARINT, len(stream))])
        )
        if stream_kind in (6, 7, 8):  # index streams: ROW_INDEX, BLOOM_FILTER(_UTF8), listed first
            index_length += len(stream)
        else:
            data_length += len(stream)
    footer = compress(
        kind,
        b"".join(
            (
                *(b"\x0a" + encode_varint(len(s)) + s for s in listed),
                *(b"\x12" + encode_varint(len(e)) + e for e in encodings),
                encode_fields(other),
            )
        ),
        block,
        _SMALLEST_COMPRESSED,
    )
    out = info.copy()
    out.set_uint(STRIPE.INDEX_LENGTH, index_length)
    out.set_uint(STRIPE.DATA_LENGTH, data_length)
    out.set_uint(STRIPE.FOOTER_LENGTH, len(footer))
    return b"".join((*parts, footer)), out


def stored_seconds(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The seconds ORC's Java writer stores for ``values`` (nanoseconds since 1970), before the 2015 base is
    taken off: the floor, one more for a value before 1970 with a fraction over 999,999 ns."""
    seconds, fraction = np.divmod(values, SECOND)
    return seconds + ((seconds < 0) & (fraction > 999_999))


def _data_stream(values: npt.NDArray[np.int64]) -> bytes:
    if not len(values):
        return b""
    return encode(stored_seconds(values) - ORC_EPOCH).data


def _with_timestamp_statistics(encoded: bytes, values: npt.NDArray[np.int64]) -> bytes:
    """ColumnStatistics with its timestampStatistics made from ``values`` (as ORC C++ writes them: UTC
    milliseconds and their sub-millisecond nanoseconds + 1 where not 0)."""
    stats = Message.decode(encoded)
    if not len(values):
        return encoded
    ts = Message()
    low, high = int(values.min()), int(values.max())
    ts.set_sint(3, low // 1_000_000).set_sint(4, high // 1_000_000)
    if low % 1_000_000:
        ts.set_uint(5, low % 1_000_000 + 1)
    if high % 1_000_000:
        ts.set_uint(6, high % 1_000_000 + 1)
    stats.set_message(_TIMESTAMP_STATISTICS, ts)
    return stats.encode()
