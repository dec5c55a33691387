"""Inserted rows spliced with our ACID columns (stripes.from_inserted_rows) against pyarrow encoding all six.

The claim: column for column, the spliced file holds what ORC C++ writes for the same events (the same RLEv2
bytes, encodings and statistics), only the compression framing of tiny streams differs, and it has no row index
(stride 0, as Hive's streaming writer), where pyarrow, which refuses stride 0, writes one entry per stripe.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as po
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from orcfiles import stripe_streams

from acidstream.acid.codec import BucketCodec
from acidstream.acid.orc import AcidWriter, WriterOptions, read_acid_metadata, read_events
from acidstream.acid.orc import writer as writer_module
from acidstream.acid.orc.compression import CompressionKind, decompress
from acidstream.acid.orc.sharded import encode_sharded
from acidstream.acid.orc.stripes import SHIFT, EncodedEvents, Insert, from_inserted_rows, from_shared_inserts
from acidstream.acid.orc.tail import FOOTER, STRIPE, read_tail
from acidstream.acid.orc.writer import TakenEvents, encode_together
from acidstream.acid.types import Column, parse_columns
from conftest import ALL_TYPES, all_type_rows

COLS = parse_columns("id int, msg string")
B0 = BucketCodec.V1.encode(0, -1)


def rows(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int32)
    msgs = pa.array([None if i % 7 == 3 else f"message {i}" for i in range(start, start + n)], pa.string())
    return pa.table({"id": ids, "msg": msgs})


def write(path: str, parts: list[tuple[int, int, pa.Table]], options: WriterOptions | None = None) -> None:
    w = AcidWriter(pafs.LocalFileSystem(), path, COLS, options=options or WriterOptions(), side_file=False)
    for write_id, bucket, data in parts:
        w.insert(write_id, bucket, data)
    w.close()


def reference(path: str, events: pa.Table, options: WriterOptions | None = None) -> None:
    """pyarrow encoding the six event columns itself (what the writer did before the splice)."""
    po.write_table(events, path, **(options or WriterOptions()).pyarrow_kwargs())  # type: ignore[arg-type]


INDEX_KINDS = {6, 7, 8}  # ROW_INDEX, BLOOM_FILTER, BLOOM_FILTER_UTF8


def anatomy(path: str) -> dict[str, object]:
    """Per stripe: each (kind, column) data stream decompressed, the encodings; the stats. Index streams are
    counted, not compared."""
    data = Path(path).read_bytes()
    tail = read_tail(pa.BufferReader(data), len(data))
    stripes, index_streams = [], 0
    for info in tail.stripes:
        footer, stored = stripe_streams(data, tail, info)
        index_streams += sum(kind in INDEX_KINDS for kind, _ in stored)
        streams = {
            key: decompress(tail.compression, raw, tail.block_size)
            for key, raw in stored.items()
            if key[0] not in INDEX_KINDS
        }
        stripes.append(
            (info.uint(STRIPE.NUMBER_OF_ROWS), streams, footer.repeated_bytes(2), footer.fields[-1])
        )
    return {
        "stripes": stripes,
        "statistics": tail.footer.repeated_bytes(FOOTER.STATISTICS),
        "stripe_statistics": tail.stripe_statistics,
        "rows": tail.num_rows,
        "index_streams": index_streams,
        "row_index_stride": tail.footer.uint(FOOTER.ROW_INDEX_STRIDE),
    }


def same_data(ours: dict[str, object], ref: dict[str, object]) -> bool:
    """Equal but for the row index: ours has none and declares stride 0."""
    assert ours["index_streams"] == 0 and ours["row_index_stride"] == 0
    skip = {"index_streams", "row_index_stride"}
    return {k: v for k, v in ours.items() if k not in skip} == {k: v for k, v in ref.items() if k not in skip}


def assert_same_as_pyarrow(tmp: str, write_id: int, bucket: int, n: int, first_row_id: int = 0) -> None:
    ours, ref = f"{tmp}/delta_1_1/bucket_00000", f"{tmp}/ref.orc"
    data = rows(n)
    w = AcidWriter(pafs.LocalFileSystem(), ours, COLS, options=WriterOptions(), side_file=False)
    w._next_row_id, w._insert_write_id = first_row_id, write_id  # continue a run, as after an auto-flush
    w.insert(write_id, bucket, data)
    w.close()
    events = read_events(pafs.LocalFileSystem(), ours)
    assert events.column("rowId").to_pylist() == list(range(first_row_id, first_row_id + n))
    assert set(events.column("originalTransaction").to_pylist()) == {write_id}
    assert pa.Table.from_struct_array(events.column("row").combine_chunks()).equals(data)
    reference(ref, events)
    assert same_data(anatomy(ours), anatomy(ref))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 10, 11, 512, 513, 514, 515, 516, 522, 523, 1024, 1025, 2000])
def test_every_run_shape_is_what_orc_cpp_writes(tmp_path: Path, n: int) -> None:
    """Tails of 1–2 values (DIRECT), 3–10 (SHORT_REPEAT for constants), 11+ and full runs (DELTA)."""
    assert_same_as_pyarrow(str(tmp_path), 7, B0, n)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 1600),
    write_id=st.one_of(st.integers(1, 1000), st.integers(1, (1 << 62))),
    statement=st.integers(0, 4095),
    bucket=st.integers(0, 4095),
    first_row_id=st.one_of(st.just(0), st.integers(0, 1 << 40)),
)
def test_any_insert_is_what_orc_cpp_writes(
    n: int, write_id: int, statement: int, bucket: int, first_row_id: int
) -> None:
    """Large write ids overflow the int64 sum of a column: both leave the sum out."""
    with tempfile.TemporaryDirectory() as tmp:
        assert_same_as_pyarrow(tmp, write_id, BucketCodec.V1.encode(bucket, statement), n, first_row_id)


@pytest.mark.parametrize("compression", ["NONE", "ZLIB", "SNAPPY", "ZSTD"])
def test_many_stripes_in_one_chunk_and_across_flushes(tmp_path: Path, compression: str) -> None:
    """A chunk pyarrow splits into several stripes, then more chunks: rowIds, keys and statistics run on."""
    path = str(tmp_path / "delta_1_1" / "bucket_00000")
    options = WriterOptions(compression=compression, stripe_size=16 << 10, batch_rows=8192)
    w = AcidWriter(pafs.LocalFileSystem(), path, COLS, options=options, side_file=False)
    w.insert(5, B0, rows(60_000))
    w.flush()
    w.insert(5, B0, rows(1000, start=60_000))
    w.close()
    meta = read_acid_metadata(pafs.LocalFileSystem(), path)
    assert meta.stripes > 2
    events = read_events(pafs.LocalFileSystem(), path)
    assert events.column("rowId").to_pylist() == list(range(61_000))
    stripe_ends = np.cumsum([s[0] for s in anatomy(path)["stripes"]])  # type: ignore[union-attr]
    assert meta.key_index == [(5, B0, int(end) - 1) for end in stripe_ends]
    reference(str(tmp_path / "ref.orc"), events, options)
    assert anatomy(path)["statistics"] == anatomy(str(tmp_path / "ref.orc"))["statistics"]
    assert po.ORCFile(path).read().equals(events)


def test_mixed_write_ids_between_flushes_fall_back_to_events(tmp_path: Path) -> None:
    """Inserts of two write ids buffered together are not one run: pyarrow encodes them as events."""
    path = str(tmp_path / "delta_1_2" / "bucket_00000")
    write(path, [(1, B0, rows(5)), (2, B0, rows(3, start=5))])
    events = read_events(pafs.LocalFileSystem(), path)
    assert events.column("originalTransaction").to_pylist() == [1] * 5 + [2] * 3
    assert events.column("rowId").to_pylist() == [0, 1, 2, 3, 4, 0, 1, 2]
    assert read_acid_metadata(pafs.LocalFileSystem(), path).key_index == [(2, B0, 2)]
    shape = anatomy(path)
    assert shape["row_index_stride"] == 0 and shape["index_streams"]  # pyarrow's index, which readers ignore
    assert po.ORCFile(path).read().equals(events)


def test_pyarrow_columns_move_up_by_six() -> None:
    """The rows' own streams keep their bytes; only their column ids change."""
    sink = pa.BufferOutputStream()
    kwargs = {**WriterOptions().pyarrow_kwargs(), "compression": "UNCOMPRESSED"}
    po.write_table(rows(100), sink, **kwargs)  # type: ignore[arg-type]
    data = sink.getvalue()
    encoded = from_inserted_rows(data, 3, B0, 0, compression=CompressionKind.ZLIB, block_size=64 << 10)
    assert encoded.rows == 100 and encoded.keys == [(3, B0, 99)]
    tail = read_tail(pa.BufferReader(data), data.size)
    theirs = tail.footer.repeated_bytes(FOOTER.STATISTICS)
    assert encoded.statistics[SHIFT:] == theirs  # their root struct is our `row`
    assert len(encoded.statistics) == SHIFT + len(theirs)


