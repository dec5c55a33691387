"""AcidWriter: event values, key index and stats, flushes and side file, close.

The rules: docs/format.md, Event files and Side files.
"""

from __future__ import annotations

import errno
import os
import struct
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as po
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acidstream import faults
from acidstream.acid.codec import BucketCodec
from acidstream.acid.names import ParsedDelta, side_file_path
from acidstream.acid.orc import (
    AcidWriter,
    EventKind,
    WriterOptions,
    event_schema,
    read_acid_metadata,
    read_events,
)
from acidstream.acid.orc.tail import FOOTER, STRIPE, TYPE, read_tail
from acidstream.acid.orc.timestamps import stored_seconds
from acidstream.acid.sidefile import logical_extent, read_flush_lengths
from acidstream.acid.types import Column, parse_columns
from acidstream.errors import StreamingIOFailure
from acidstream.faults import armed
from acidstream.storage import table_filesystem
from conftest import all_type_rows, write_path
from support.faultinjection import DISK_KINDS, full_disk, skip_unless_possible

B0 = BucketCodec.V1.encode(0, -1)
COLS = parse_columns("id int, msg string")


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int32()), "msg": [f"m{i}" for i in ids]})


def tail_of(path: str, length: int | None = None) -> object:
    with pa.memory_map(path) as f:
        return read_tail(f, length if length is not None else f.size())


def test_b0_is_hive_bucket_property() -> None:
    assert B0 == 536870912


def test_rowid_restarts_per_write_id_and_key_index_per_stripe(tmp_path: Path, fs: pafs.FileSystem) -> None:
    path = write_path(tmp_path, "delta_0000002_0000003")
    w = AcidWriter(fs, path, COLS, options=WriterOptions(), side_file=True)
    w.insert(2, B0, rows(10))
    w.insert(2, B0, rows(11))  # same write id: rowId continues
    w.flush()
    w.insert(3, B0, rows(12, 13))
    w.close()
    t = read_events(fs, path)
    assert t.column("rowId").to_pylist() == [0, 1, 0, 1]
    assert t.column("originalTransaction").to_pylist() == [2, 2, 3, 3]
    assert t.column("currentTransaction").to_pylist() == [2, 2, 3, 3]
    assert t.column("operation").to_pylist() == [EventKind.INSERT] * 4
    assert t.column("bucket").to_pylist() == [B0] * 4
    assert t.column("row").to_pylist() == [{"id": i, "msg": f"m{i}"} for i in (10, 11, 12, 13)]
    meta = read_acid_metadata(fs, path)
    assert meta.key_index == [(2, B0, 1), (3, B0, 1)]
    assert w.key_index.encode() == "2,536870912,1;3,536870912,1;"
    assert meta.stats == (4, 0, 0)
    assert meta.version == "2"
    assert (meta.num_rows, meta.stripes) == (4, 2)
    assert tail_of(path).user_metadata() == {  # type: ignore[attr-defined]
        "hive.acid.key.index": b"2,536870912,1;3,536870912,1;",
        "hive.acid.stats": b"4,0,0",
        "hive.acid.version": b"2",
    }


def test_all_types_round_trip_through_our_reader_and_pyarrow(
    tmp_path: Path, fs: pafs.FileSystem, all_columns: list[Column]
) -> None:
    path = write_path(tmp_path)
    data = all_type_rows(all_columns, 50)
    w = AcidWriter(fs, path, all_columns, options=WriterOptions(), side_file=False)
    w.insert(1, B0, data.slice(0, 3))
    w.insert(1, B0, data.slice(3, 17))
    # zero-copy slices of one batch at odd offsets, as the streaming router hands them out
    batch = data.combine_chunks().to_batches()[0]
    w.insert(1, B0, batch.slice(20, 11))
    w.insert(1, B0, batch.slice(31))
    w.close()
    ours = read_events(fs, path)
    assert ours.schema == event_schema(pa.struct(list(data.schema)))
    assert pa.Table.from_struct_array(ours.column("row").combine_chunks()).equals(data)
    assert po.ORCFile(path).read().equals(ours)


