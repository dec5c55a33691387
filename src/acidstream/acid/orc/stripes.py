"""Encoded stripes ready to be appended to an event file, from one in-memory ORC file pyarrow wrote.

Three sources. :func:`from_events`: pyarrow encoded all six event columns; its stripes are taken as they are.
:func:`from_indexed_events` (files with a row index: bases, compactor output): pyarrow encoded only ``row``, and
we add the five ACID columns, with their row index, encoded by :mod:`rlev2`.
:func:`from_inserted_rows`: pyarrow encoded only the rows of an insert, uncompressed, and we add the five ACID
columns to each stripe and compress every stream. For an insert those columns are constants (operation,
originalTransaction, bucket, currentTransaction) and one counter (rowId): RLEv2 writes each as a few bytes per
512 rows, while pyarrow, asked to encode them, sets up and flushes a zlib stream for each of their ~15 streams
per file, which cost more than encoding a commit's small files' rows (and it does the same for every tiny
stream of the rows). pyarrow's root struct (its column 0) becomes our ``row`` column (6) and its columns move
up by six; rows with a struct column come nested in one struct column instead, which becomes ``row``, and
pyarrow's root is dropped. Decompressed, every data stream, encoding and statistic is byte for byte what ORC
C++ writes for the same events (tests compare them). Only for files that declare no row index (stride 0,
streaming deltas, as Hive's streaming writer makes them): the stripes have no index streams, and pyarrow's
one-entry row indexes (it refuses stride 0) are dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from acidstream.acid.orc.compression import CompressionKind, compress, decompress
from acidstream.acid.orc.events import RecordKey
from acidstream.acid.orc.protobuf import (
    VARINT,
    Message,
    decode_varint,
    encode_fields,
    encode_varint,
    zigzag_encode,
)
from acidstream.acid.orc.rlev2 import IntColumn, IntStats, int_column
from acidstream.acid.orc.tail import FOOTER, STRIPE, OrcTail, read_tail


@dataclass(frozen=True)
class EncodedEvents:
    """Stripes to append: their bytes, StripeInformation (offsets from the start of ``body``), encoded
    StripeStatistics, the chunk's encoded ColumnStatistics, and the last key of each stripe."""

    body: Sequence[bytes | pa.Buffer]
    stripes: list[Message]
    stripe_statistics: list[bytes]
    statistics: list[bytes]
    keys: list[RecordKey]
    rows: int


def from_events(data: pa.Buffer, key_at: Callable[[int], RecordKey]) -> EncodedEvents:
    """The stripes of a file of event rows; ``key_at(i)``: the key of the i-th event."""
    tail = read_tail(pa.BufferReader(data), data.size)
    stripes = tail.stripes
    if not stripes:
        return EncodedEvents((), [], [], [], [], 0)
    first = _uint(stripes[0], STRIPE.OFFSET)
    end = _stripe_end(stripes[-1])
    keys, rows = [], 0
    for s in stripes:
        s.set_uint(STRIPE.OFFSET, _uint(s, STRIPE.OFFSET) - first)
        rows += _uint(s, STRIPE.NUMBER_OF_ROWS)
        keys.append(key_at(rows - 1))
    return EncodedEvents(
        [data.slice(first, end - first)],
        stripes,
        tail.stripe_statistics,
        tail.footer.repeated_bytes(FOOTER.STATISTICS),
        keys,
        rows,
    )


def from_inserted_rows(
    data: pa.Buffer,
    write_id: int,
    bucket_property: int,
    first_row_id: int,
    *,
    compression: CompressionKind,
    block_size: int,
    nested: bool = False,
) -> EncodedEvents:
    """The stripes of an uncompressed file of rows (written without a row index stride), as insert events
    compressed with ``compression``.

    Row i of the file gets rowId ``first_row_id + i``, originalTransaction = currentTransaction = ``write_id``.
    pyarrow compressing the rows itself would set up a compressor for each of their streams, tiny ones
    included, which costs more than compressing the few streams worth it here. ``nested``: the file holds
    one struct column of the rows (pyarrow's column 1 is then ``row``, and its root is dropped), for rows with
    struct columns, which pyarrow misplaces at the top level when they are slices.
    """
    tail = _uncompressed_tail(data)
    stripes = tail.stripes
    return _spliced(
        data.to_pybytes(),
        stripes,
        tail.stripe_statistics or [b""] * len(stripes),
        tail.footer.repeated_bytes(FOOTER.STATISTICS),
        Insert(tail.num_rows, write_id, bucket_property, first_row_id),
        compression,
        block_size,
        1 if nested else 0,
    )