def test_nested_rows_drop_pyarrow_root() -> None:
    """Rows given as one struct column: that column (pyarrow's 1) is our `row`, its fields follow from 7."""
    data = rows(100)
    nested = pa.table(
        {
            "row": pa.StructArray.from_arrays(
                [c.combine_chunks() for c in data.columns], names=data.column_names
            )
        }
    )
    sink = pa.BufferOutputStream()
    po.write_table(nested, sink, **{**WriterOptions().pyarrow_kwargs(), "compression": "UNCOMPRESSED"})  # type: ignore[arg-type]
    encoded = from_inserted_rows(
        sink.getvalue(), 3, B0, 0, compression=CompressionKind.ZLIB, block_size=64 << 10, nested=True
    )
    tail = read_tail(pa.BufferReader(sink.getvalue()), sink.getvalue().size)
    theirs = tail.footer.repeated_bytes(FOOTER.STATISTICS)
    assert encoded.statistics[SHIFT:] == theirs[1:]
    assert len(encoded.statistics) == SHIFT + len(theirs) - 1


def test_compressed_rows_are_refused() -> None:
    """Their streams would be compressed twice: only uncompressed rows splice."""
    sink = pa.BufferOutputStream()
    po.write_table(rows(10), sink, **WriterOptions().pyarrow_kwargs())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="uncompressed"):
        from_inserted_rows(sink.getvalue(), 3, B0, 0, compression=CompressionKind.ZLIB, block_size=64 << 10)