def test_char_and_varchar_are_declared_with_their_length(tmp_path: Path, fs: pafs.FileSystem) -> None:
    cols = parse_columns("a char(7), b varchar(300), c array<varchar(5)>, d string")
    path = write_path(tmp_path)
    w = AcidWriter(fs, path, cols, options=WriterOptions(), side_file=False)
    w.insert(1, B0, pa.table({"a": ["x"], "b": ["y"], "c": [["z"]], "d": ["w"]}))
    w.close()
    types = tail_of(path).types  # type: ignore[attr-defined]
    got = [(t.uint(TYPE.KIND), t.uint(TYPE.MAXIMUM_LENGTH)) for t in types[7:]]
    assert got == [(TYPE.CHAR, 7), (TYPE.VARCHAR, 300), (10, 0), (TYPE.VARCHAR, 5), (TYPE.STRING, 0)]


def test_every_intermediate_footer_is_a_valid_file(tmp_path: Path, fs: pafs.FileSystem) -> None:
    path = write_path(tmp_path, "delta_0000001_0000004")
    w = AcidWriter(fs, path, COLS, options=WriterOptions(), side_file=True)
    offsets, counts = [], []
    for wid in range(1, 5):
        w.insert(wid, B0, rows(*range(wid * 10, wid * 10 + wid)))
        offsets.append(w.flush())
        counts.append(w.rows_written)
    assert offsets == sorted(offsets) and w.bytes_written == offsets[-1]
    w.close()
    full = Path(path).read_bytes()
    for off, n in zip(offsets, counts, strict=True):
        assert read_events(fs, path, length=off).num_rows == n
        copy = tmp_path / f"copy_{off}"
        copy.write_bytes(full[:off])
        plain = po.ORCFile(str(copy)).read()
        assert plain.num_rows == n
        assert plain.equals(read_events(fs, path).slice(0, n))
        assert read_acid_metadata(fs, str(copy)).stripes == len(read_acid_metadata(fs, path, off).key_index)


def test_side_file_records_each_flush_and_is_deleted_at_close(tmp_path: Path, fs: pafs.FileSystem) -> None:
    path = write_path(tmp_path, "delta_0000005_0000006")
    w = AcidWriter(fs, path, COLS, options=WriterOptions(), side_file=True)
    side = Path(path + "_flush_length")
    assert side.read_bytes() == struct.pack(">q", 0)
    w.insert(5, B0, rows(1))
    first = w.flush()
    size = os.path.getsize(path)
    assert w.flush() == first  # nothing new: same offset, nothing written, offset recorded again
    assert os.path.getsize(path) == size == first
    w.insert(6, B0, rows(2))
    second = w.flush()
    assert struct.unpack(">4q", side.read_bytes()) == (0, first, first, second)
    assert (Path(path).parent / "_orc_acid_version").read_bytes() == b"2"
    w.close()
    assert not side.exists()
    assert os.path.getsize(path) == second  # the last flush already ends in a complete tail
    assert read_events(fs, path).num_rows == 2


def test_flush_before_any_row_returns_zero(tmp_path: Path, fs: pafs.FileSystem) -> None:
    path = write_path(tmp_path, "delta_0000005_0000006")
    w = AcidWriter(fs, path, COLS, options=WriterOptions(), side_file=True)
    assert w.flush() == 0
    assert struct.unpack(">2q", Path(path + "_flush_length").read_bytes()) == (0, 0)
    w.abort_close()


def test_empty_insert_file_is_deleted_but_empty_base_is_written(tmp_path: Path, fs: pafs.FileSystem) -> None:
    delta = write_path(tmp_path)
    AcidWriter(fs, delta, COLS, options=WriterOptions(), side_file=False).close()
    assert not os.path.exists(delta)
    base = write_path(tmp_path, "base_0000005")
    AcidWriter(fs, base, COLS, options=WriterOptions(is_base=True), side_file=False).close()
    meta = read_acid_metadata(fs, base)
    assert (meta.num_rows, meta.stripes, meta.key_index, meta.stats) == (0, 0, [], (0, 0, 0))
    assert po.ORCFile(base).read().num_rows == 0