@dataclass(frozen=True)
class Insert:
    """One insert's rows in a file shared with others: how many, and the ACID values they get."""

    rows: int
    write_id: int
    bucket_property: int
    first_row_id: int


def from_shared_inserts(
    data: pa.Buffer,
    inserts: Sequence[Insert],
    *,
    compression: CompressionKind,
    block_size: int,
    nested: bool = False,
) -> list[EncodedEvents] | None:
    """:func:`from_inserted_rows` of each insert of a file that holds their rows one stripe each, in order
    (pyarrow cuts a stripe at the end of every write when its stripe size is tiny); None when its stripes do
    not match the inserts one to one, and the caller must encode them apart.

    A stripe is byte for byte what pyarrow writes for its rows alone, and a one-stripe file's statistics are
    its stripe's, so each insert's events are those of its own file — minus a pyarrow call and tail per file,
    which cost more than encoding the few rows of a file of a commit to many partitions.
    """
    tail = _uncompressed_tail(data)
    stripes, stripe_stats = tail.stripes, tail.stripe_statistics
    if len(stripes) != len(inserts) or len(stripe_stats) != len(inserts):
        return None
    if any(
        _uint(info, STRIPE.NUMBER_OF_ROWS) != ins.rows for info, ins in zip(stripes, inserts, strict=True)
    ):
        return None
    raw = data.to_pybytes()
    drop = 1 if nested else 0
    return [
        _spliced(
            raw,
            [info],
            [theirs],
            Message.decode(theirs).repeated_bytes(1),
            ins,
            compression,
            block_size,
            drop,
        )
        for info, theirs, ins in zip(stripes, stripe_stats, inserts, strict=True)
    ]


def _uncompressed_tail(data: pa.Buffer) -> OrcTail:
    tail = read_tail(pa.BufferReader(data), data.size)
    if tail.compression != CompressionKind.NONE:
        raise ValueError(f"rows must come uncompressed, not {tail.compression.name}")
    return tail


def _spliced(
    raw: bytes,
    infos: Sequence[Message],
    their_stripe_stats: Sequence[bytes],
    their_file_stats: Sequence[bytes],
    insert: Insert,
    compression: CompressionKind,
    block_size: int,
    drop: int,
) -> EncodedEvents:
    """``infos``' stripes of ``raw`` (an insert's rows, in order) with our ACID columns spliced in; their
    statistics (per stripe and for the whole insert) gain ours, and lose their first ``drop`` columns."""
    write_id, bucket_property, first_row_id = insert.write_id, insert.bucket_property, insert.first_row_id
    body: list[bytes] = []
    stripes: list[Message] = []
    stripe_stats: list[bytes] = []
    keys: list[RecordKey] = []
    offset = rows = 0
    stats: list[bytes] = []
    for info, theirs in zip(infos, their_stripe_stats, strict=True):
        n = _uint(info, STRIPE.NUMBER_OF_ROWS)
        ours = _insert_columns(write_id, bucket_property, first_row_id + rows)
        stats = [_struct_stats(n), *(_acid_statistics(c, n) for c in ours)]
        streams = [_acid_stream(c, n, compression, block_size) for c in ours]
        stripe, info = _splice_stripe(raw, info, compression, block_size, streams, drop)
        info.set_uint(STRIPE.OFFSET, offset)
        body.append(stripe)
        stripes.append(info)
        if drop:  # StripeStatistics: repeated colStats (1), one per column
            theirs = b"".join(_ld(0x0A, c) for c in Message.decode(theirs).repeated_bytes(1)[drop:])
        stripe_stats.append(b"".join([_ld(0x0A, s) for s in stats]) + theirs)
        offset += len(stripe)
        rows += n
        keys.append((write_id, bucket_property, first_row_id + rows - 1))
    if len(stripes) > 1:  # else the one stripe's statistics are the chunk's
        stats = [_struct_stats(rows)]
        stats += [_acid_statistics(c, rows) for c in _insert_columns(write_id, bucket_property, first_row_id)]
    return EncodedEvents(body, stripes, stripe_stats, stats + list(their_file_stats[drop:]), keys, rows)