@pytest.mark.parametrize("compression", ["ZLIB", "NONE", "SNAPPY", "ZSTD"])
@pytest.mark.parametrize("with_struct", [False, True])
def test_every_type_is_what_orc_cpp_writes(tmp_path: Path, compression: str, with_struct: bool) -> None:
    """Every stream of every column kind, compressed here with every codec: timestamps and decimals (DATA +
    SECONDARY), strings and lists (LENGTH), nulls (PRESENT) — as ORC C++'s own. Rows are slices (as routed
    rows are); with a struct column pyarrow gets them nested in one struct column, whose root we drop."""
    columns = [c for c in parse_columns(ALL_TYPES) if with_struct or c.name != "st"]
    data = all_type_rows(columns, 700).slice(150, 300)
    path, ref = str(tmp_path / "delta_1_1" / "bucket_00000"), str(tmp_path / "ref.orc")
    options = WriterOptions(compression=compression)
    w = AcidWriter(pafs.LocalFileSystem(), path, columns, options=options, side_file=False)
    w.insert(4, B0, data.slice(0, 100))
    w.insert(4, B0, data.slice(100))
    w.close()
    events = read_events(pafs.LocalFileSystem(), path)
    assert pa.Table.from_struct_array(events.column("row").combine_chunks()).equals(data)
    reference(ref, events, options)
    assert same_data(anatomy(path), anatomy(ref))


# --- several inserts sharing pyarrow's file (writer.encode_together) --------------------------------------


def same_events(a: EncodedEvents, b: EncodedEvents) -> bool:
    return (
        [bytes(x) for x in a.body] == [bytes(x) for x in b.body]
        and a.stripes == b.stripes
        and a.stripe_statistics == b.stripe_statistics
        and a.statistics == b.statistics
        and a.keys == b.keys
        and a.rows == b.rows
    )


def taken_by_writers(
    tmp_path: Path, columns: list[Column], inserts: list[tuple[int, pa.Table]]
) -> list[tuple[AcidWriter, TakenEvents]]:
    """One writer per (write id, rows) insert, its bucket its position, and what a flush takes from it."""
    items = []
    for i, (write_id, data) in enumerate(inserts):
        w = AcidWriter(
            pafs.LocalFileSystem(),
            str(tmp_path / f"bucket_{i:05d}"),
            columns,
            options=WriterOptions(),
            side_file=False,
        )
        w.insert(write_id, BucketCodec.V1.encode(i, 0), data)
        taken = w.take_pending_events()
        assert taken is not None
        items.append((w, taken))
    return items