def test_abort_close_follows_hive(tmp_path: Path, fs: pafs.FileSystem) -> None:
    single = write_path(tmp_path, "delta_0000001_0000001")
    w = AcidWriter(fs, single, COLS, options=WriterOptions(), side_file=False)
    w.insert(1, B0, rows(1))
    w.flush()
    w.abort_close()
    assert not os.path.exists(single)  # no side file: the data file goes
    batch = write_path(tmp_path, "delta_0000002_0000003")
    w = AcidWriter(fs, batch, COLS, options=WriterOptions(), side_file=True)
    w.insert(2, B0, rows(1))
    off = w.flush()
    w.insert(3, B0, rows(2))
    w.abort_close()
    assert not os.path.exists(batch + "_flush_length")
    assert os.path.getsize(batch) == off  # buffered rows were discarded, no final footer
    assert read_events(fs, batch).num_rows == 1


def random_rows(first: int, n: int) -> pa.Table:
    """Rows that do not compress: they fill a small disk."""
    return pa.table(
        {"id": pa.array(range(first, first + n), pa.int32()), "msg": [os.urandom(24).hex() for _ in range(n)]}
    )


@pytest.mark.parametrize("disk", DISK_KINDS)
def test_a_failed_flush_cuts_the_file_back_to_the_last_published_footer(tmp_path: Path, disk: str) -> None:
    """Disk full mid-batch: the close after the failed flush must not leave a torn end behind a
    deleted side file. On a filesystem that truncates (a tmpfs) the file is cut back; on one that cannot
    (a pyarrow filesystem failing past its budget) the side file stays; readers keep every published row."""
    skip_unless_possible(disk)
    with full_disk(tmp_path / "disk", 192 << 10, disk) as small:
        fs = table_filesystem(str(small.path))[0]
        path = write_path(small.path, "delta_0000001_0000010")
        w = AcidWriter(fs, path, COLS, options=WriterOptions(compression="NONE"), side_file=True)
        w.insert(1, B0, random_rows(0, 100))
        published = w.flush()
        w.insert(2, B0, random_rows(100, 20_000))
        with pytest.raises(StreamingIOFailure, match="No space left"):
            w.flush()
        with pytest.raises(StreamingIOFailure, match="failed earlier"):
            w.insert(2, B0, random_rows(0, 1))
        w.close()
        side = Path(side_file_path(path))
        if isinstance(fs, pafs.LocalFileSystem):
            assert os.path.getsize(path) == published and not side.exists()
        else:  # cannot truncate: the side file stays, and says how much of the torn file to read
            assert os.path.getsize(path) > published and side.exists()
        length, _ = logical_extent(fs, path, ParsedDelta(1, 10, None, 0, False), os.path.getsize(path))
        assert length == published
        assert read_events(fs, path, length=length).column("currentTransaction").to_pylist() == [1] * 100


@pytest.mark.parametrize("point", ["orc.flush.stripes", "orc.flush.tail", "orc.flush.published"])
def test_an_io_error_at_each_flush_point_leaves_the_published_prefix(
    tmp_path: Path, fs: pafs.FileSystem, point: str
) -> None:
    """Whatever the side file last says is kept (the failed flush's own length once it reached the side file)."""
    path = write_path(tmp_path, "delta_0000001_0000010")
    w = AcidWriter(fs, path, COLS, options=WriterOptions(), side_file=True)
    w.insert(1, B0, rows(1, 2))
    w.flush()
    w.insert(2, B0, rows(3))
    with armed(point, faults.os_error(errno.EIO)), pytest.raises(StreamingIOFailure):
        w.flush()
    published = read_flush_lengths(fs, side_file_path(path))
    assert published is not None
    w.close()
    assert os.path.getsize(path) == published[-1] and not Path(side_file_path(path)).exists()
    txns = [1, 1, 2] if point == "orc.flush.published" else [1, 1]
    assert read_events(fs, path).column("currentTransaction").to_pylist() == txns


def test_a_failed_write_without_side_file_deletes_the_file(tmp_path: Path, fs: pafs.FileSystem) -> None:
    """Nothing in a single-write-id file is committed before its close: a failure removes it."""
    path = write_path(tmp_path, "delta_0000004_0000004")
    w = AcidWriter(fs, path, COLS, options=WriterOptions(), side_file=False)
    w.insert(4, B0, rows(1))
    w.flush()
    w.insert(4, B0, rows(2))
    with armed("orc.flush.tail", faults.os_error(errno.EIO)), pytest.raises(StreamingIOFailure):
        w.flush()
    w.close()
    assert not os.path.exists(path)


