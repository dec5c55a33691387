"""Events of files with a row index (bases, compactor output): pyarrow encodes ``row``, we the five ACID columns
(stripes.from_indexed_events, rlev2), against pyarrow encoding all six.

The claim: stream for stream (data and row index, decompressed, in the same order), encoding for encoding and
statistic for statistic, the file holds what ORC C++ writes for the same events.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as po
import pytest
from orcfiles import pyarrow_column
from test_orc_stripes import anatomy

from acidstream.acid.codec import BucketCodec
from acidstream.acid.orc import AcidWriter, WriterOptions, event_schema, read_events
from acidstream.acid.orc import writer as writer_module
from acidstream.acid.orc.compression import CompressionKind, decompress
from acidstream.acid.orc.protobuf import Message, decode_varint
from acidstream.acid.orc.rlev2 import constant_column
from acidstream.acid.orc.tail import read_tail
from acidstream.acid.types import Column, parse_columns
from conftest import ALL_TYPES, all_type_rows

COLS = parse_columns("id int, msg string")
B1 = BucketCodec.V1.encode(1, 0)
BASE = WriterOptions(is_base=True, streaming_optimizations=False)


def compacted_events(columns: list[Column], n: int, seed: int = 0) -> pa.Table:
    """What a major compaction writes: runs of write ids, their rowIds with gaps (deleted rows), one bucket."""
    rng = np.random.default_rng(seed)
    kept = np.sort(rng.choice(2 * n, n, replace=False))
    write_ids = 1 + kept // max(1, (2 * n) // 7)  # 7 write ids
    schema = event_schema(pa.struct([c.to_arrow() for c in columns]))
    rows = all_type_rows(columns, n) if columns is not COLS else None
    if rows is None:
        rows = pa.table({"id": pa.array(kept.astype(np.int32)), "msg": [f"m{i}" for i in kept]})
    row = pa.StructArray.from_arrays(
        [c.combine_chunks() for c in rows.columns], fields=list(schema.field("row").type)
    )
    return pa.table(
        [
            pa.array(np.zeros(n, np.int32)),
            pa.array(write_ids.astype(np.int64)),
            pa.array(np.full(n, B1, np.int32)),
            pa.array(kept.astype(np.int64)),
            pa.array(write_ids.astype(np.int64)),
            row,
        ],
        schema=schema,
    )


def index_streams(path: str) -> list[object]:
    """Per stripe: the (kind, column) of every stream in order, then each ROW_INDEX stream decompressed."""
    data = Path(path).read_bytes()
    tail = read_tail(pa.BufferReader(data), len(data))
    out: list[object] = []
    for info in tail.stripes:
        off, il, dl, fl = (info.uint(k, 0) or 0 for k in (1, 2, 3, 4))
        footer = Message.decode(
            decompress(tail.compression, data[off + il + dl : off + il + dl + fl], tail.block_size)
        )
        pos, order = off, []
        for s in footer.messages(1):
            kind, col, length = (s.uint(f, 0) or 0 for f in (1, 2, 3))
            order.append((kind, col))
            if kind == 6:
                out.append((col, decompress(tail.compression, data[pos : pos + length], tail.block_size)))
            pos += length
        out.append(order)
    return out


def assert_as_orc_cpp(
    tmp_path: Path, columns: list[Column], events: pa.Table, options: WriterOptions
) -> None:
    ours, ref = str(tmp_path / "base_1" / "bucket_00001"), str(tmp_path / "ref.orc")
    w = AcidWriter(pafs.LocalFileSystem(), ours, columns, options=options, side_file=False)
    w.write_events(events)
    w.close()
    back = read_events(pafs.LocalFileSystem(), ours)
    assert back.equals(events.cast(back.schema))
    po.write_table(back, ref, **options.pyarrow_kwargs())  # type: ignore[arg-type]
    assert anatomy(ours) == anatomy(ref)
    assert index_streams(ours) == index_streams(ref)


@pytest.fixture
def encoded(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The columns of every table the writer has pyarrow encode."""
    calls: list[list[str]] = []
    real = writer_module._encode

    def watched(table: pa.Table, options: WriterOptions, **kw: bool) -> pa.Buffer:
        calls.append(table.column_names)
        return real(table, options, **kw)

    monkeypatch.setattr(writer_module, "_encode", watched)
    return calls


@pytest.mark.parametrize("compression", ["NONE", "ZLIB", "SNAPPY", "ZSTD"])
@pytest.mark.parametrize("n", [1, 511, 10_000, 10_001, 33_333])
def test_compacted_events_are_what_orc_cpp_writes(
    tmp_path: Path, encoded: list[list[str]], compression: str, n: int
) -> None:
    options = WriterOptions(compression=compression, is_base=True, streaming_optimizations=False)
    assert_as_orc_cpp(tmp_path, COLS, compacted_events(COLS, n), options)
    assert encoded[-1] == ["id", "msg"]  # row's columns (pyarrow's root stands for row); the ACID ones ours