def from_indexed_events(
    data: pa.Buffer,
    acid: Sequence[npt.NDArray[Any]],
    key_at: Callable[[int], RecordKey],
    *,
    stride: int,
    flat: bool = False,
) -> EncodedEvents:
    """Events of a file with a row index, from a file pyarrow wrote (compressed, with that row index stride)
    for their ``row`` column alone, and ``acid``: the values of the five ACID columns, which we encode
    (:mod:`rlev2`) into each of its stripes. ``flat``: pyarrow's file holds the columns of ``row`` themselves,
    its root standing for ``row`` as well as for the events' root (both structs without nulls, streams
    alike); pyarrow spends on a struct column of its own a per-row loop that way avoided.

    pyarrow would spend a fifth of its time on a compacted narrow table encoding those columns, which are
    mostly constant (operation, bucket), a copy of another (currentTransaction, in every insert event), long
    runs (originalTransaction) or counters with gaps (rowId). Decompressed, every stream, encoding, row index
    and statistic is byte for byte what ORC C++ writes for the six columns (tests compare them).
    """
    tail = read_tail(pa.BufferReader(data), data.size)
    kind, block = tail.compression, tail.block_size
    acid = [np.asarray(a, dtype=np.int64) for a in acid]
    # an insert event's currentTransaction is its originalTransaction: encoded once
    copies = [0, 1, 2, 3, 1 if np.array_equal(acid[4], acid[1]) else 4]
    row_at = 0 if flat else 1  # pyarrow's column that is row
    body: list[bytes] = []
    stripes: list[Message] = []
    stripe_stats: list[bytes] = []
    keys: list[RecordKey] = []
    totals: list[IntStats] | None = None
    offset = rows = 0
    raw = memoryview(data)
    for info, theirs in zip(tail.stripes, tail.stripe_statistics, strict=True):
        n = _uint(info, STRIPE.NUMBER_OF_ROWS)
        ours: list[IntColumn] = []
        for i, j in enumerate(copies):
            ours.append(ours[j] if j < i else int_column(acid[i][rows : rows + n], stride, kind, block))
        stripe, out = _indexed_stripe(raw, info, ours, row_at, kind, block)
        out.set_uint(STRIPE.OFFSET, offset)
        body.append(stripe)
        stripes.append(out)
        their_stats = Message.decode(theirs).repeated_bytes(1)
        stripe_stats.append(
            b"".join(_ld(0x0A, c) for c in _with_ours(their_stats, [c.stats for c in ours], row_at))
        )
        if totals is None:
            totals = [c.stats for c in ours]
        else:
            totals = [t.merge(c.stats) for t, c in zip(totals, ours, strict=True)]
        offset += len(stripe)
        rows += n
        keys.append(key_at(rows - 1))
    file_stats = tail.footer.repeated_bytes(FOOTER.STATISTICS)
    statistics = _with_ours(file_stats, totals, row_at) if totals is not None else []
    return EncodedEvents(body, stripes, stripe_stats, statistics, keys, rows)


def _with_ours(theirs: Sequence[bytes], ours: Sequence[IntStats], row_at: int) -> list[bytes]:
    """Statistics of the event columns: pyarrow's root, our five, then pyarrow's ``row`` and its children."""
    return [theirs[0], *(s.encode() for s in ours), *theirs[row_at:]]