def test_delete_events(tmp_path: Path, fs: pafs.FileSystem) -> None:
    path = write_path(tmp_path, "delete_delta_0000007_0000007_0000")
    w = AcidWriter(fs, path, COLS, options=WriterOptions(), side_file=False)
    keys = pa.table({"originalTransaction": [1, 1, 2], "bucket": [B0, B0, B0], "rowId": [0, 5, 0]})
    w.delete(7, keys)
    with pytest.raises(ValueError, match="not sorted"):  # behind the last key written
        w.delete(7, pa.table({"originalTransaction": [1], "bucket": [B0], "rowId": [9]}))
    w.delete(7, pa.table({"originalTransaction": [3], "bucket": [B0], "rowId": [1]}))
    w.close()
    t = read_events(fs, path)
    assert t.column("operation").to_pylist() == [EventKind.DELETE] * 4
    assert t.column("currentTransaction").to_pylist() == [7] * 4
    assert t.column("rowId").to_pylist() == [0, 5, 0, 1]
    assert t.column("row").null_count == 4
    meta = read_acid_metadata(fs, path)
    assert (meta.stats, meta.key_index) == ((0, 0, 4), [(3, B0, 1)])


def test_unsorted_deletes_are_rejected(tmp_path: Path, fs: pafs.FileSystem) -> None:
    w = AcidWriter(fs, write_path(tmp_path), COLS, options=WriterOptions(), side_file=False)
    b1 = BucketCodec.V1.encode(1, -1)
    with pytest.raises(ValueError, match="not sorted"):
        w.delete(7, pa.table({"originalTransaction": [1, 1], "bucket": [b1, B0], "rowId": [0, 1]}))
    with pytest.raises(ValueError, match="must have columns"):
        w.delete(7, pa.table({"txn": [1]}))
    two_chunks = pa.concat_tables(
        [
            pa.table({"originalTransaction": [1, 2], "bucket": [B0, B0], "rowId": [0, 0]}),
            pa.table({"originalTransaction": [1], "bucket": [B0], "rowId": [0]}),
        ]
    )
    with pytest.raises(ValueError, match="not sorted"):
        w.delete(7, two_chunks)
    assert w.rows_written == 0  # a rejected call buffers nothing, not even its sorted first chunk
    with pytest.raises(ValueError, match="operation"):
        w.write_events(
            pa.table(
                {
                    "operation": pa.array([3], pa.int32()),
                    "originalTransaction": [1],
                    "bucket": pa.array([B0], pa.int32()),
                    "rowId": [0],
                    "currentTransaction": [1],
                    "row": pa.array([None], pa.struct([c.to_arrow() for c in COLS])),
                }
            )
        )
    w.abort_close()


def test_write_events_counts_operations_and_checks_order(tmp_path: Path, fs: pafs.FileSystem) -> None:
    path = write_path(tmp_path, "base_0000009")
    schema = event_schema(pa.struct([c.to_arrow() for c in COLS]))
    events = pa.table(
        {
            "operation": pa.array([0, 0, 2], pa.int32()),
            "originalTransaction": [1, 2, 3],
            "bucket": pa.array([B0] * 3, pa.int32()),
            "rowId": [0, 0, 0],
            "currentTransaction": [1, 2, 4],
            "row": pa.array([{"id": 1, "msg": "a"}, {"id": 2, "msg": "b"}, None], schema.field("row").type),
        },
        schema=schema,
    )
    w = AcidWriter(fs, path, COLS, options=WriterOptions(is_base=True), side_file=False)
    w.write_events(events)
    with pytest.raises(ValueError, match="not sorted"):
        w.write_events(events.slice(0, 1))
    w.close()
    assert read_events(fs, path).equals(events)
    assert read_acid_metadata(fs, path).stats == (2, 0, 1)


def test_rows_must_match_the_table_columns(tmp_path: Path, fs: pafs.FileSystem) -> None:
    w = AcidWriter(fs, write_path(tmp_path), COLS, options=WriterOptions(), side_file=False)
    with pytest.raises(ValueError, match="columns"):
        w.insert(1, B0, pa.table({"msg": ["x"], "id": [1]}))
    w.insert(1, B0, pa.table({"id": pa.array([1], pa.int64()), "msg": ["x"]}))  # safe cast int64 -> int32
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.insert(1, B0, rows(1))