@pytest.mark.parametrize("with_struct", [False, True])
def test_inserts_sharing_a_file_are_encoded_as_apart(tmp_path: Path, with_struct: bool) -> None:
    """Every type, rows that are slices, nested for a struct column: each insert's stripes, statistics and keys
    are byte for byte those of encoding it alone."""
    columns = [c for c in parse_columns(ALL_TYPES) if with_struct or c.name != "st"]
    data = all_type_rows(columns, 900)
    items = taken_by_writers(
        tmp_path, columns, [(3, data.slice(0, 40)), (3, data.slice(40, 300)), (4, data.slice(340))]
    )
    shared = encode_together(items)
    assert all(same_events(s, w.encode_events(t)) for s, (w, t) in zip(shared, items, strict=True))


def test_rows_pyarrow_keeps_buffered_end_their_shared_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few ints wait in pyarrow's RLE buffers and cut no stripe: their insert ends its file and the next one
    starts another, so no stripe mixes two inserts."""
    files: list[int] = []
    real = writer_module.from_shared_inserts

    def counting(data: pa.Buffer, inserts: list[Insert], **kwargs: Any) -> list[EncodedEvents] | None:
        encoded = real(data, inserts, **kwargs)
        assert encoded is not None
        files.append(len(inserts))
        return encoded

    monkeypatch.setattr(writer_module, "from_shared_inserts", counting)
    columns = parse_columns("id int")
    ints = [(1, pa.table({"id": pa.array(np.arange(n, dtype=np.int32))})) for n in (1, 3, 700, 800, 2)]
    items = taken_by_writers(tmp_path, columns, ints)
    shared = encode_together(items)
    assert files == [
        1,
        1,
        3,
    ]  # 700 and 800 ints fill RLE runs and cut their stripes; 2 ints then end the file
    assert all(same_events(s, w.encode_events(t)) for s, (w, t) in zip(shared, items, strict=True))


def test_stripes_that_do_not_match_the_inserts_are_refused() -> None:
    """Two inserts' rows in one stripe cannot be told apart: None, and the caller encodes them apart."""
    sink = pa.BufferOutputStream()
    po.write_table(rows(30), sink, **{**WriterOptions().pyarrow_kwargs(), "compression": "UNCOMPRESSED"})  # type: ignore[arg-type]
    inserts = [Insert(10, 1, B0, 0), Insert(20, 1, B0, 0)]
    assert (
        from_shared_inserts(sink.getvalue(), inserts, compression=CompressionKind.ZLIB, block_size=64 << 10)
        is None
    )


def test_events_and_large_inserts_are_encoded_apart(tmp_path: Path) -> None:
    """Takes that are events (two write ids buffered together), or more rows than one pyarrow batch, do not
    share: the others still do, and all come back in order."""
    options = WriterOptions(batch_rows=1000)
    items = []
    for i, parts in enumerate(
        [[(1, rows(5)), (2, rows(3))], [(1, rows(1500))], [(1, rows(50))], [(1, rows(60))]]
    ):
        w = AcidWriter(
            pafs.LocalFileSystem(), str(tmp_path / f"b{i}"), COLS, options=options, side_file=False
        )
        for write_id, data in parts:
            w.insert(write_id, BucketCodec.V1.encode(i, 0), data)
        taken = w.take_pending_events()
        assert taken is not None
        items.append((w, taken))
    assert isinstance(items[0][1], pa.Table)  # events
    shared = encode_together(items)
    assert all(same_events(s, w.encode_events(t)) for s, (w, t) in zip(shared, items, strict=True))


def test_sharded_encoding_is_the_encoding_together_in_order(tmp_path: Path) -> None:
    """Shards on the encode pool (the largest inserts spread first) come back in the items' order, each item's
    stripes those of encoding it alone."""
    columns = parse_columns("id int")
    sizes = [5, 900, 40, 3000, 1, 700, 250]
    ints = [(1, pa.table({"id": pa.array(np.arange(n, dtype=np.int32))})) for n in sizes]
    items = taken_by_writers(tmp_path, columns, ints)
    sharded = encode_sharded(items)
    assert [e.rows for e in sharded] == sizes
    assert all(same_events(s, w.encode_events(t)) for s, (w, t) in zip(sharded, items, strict=True))