def _indexed_stripe(
    raw: memoryview,
    info: Message,
    ours: Sequence[IntColumn],
    row_at: int,
    kind: CompressionKind,
    block: int,
) -> tuple[bytes, Message]:
    """One stripe of pyarrow's file as a stripe of the event file: index streams, then data streams, each in
    event column order (pyarrow's root, our five columns, pyarrow's ``row`` (column ``row_at``) and its
    children), their encodings, and the stripe footer's other fields as pyarrow wrote them."""
    streams, encodings, other = stripe_parts(raw, info, kind, block)
    index: dict[int, list[tuple[int, bytes | memoryview]]] = {}
    data: dict[int, list[tuple[int, bytes | memoryview]]] = {}
    for stream_kind, column, stream in streams:
        (index if stream_kind in _INDEX_KINDS else data).setdefault(column, []).append((stream_kind, stream))
    listed: list[bytes] = []
    index_parts: list[bytes | memoryview] = []
    data_parts: list[bytes | memoryview] = []
    for area, parts in ((index, index_parts), (data, data_parts)):
        for event_column in range(1 + len(ours) + len(encodings) - row_at):
            moved: list[tuple[int, bytes | memoryview]]
            if 1 <= event_column <= len(ours):
                acid = ours[event_column - 1]
                moved = [(_ROW_INDEX, acid.index)] if area is index else [(_DATA, acid.data)]
            else:
                theirs = event_column - 1 - len(ours) + row_at if event_column else 0
                moved = area.get(theirs, [])
            for stream_kind, stream in moved:
                listed.append(_stream(stream_kind, event_column, len(stream)))
                parts.append(stream)
    new_footer = _frame(
        kind,
        b"".join(
            (
                *(_ld(0x0A, s) for s in listed),
                _ld(0x12, encodings[0]),
                *(_ld(0x12, _DIRECT_V2_ENCODING) for _ in ours),
                *(_ld(0x12, e) for e in encodings[row_at:]),
                encode_fields(other),
            )
        ),
        block,
    )
    index_part, data_part = b"".join(index_parts), b"".join(data_parts)
    out = info.copy()
    out.set_uint(STRIPE.INDEX_LENGTH, len(index_part))
    out.set_uint(STRIPE.DATA_LENGTH, len(data_part))
    out.set_uint(STRIPE.FOOTER_LENGTH, len(new_footer))
    return index_part + data_part + new_footer, out


_DIRECT_V2_ENCODING = encode_fields([(1, VARINT, 2), (2, VARINT, 0)])


StreamPart = tuple[int, int, bytes | memoryview]  # kind, column, bytes


def stripe_parts(
    raw: bytes | memoryview, info: Message, compression: CompressionKind, block: int
) -> tuple[list[StreamPart], list[bytes], list[tuple[int, int, int | bytes]]]:
    """A stripe of ``raw`` taken apart: its streams in file order, its column encodings (encoded) and its
    footer's other fields."""
    fields = {number: value for number, _, value in info.fields}
    start, index_len, data_len, footer_len = (
        int(fields.get(k, 0))
        for k in (STRIPE.OFFSET, STRIPE.INDEX_LENGTH, STRIPE.DATA_LENGTH, STRIPE.FOOTER_LENGTH)
    )
    footer_at = start + index_len + data_len
    footer = Message.decode(decompress(compression, raw[footer_at : footer_at + footer_len], block))
    streams: list[StreamPart] = []
    encodings: list[bytes] = []
    other: list[tuple[int, int, int | bytes]] = []
    pos = start
    for field in footer.fields:
        number, value = field[0], field[2]
        if number == 1:
            assert isinstance(value, bytes)
            kind, column, length = _stream_fields(value)
            streams.append((kind, column, raw[pos : pos + length]))
            pos += length
        elif number == 2:
            assert isinstance(value, bytes)
            encodings.append(value)
        else:
            other.append(field)
    return streams, encodings, other


# --- one stripe ---------------------------------------------------------------------------------------

#: ORC's Stream kinds and ColumnEncoding kinds that matter here.
_DATA, _ROW_INDEX = 1, 6
_INDEX_KINDS = frozenset({_ROW_INDEX, 7, 8})  # ROW_INDEX, BLOOM_FILTER, BLOOM_FILTER_UTF8
_DIRECT, _DIRECT_V2 = 0, 2
#: Our columns: 0 (the event struct), 1..5 (the ACID ints); pyarrow's columns move up by this much.
SHIFT = 6
#: Streams shorter than this are stored as they are (see ``compress``'s ``smallest``): deflate cannot make a
#: few bytes much shorter, and setting it up costs more than everything else we do per stream.
_SMALLEST_COMPRESSED = 128