def test_small_stripes_key_index_and_file_statistics(tmp_path: Path, fs: pafs.FileSystem) -> None:
    """Many stitched stripes: one key-index entry per stripe (its last key); file stats merged exactly."""
    path = write_path(tmp_path, "delta_0000001_0000003")
    opts = WriterOptions(
        stripe_size=40 * 1024
    )  # buffered Arrow bytes: inserted rows count without ACID columns
    w = AcidWriter(fs, path, COLS, options=opts, side_file=False)
    n = 0
    for wid in (1, 2, 3):
        for _ in range(5):
            w.insert(wid, B0, rows(*range(n, n + 3000)))
            n += 3000
    w.close()
    assert w.stripes >= 10
    orc = po.ORCFile(path)
    assert orc.nstripes == w.stripes
    expected = []
    for i in range(orc.nstripes):
        s = orc.read_stripe(i, columns=["originalTransaction", "bucket", "rowId"])
        expected.append(tuple(s.column(c)[s.num_rows - 1].as_py() for c in range(3)))
    assert read_acid_metadata(fs, path).key_index == expected
    # file statistics equal those pyarrow computes for the whole table in one go
    whole = tmp_path / "whole.orc"
    po.write_table(read_events(fs, path), str(whole), **opts.pyarrow_kwargs())  # type: ignore[arg-type]
    ours, ref = tail_of(path), tail_of(str(whole))
    assert len(ours.statistics) == len(ref.statistics)  # type: ignore[attr-defined]
    for a, b in zip(ours.statistics, ref.statistics, strict=True):  # type: ignore[attr-defined]
        for f in (1, 2, 4, 10):  # count, int stats, string stats, hasNull
            assert a.bytes_(f) == b.bytes_(f) if f in (2, 4) else a.uint(f) == b.uint(f)
    stripes = tail_of(path).footer.messages(FOOTER.STRIPES)  # type: ignore[attr-defined]
    assert sum(s.uint(STRIPE.NUMBER_OF_ROWS) for s in stripes) == n


@pytest.mark.parametrize("compression", ["NONE", "ZLIB", "SNAPPY", "ZSTD"])
def test_each_compression_round_trips(tmp_path: Path, fs: pafs.FileSystem, compression: str) -> None:
    path = write_path(tmp_path, "delta_0000001_0000002")
    w = AcidWriter(fs, path, COLS, options=WriterOptions(compression=compression), side_file=True)
    w.insert(1, B0, rows(*range(1000)))
    off = w.flush()
    w.insert(2, B0, rows(*range(1000)))
    w.close()
    assert read_events(fs, path, length=off).num_rows == 1000
    assert po.ORCFile(path).read().num_rows == 2000
    assert tail_of(path).compression.name == compression  # type: ignore[attr-defined]


def test_options_follow_hive_defaults() -> None:
    delta, base = WriterOptions(), WriterOptions(is_base=True)
    assert (delta.stripe_bytes, delta.block_size) == (8 << 20, 64 << 10)
    assert (base.stripe_bytes, base.block_size) == (64 << 20, 256 << 10)
    assert delta.pyarrow_kwargs()["dictionary_key_size_threshold"] == 0.0
    assert base.pyarrow_kwargs()["dictionary_key_size_threshold"] == 0.8
    assert base.pyarrow_kwargs()["row_index_stride"] == 10000
    assert WriterOptions(streaming_optimizations=False).pyarrow_kwargs()["row_index_stride"] == 10000
    with pytest.raises(ValueError, match="64 KiB"):
        WriterOptions(compression_block_size=32 << 10)
    with pytest.raises(ValueError, match="compression"):
        WriterOptions(compression="LZO")


def test_creates_directory_and_never_overwrites(tmp_path: Path, fs: pafs.FileSystem) -> None:
    path = str(tmp_path / "t" / "delta_0000001_0000002" / "bucket_00000")
    w = AcidWriter(fs, path, COLS, options=WriterOptions(), side_file=True)
    w.insert(1, B0, rows(1))
    w.close()
    with pytest.raises(FileExistsError):
        AcidWriter(fs, path, COLS, options=WriterOptions(), side_file=True)
    assert read_events(fs, path).num_rows == 1  # untouched
    assert not os.path.exists(path + "_flush_length")