def test_every_type_and_several_stripes(tmp_path: Path, encoded: list[list[str]]) -> None:
    columns = parse_columns(ALL_TYPES)
    options = WriterOptions(
        is_base=True, streaming_optimizations=False, stripe_size=64 << 10, batch_rows=1024
    )
    events = compacted_events(columns, 30_000)
    assert_as_orc_cpp(tmp_path, columns, events, options)
    assert len(anatomy(str(tmp_path / "ref.orc"))["stripes"]) > 2  # type: ignore[arg-type]
    assert encoded[-1] == ["row"]  # a struct column: pyarrow gets row whole (see AcidWriter._nested)


def test_columns_that_vary_are_encoded_as_orc_cpp_does(tmp_path: Path, encoded: list[list[str]]) -> None:
    """Mixed operations, two bucket properties (statement ids), a currentTransaction of its own (delete
    events): still ours, as ORC C++ encodes them."""
    events = compacted_events(COLS, 20_000)
    n = events.num_rows
    halves = np.arange(n) >= n // 2
    varied = {
        "operation": pa.array(np.where(halves, 2, 0).astype(np.int32)),
        "bucket": pa.array(np.where(halves, BucketCodec.V1.encode(1, 2), B1).astype(np.int32)),
        "currentTransaction": pa.array(events.column("originalTransaction").to_numpy() + 1),
    }
    for name, column in varied.items():
        encoded.clear()
        changed = events.set_column(events.schema.get_field_index(name), name, column)
        assert_as_orc_cpp(tmp_path / name, COLS, changed, BASE)
        assert encoded[-1] == ["id", "msg"]
    everything = events
    for name, column in varied.items():
        everything = everything.set_column(everything.schema.get_field_index(name), name, column)
    assert_as_orc_cpp(tmp_path / "all", COLS, everything, BASE)


def test_null_rows_are_encoded_whole(tmp_path: Path, encoded: list[list[str]]) -> None:
    """Delete events (row null), as a minor compaction's delete file has them: pyarrow gets row itself."""
    events = compacted_events(COLS, 20_000)
    deleted = pa.nulls(events.num_rows, events.schema.field("row").type)
    events = events.set_column(0, "operation", pa.array(np.full(events.num_rows, 2, np.int32)))
    events = events.set_column(5, "row", deleted)
    assert_as_orc_cpp(tmp_path, COLS, events, WriterOptions(streaming_optimizations=False))
    assert encoded[-1] == ["row"]


@pytest.mark.parametrize("compression", [CompressionKind.NONE, CompressionKind.ZLIB])
@pytest.mark.parametrize(("value", "n"), [(0, 100_000), (B1, 100_000), (-(1 << 31), 4_500_000)])
def test_a_constant_spanning_compression_chunks_is_indexed_as_orc_cpp_does(
    compression: CompressionKind, value: int, n: int
) -> None:
    """Past a chunk's 64 KiB of runs (8 bytes per 512 rows here), a row group's position names the next
    chunk, as ORC C++ records it."""
    block = 64 << 10
    _, streams = pyarrow_column(pa.array(np.full(n, value, np.int32)), compression, block)
    column = constant_column(value, n, 10_000, compression, block)
    index, stream = column.index, column.data
    assert decompress(compression, stream, block) == decompress(compression, streams[(1, 1)], block)
    ours, theirs = (
        [positions(e) for e in Message.decode(decompress(compression, x, block)).messages(1)]
        for x in (index, streams[(6, 1)])
    )
    if compression == CompressionKind.NONE:
        assert ours == theirs
        return
    # A position's first value is where its chunk starts in the compressed stream: each codec's own.
    assert [p[1:] for p in ours] == [p[1:] for p in theirs]
    starts = chunk_starts(stream)
    assert sorted({p[0] for p in ours}) == starts[: len({p[0] for p in ours})]
    assert [starts.index(p[0]) for p in ours] == [chunk_starts(streams[(1, 1)]).index(p[0]) for p in theirs]
    if n > 1_000_000:
        assert len(starts) > 1


def positions(entry: Message) -> list[int]:
    packed, out, at = entry.bytes_(1) or b"", [], 0
    while at < len(packed):
        value, at = decode_varint(packed, at)
        out.append(value)
    return out


def chunk_starts(stream: bytes) -> list[int]:
    """Offsets of the compression chunks of a framed stream (3-byte headers: length << 1 | original)."""
    starts, at = [], 0
    while at < len(stream):
        starts.append(at)
        at += 3 + (int.from_bytes(stream[at : at + 3], "little") >> 1)
    return starts