def _splice_stripe(
    raw: bytes,
    info: Message,
    kind: CompressionKind,
    block: int,
    ours: Sequence[bytes],
    drop: int,
) -> tuple[bytes, Message]:
    """Our data streams (``ours``, framed), then theirs (each compressed now), and a footer listing them in
    that order; their first ``drop`` columns are left out. No index streams: the file declares no row index
    (stride 0), as Hive's streaming writer does, so pyarrow's are dropped."""
    streams, encodings, other = stripe_parts(raw, info, CompressionKind.NONE, block)
    parts = list(ours)
    listed = [_DATA_STREAM[col] + encode_varint(len(b)) for col, b in enumerate(parts, start=1)]
    for stream_kind, column, stream in streams:
        if stream_kind not in _INDEX_KINDS and column >= drop:
            framed = _frame(kind, bytes(stream), block)
            parts.append(framed)
            listed.append(_stream(stream_kind, column + SHIFT - drop, len(framed)))
    new_footer = _frame(
        kind,
        b"".join([_ld(0x0A, s) for s in listed]) + _footer_rest(tuple(encodings), tuple(other), drop),
        block,
    )
    data_part = b"".join(parts)
    out = info.copy()
    out.set_uint(STRIPE.INDEX_LENGTH, 0)
    out.set_uint(STRIPE.DATA_LENGTH, len(data_part))
    out.set_uint(STRIPE.FOOTER_LENGTH, len(new_footer))
    return data_part + new_footer, out


@lru_cache(maxsize=64)
def _footer_rest(
    encodings: tuple[bytes, ...], other: tuple[tuple[int, int, int | bytes], ...], drop: int
) -> bytes:
    """A spliced stripe footer after its streams: our columns' encodings, theirs but the first ``drop``, and
    the footer's other fields. The same for every stripe of one schema (made once, not per tiny file)."""
    return b"".join((_OUR_ENCODINGS, *(_ld(0x12, e) for e in encodings[drop:]), encode_fields(other)))


def _stream_fields(stream: bytes) -> tuple[int, int, int]:
    """A Stream message's kind, column and length."""
    if len(stream) > 4 and stream[0] == 0x08 and stream[1] < 0x80 and stream[2] == 0x10 and stream[3] < 0x80:
        kind, column = stream[1], stream[3]  # the form ORC writers use: one byte each, then the length
        if stream[4] == 0x18:
            length, end = decode_varint(stream, 5)
            if end == len(stream):
                return kind, column, length
    m = Message.decode(stream)
    return _uint(m, 1), _uint(m, 2), _uint(m, 3)


def _ld(tag: int, payload: bytes) -> bytes:
    """A length-delimited field whose tag byte (field number < 16) is ``tag``."""
    return bytes((tag,)) + encode_varint(len(payload)) + payload


#: The stripe footer's ColumnEncoding fields for our columns: the struct DIRECT, the five ints DIRECT_V2.
_OUR_ENCODINGS = b"".join(
    _ld(0x12, encode_fields([(1, VARINT, k), (2, VARINT, 0)])) for k in (_DIRECT, *[_DIRECT_V2] * 5)
)


@lru_cache(maxsize=1024)
def _stream_head(kind: int, column: int) -> bytes:
    """A Stream message (kind, column, length) up to its length."""
    return b"\x08" + encode_varint(kind) + b"\x10" + encode_varint(column) + b"\x18"


def _stream(kind: int, column: int, length: int) -> bytes:
    return _stream_head(kind, column) + encode_varint(length)


#: Our streams' heads: DATA of columns 1..5 (made once, not per stripe).
_DATA_STREAM = [_stream_head(_DATA, c) for c in range(SHIFT)]


def _frame(kind: CompressionKind, raw: bytes, block: int) -> bytes:
    return compress(kind, raw, block, _SMALLEST_COMPRESSED)


#: ColumnStatistics fields: numberOfValues (1), intStatistics (2), hasNull (10) = false.
_VALUES, _INT_STATS, _NO_NULLS = b"\x08", 0x12, b"\x50\x00"


def _struct_stats(n: int) -> bytes:
    return _VALUES + encode_varint(n) + _NO_NULLS


def _int_stats(n: int, low: int, high: int, total: int) -> bytes:
    """ColumnStatistics of n non-null ints; an int64 overflow of the sum leaves it out (as ORC does)."""
    ints = b"\x08" + encode_varint(zigzag_encode(low)) + b"\x10" + encode_varint(zigzag_encode(high))
    if _I64_MIN <= total <= _I64_MAX:
        ints += b"\x18" + encode_varint(zigzag_encode(total))
    return _VALUES + encode_varint(n) + _ld(_INT_STATS, ints) + _NO_NULLS


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


# --- the ACID columns of an insert ----------------------------------------------------------------------