@pytest.mark.parametrize("subtree", [False, True])
def test_version_file_made_once_and_an_existing_one_left_as_it_is(
    tmp_path: Path, fs: pafs.FileSystem, subtree: bool
) -> None:
    """A local directory's ``_orc_acid_version`` is made with O_EXCL (no look first): a new directory (and its
    parents) gets one holding "2", a directory that has one keeps it, whatever it holds."""
    where = pafs.SubTreeFileSystem(str(tmp_path), fs) if subtree else fs
    root = "" if subtree else f"{tmp_path}/"
    made = f"{root}t/p=1/delta_0000001_0000001/bucket_00000"
    kept = f"{root}t/p=2/delta_0000001_0000001/bucket_00000"
    (tmp_path / "t" / "p=2" / "delta_0000001_0000001").mkdir(parents=True)
    (tmp_path / "t" / "p=2" / "delta_0000001_0000001" / "_orc_acid_version").write_bytes(b"another")
    for path in (made, kept):
        w = AcidWriter(where, path, COLS, options=WriterOptions(), side_file=False)
        w.insert(1, B0, rows(1))
        w.close()
        assert read_events(where, path).num_rows == 1
    assert (tmp_path / "t" / "p=1" / "delta_0000001_0000001" / "_orc_acid_version").read_bytes() == b"2"
    assert (tmp_path / "t" / "p=2" / "delta_0000001_0000001" / "_orc_acid_version").read_bytes() == b"another"


def test_files_created_in_an_executor_are_awaited_and_never_overwrite(
    tmp_path: Path, fs: pafs.FileSystem
) -> None:
    path = str(tmp_path / "delta_0000001_0000002" / "bucket_00000")
    with ThreadPoolExecutor(1) as pool:
        w = AcidWriter(fs, path, COLS, options=WriterOptions(), side_file=True, create_in=pool)
        w.insert(1, B0, rows(1, 2))
        assert w.flush() > 0  # waited for the files, then wrote the stripe, footer and side-file entry
        w.close()
        assert read_events(fs, path).num_rows == 2

        late = AcidWriter(fs, path, COLS, options=WriterOptions(), side_file=True, create_in=pool)
        late.insert(1, B0, rows(3))  # buffered: the failed creation shows when the files are needed
        for _ in range(2):  # and again on every later call
            with pytest.raises(FileExistsError):
                late.flush()
        late.abort_close()  # must not delete a file it did not create
    assert read_events(fs, path).num_rows == 2
    assert not os.path.exists(path + "_flush_length")


def test_a_file_holds_nothing_until_its_first_flush(tmp_path: Path, fs: pafs.FileSystem) -> None:
    """Hive's writer leaves 0 bytes until its first flush, and Hive's footer-reading split generation skips
    such a file but fails on one holding only the ORC header: so the header goes out with the first stripe."""
    cols = parse_columns("a int")
    path = write_path(tmp_path, "delta_0000001_0000002")
    w = AcidWriter(fs, path, cols, options=WriterOptions(), side_file=True)
    w.insert(1, B0, pa.table({"a": pa.array([1, 2], pa.int32())}))
    assert os.path.getsize(path) == 0
    assert logical_extent(fs, path, ParsedDelta(1, 2, None, 0, False), 0) == (0, True)
    length = w.flush()
    assert os.path.getsize(path) == length and read_flush_lengths(fs, side_file_path(path)) == [0, length]
    assert read_events(fs, path).num_rows == 2
    w.close()
    empty = AcidWriter(
        fs, write_path(tmp_path, "delta_0000003_0000004"), cols, options=WriterOptions(), side_file=True
    )
    empty.insert(3, B0, pa.table({"a": pa.array([3], pa.int32())}))
    empty.abort_close()  # nothing published: nothing left
    assert not os.path.exists(empty.path) and not os.path.exists(side_file_path(empty.path))