class _AcidColumn(NamedTuple):
    """An ACID column of an insert: ``value`` in every row, or counting up from it (rowId)."""

    counting: bool
    value: int


def _insert_columns(write_id: int, bucket_property: int, first_row_id: int) -> tuple[_AcidColumn, ...]:
    """operation, originalTransaction, bucket, rowId, currentTransaction."""
    wid = _AcidColumn(False, write_id)
    return (
        _AcidColumn(False, 0),
        wid,
        _AcidColumn(False, bucket_property),
        _AcidColumn(True, first_row_id),
        wid,
    )


# A commit's files repeat a few (column, rows) pairs: the same write id and rows counted from 0 in every file,
# five bucket properties, row counts close to each other. Cached, each costs a lookup instead of its encoding.
_CACHED_COLUMNS = 4096


@lru_cache(maxsize=_CACHED_COLUMNS)
def _acid_stream(column: _AcidColumn, n: int, kind: CompressionKind, block: int) -> bytes:
    """The column's DATA stream for ``n`` rows, RLEv2-encoded and framed."""
    return _frame(
        kind, _counter_rle(column.value, n) if column.counting else _constant_rle(column.value, n), block
    )


@lru_cache(maxsize=_CACHED_COLUMNS)
def _acid_statistics(column: _AcidColumn, n: int) -> bytes:
    first = column.value
    if column.counting:
        return _int_stats(n, first, first + n - 1, n * first + n * (n - 1) // 2)
    return _int_stats(n, first, first, first * n)


def _constant_rle(value: int, n: int) -> bytes:
    full, rest = divmod(n, RUN)
    return _delta(value, 0, RUN) * full + (_constant_tail(value, rest) if rest else b"")


def _counter_rle(first: int, n: int) -> bytes:
    full, rest = divmod(n, RUN)
    runs = [_delta(first + i * RUN, 1, RUN) for i in range(full)]
    if rest:
        start = first + full * RUN
        runs.append(_delta(start, 1, rest) if rest >= 4 else _direct(range(start, start + rest)))
    return b"".join(runs)


# --- RLEv2, as ORC C++ chooses its sub-encodings for these sequences -----------------------------------

#: RLEv2's longest run.
RUN = 512
#: Bit widths DIRECT uses with aligned bit packing (ORC C++ with compression strategy SPEED, ours).
_ALIGNED = (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)
_WIDTH_CODE = {
    **{w: w - 1 for w in range(1, 25)},
    26: 24,
    28: 25,
    30: 26,
    32: 27,
    40: 28,
    48: 29,
    56: 30,
    64: 31,
}


def _constant_tail(value: int, count: int) -> bytes:
    """A run of 1..511 equal values: DELTA from 11 on, SHORT_REPEAT from 3, DIRECT below."""
    if count > 10:
        return _delta(value, 0, count)
    if count >= 3:
        z = zigzag_encode(value)
        width = max(1, (z.bit_length() + 7) // 8)
        return bytes([((width - 1) << 3) | (count - 3)]) + z.to_bytes(width, "big")
    return _direct([value] * count)


def _delta(first: int, step: int, count: int) -> bytes:
    """DELTA with a fixed delta (bit width 0): header, base and delta as signed varints."""
    header = (0b11 << 14) | (count - 1)
    return (
        header.to_bytes(2, "big") + encode_varint(zigzag_encode(first)) + encode_varint(zigzag_encode(step))
    )


def _direct(values: Sequence[int]) -> bytes:
    """DIRECT: zigzag values bit-packed big-endian at the smallest aligned width."""
    zz = [zigzag_encode(v) for v in values]
    bits = max(1, max(zz).bit_length())
    width = next(w for w in _ALIGNED if w >= bits)
    packed = 0
    for z in zz:
        packed = (packed << width) | z
    total = width * len(zz)
    pad = -total % 8
    header = (0b01 << 14) | (_WIDTH_CODE[width] << 9) | (len(zz) - 1)
    return header.to_bytes(2, "big") + (packed << pad).to_bytes((total + pad) // 8, "big")


def _uint(m: Message, number: int) -> int:
    return m.uint(number, 0) or 0


def _stripe_end(s: Message) -> int:
    return sum(
        _uint(s, k) for k in (STRIPE.OFFSET, STRIPE.INDEX_LENGTH, STRIPE.DATA_LENGTH, STRIPE.FOOTER_LENGTH)
    )