@pytest.mark.parametrize(
    ("hive_type", "value"),
    [
        ("timestamp", -1),  # 1969-12-31 23:59:59.999999999
        ("timestamp", -999_000_000),  # 23:59:59.001
        ("array<timestamp>", [-1_500_000_000, -1_000_000]),
        ("map<int,timestamp>", [(1, -2_999_999_999), (2, -500_000_000)]),
        ("map<timestamp,int>", [(-1_999_999_999, 1), (-2_000_000, 2)]),
    ],
)
def test_unreadable_timestamps_are_refused(
    tmp_path: Path, fs: pafs.FileSystem, hive_type: str, value: object
) -> None:
    """The last second before 1970 with a fraction of 1 ms or more reads one second later in every ORC reader
    of Java (orc/timestamps.py): refused, inside lists and maps too."""
    cols = parse_columns(f"t {hive_type}")
    w = AcidWriter(fs, write_path(tmp_path), cols, options=WriterOptions(), side_file=False)
    typ = cols[0].type.to_arrow()
    with pytest.raises(ValueError, match="cannot read back"):
        w.insert(1, B0, pa.table({"t": pa.array([None, value], typ)}))
    w.abort_close()


@given(
    st.lists(
        st.one_of(
            st.none(),
            st.integers(-(2**63) + 2 * 10**9, 2**63 - 1),  # a floor second in range of int64 nanoseconds
            st.integers(-3 * 10**9, 2 * 10**9),
            st.integers(-(10**9) - 10**6, -(10**9) + 10**6).map(lambda v: v - v % 10**6 + 999_999),
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from([WriterOptions(), WriterOptions(is_base=True), WriterOptions(compression="NONE")]),
    st.lists(st.integers(0, 4), min_size=1, max_size=40),
    st.integers(0, 3),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_timestamps_before_1970_read_back(
    tmp_path: Path, values: list[int | None], options: WriterOptions, lengths: list[int], skip: int
) -> None:
    """Any timestamp ORC's readers can read back (all but the window above) is read back as written, by our
    reader and pyarrow's, at the top level, in a struct and inside lists and maps (their keys and values,
    structs in lists, lists in lists; null and empty lists, null elements, sliced arrays); the seconds stored
    are the Java writer's."""
    window = [v for v in values if v is not None and -(10**9) <= v < 0 and v % 10**9 > 999_999]
    values = [None if v in window else v for v in values]
    cols = parse_columns(
        "t timestamp, s struct<a:int,t:timestamp>, l array<timestamp>, m map<string,timestamp>, "
        "k map<timestamp,int>, ls array<struct<a:int,t:timestamp>>, ll array<array<timestamp>>"
    )
    lists: list[list[int | None] | None] = []  # row i: `lengths[i]` values from where row i - 1 ended
    start = 0
    for i in range(len(values) + skip):
        n = lengths[i % len(lengths)]
        lists.append(None if n == 4 else [values[(start + j) % len(values)] for j in range(n)])
        start += n
    keys = [None if x is None else [v for v in x if v is not None] for x in lists]
    columns = {
        "t": [None] * skip + values,
        "s": [None] * skip + [None if v is None else {"a": i, "t": v} for i, v in enumerate(values)],
        "l": lists,
        "m": [None if x is None else [(str(j), v) for j, v in enumerate(x)] for x in lists],
        "k": [None if x is None else [(v, j) for j, v in enumerate(x)] for x in keys],
        "ls": [None if x is None else [{"a": j, "t": v} for j, v in enumerate(x)] for x in lists],
        "ll": [None if x is None else [x, None, [], x[::-1]] for x in lists],
    }
    arrays = [pa.array(columns[c.name], c.type.to_arrow()) for c in cols]
    rows = pa.Table.from_arrays(arrays, names=[c.name for c in cols]).slice(skip, len(values))
    fs = pafs.LocalFileSystem()
    path = str(tmp_path / f"bucket_{uuid.uuid4().hex}")
    w = AcidWriter(fs, path, cols, options=options, side_file=False)
    w.insert(1, B0, rows)
    w.close()
    row = read_events(fs, path).column("row").combine_chunks()
    theirs = po.read_table(path).column("row").combine_chunks()
    for i, name in enumerate(rows.column_names):
        assert row.field(i).equals(rows.column(name).combine_chunks()), name
        assert theirs.field(i).equals(rows.column(name).combine_chunks()), name
    assert list(
        stored_seconds(np.array([-1_500_000_000, -2_000_000_000, -1_000_000_500, 1_500_000_000]))
    ) == [
        -1,
        -2,
        -1,
        1,
    ]
