"""read_events / iter_event_batches / read_acid_metadata: bounded prefixes and corruption (never wrong rows)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as po
import pytest

from acidstream.acid.orc import AcidWriter, WriterOptions, iter_event_batches, read_acid_metadata, read_events
from acidstream.acid.types import parse_columns
from acidstream.errors import CorruptFileError
from conftest import write_path

B0 = 536870912
COLS = parse_columns("id int, msg string")


def streaming_file(tmp_path: Path, fs: pafs.FileSystem) -> tuple[str, list[int]]:
    path = write_path(tmp_path, "delta_0000001_0000003")
    w = AcidWriter(fs, path, COLS, options=WriterOptions(), side_file=True)
    offsets = []
    for wid in (1, 2, 3):
        w.insert(
            wid, B0, pa.table({"id": pa.array(range(100), pa.int32()), "msg": [f"m{i}" for i in range(100)]})
        )
        offsets.append(w.flush())
    w.close()
    return path, offsets


@pytest.fixture(params=["local", "subtree"])
def any_fs(request: pytest.FixtureRequest) -> pafs.FileSystem:
    """LocalFileSystem (memory-mapped view) and a wrapper filesystem (bounded file view)."""
    return (
        pafs.LocalFileSystem()
        if request.param == "local"
        else pafs.SubTreeFileSystem("/", pafs.LocalFileSystem())
    )


def test_prefix_reads_on_any_filesystem(tmp_path: Path, any_fs: pafs.FileSystem) -> None:
    path, offsets = streaming_file(tmp_path, pafs.LocalFileSystem())
    with open(path, "ab") as f:
        f.write(b"junk" * 100)
    for n, off in enumerate(offsets, start=1):
        t = read_events(any_fs, path, length=off)
        assert t.column("originalTransaction").to_pylist() == [w for w in range(1, n + 1) for _ in range(100)]
        batches = list(iter_event_batches(any_fs, path, length=off, batch_rows=30))
        assert [b.num_rows for b in batches] == [30, 30, 30, 10] * n
        assert pa.Table.from_batches(batches).equals(t)
        meta = read_acid_metadata(any_fs, path, length=off)
        assert (meta.num_rows, meta.stripes, meta.stats) == (100 * n, n, (100 * n, 0, 0))
        assert meta.schema_row_type == pa.struct([c.to_arrow() for c in COLS])
    with pytest.raises(CorruptFileError):
        read_events(any_fs, path)  # the junk after the last footer is not a tail


def test_parts_read_every_stripe_once_in_order(tmp_path: Path, fs: pafs.FileSystem) -> None:
    """``part=(k, n)``: the k-th of n runs of stripes, near equal in count; more parts than stripes leaves some
    empty. The parts read one after the other are the whole file."""
    path, offsets = streaming_file(tmp_path, fs)
    whole = read_events(fs, path, length=offsets[-1])
    for n in range(1, 6):
        parts = [list(iter_event_batches(fs, path, length=offsets[-1], part=(k, n))) for k in range(n)]
        assert pa.Table.from_batches([b for part in parts for b in part]).equals(whole)
        stripes = sorted(len(part) for part in parts)  # one batch per stripe of 100 rows
        assert stripes[-1] - stripes[0] <= 1 and sum(stripes) == 3


class _CountingHandler(pafs.FSSpecHandler):
    """A local filesystem through pyarrow's Python bridge (as remote stores are) that counts the bytes read."""

    def __init__(self) -> None:
        import fsspec

        super().__init__(fsspec.filesystem("file"))
        self.bytes_read = 0

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(_Counted(self.fs.open(path, "rb"), self), mode="r")


class _Counted:
    """A file object whose reads add to its handler's count; everything else is the file's."""

    def __init__(self, raw: Any, handler: _CountingHandler) -> None:
        self._raw, self._handler = raw, handler

    def read(self, nbytes: int = -1) -> bytes:
        data: bytes = self._raw.read(nbytes)
        self._handler.bytes_read += len(data)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def test_a_part_of_a_file_reads_its_range_not_the_whole_file(tmp_path: Path, fs: pafs.FileSystem) -> None:
    """A small remote file read whole is one request; a file split between threads must not be read whole by
    every part (each part once read all of it: the bytes read grew with the number of parts)."""
    path = write_path(tmp_path, "delta_0000001_0000003")
    w = AcidWriter(fs, path, COLS, options=WriterOptions(), side_file=True)
    for wid in (1, 2, 3):  # three stripes of ~200 KB: far above ORC's 16 KB guess at a footer
        msgs = [os.urandom(24).hex() for _ in range(4000)]
        w.insert(wid, B0, pa.table({"id": pa.array(range(4000), pa.int32()), "msg": msgs}))
        length = w.flush()
    w.close()
    counting = _CountingHandler()
    remote = pafs.PyFileSystem(counting)
    list(iter_event_batches(remote, path, length=length))
    assert counting.bytes_read == length  # all of it, at once
    counting.bytes_read = 0
    for k in range(3):
        list(iter_event_batches(remote, path, length=length, part=(k, 3)))
    assert counting.bytes_read < 1.5 * length  # each part its stripes (and the tail), not the whole file


def test_column_selection(tmp_path: Path, fs: pafs.FileSystem) -> None:
    path, _ = streaming_file(tmp_path, fs)
    assert read_events(fs, path, include_row=False).column_names == [
        "operation",
        "originalTransaction",
        "bucket",
        "rowId",
        "currentTransaction",
    ]
    assert read_events(fs, path, columns=["rowId", "row"]).column_names == ["rowId", "row"]
    with pytest.raises(ValueError, match="unknown event columns"):
        read_events(fs, path, columns=["nope"])


def test_every_non_footer_length_is_corrupt(tmp_path: Path, fs: pafs.FileSystem) -> None:
    """Any cut that is not a flush offset must fail loudly rather than return a wrong set of rows."""
    path, offsets = streaming_file(tmp_path, fs)
    size = Path(path).stat().st_size
    for length in range(0, size + 1, 7):
        if length in offsets:
            continue
        with pytest.raises(CorruptFileError) as info:
            read_events(fs, path, length=length)
        assert info.value.path == path
    with pytest.raises(CorruptFileError, match="beyond the end"):
        read_events(fs, path, length=size + 1)


def test_truncated_copy_and_garbage_tail(tmp_path: Path, fs: pafs.FileSystem) -> None:
    path, offsets = streaming_file(tmp_path, fs)
    data = Path(path).read_bytes()
    cut = tmp_path / "cut"
    cut.write_bytes(data[: offsets[-1] - 1])
    with pytest.raises(CorruptFileError, match="no valid ORC footer"):
        read_events(fs, str(cut))
    garbled = bytearray(data)
    garbled[-20:-2] = b"\xff" * 18  # footer bytes overwritten, postscript length byte intact
    bad = tmp_path / "bad"
    bad.write_bytes(bytes(garbled))
    with pytest.raises(CorruptFileError):
        read_events(fs, str(bad))
    with pytest.raises(CorruptFileError):
        read_acid_metadata(fs, str(bad))
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(CorruptFileError, match="too short"):
        read_events(fs, str(empty))


def test_event_schemas_are_checked_from_pyarrow_and_from_our_tail_alike(
    tmp_path: Path, fs: pafs.FileSystem
) -> None:
    """A whole file's schema is checked from pyarrow's footer, a prefix's or the metadata's from our parse of
    the tail: both refuse the same files with the same words."""
    flat = tmp_path / "flat"
    events = {name: pa.array([1], pa.int64()) for name in ("operation", "originalTransaction", "bucket")}
    events |= {"rowId": pa.array([0], pa.int64()), "currentTransaction": pa.array([1], pa.int64())}
    po.write_table(pa.table({**events, "row": pa.array([7], pa.int32())}), str(flat))
    plain = tmp_path / "plain"
    po.write_table(pa.table({"id": [1]}), str(plain))
    for path, problem in ((flat, "'row' column is not a struct"), (plain, "not an ACID event file")):
        for read in (read_events, read_acid_metadata):
            with pytest.raises(CorruptFileError, match=problem):
                read(fs, str(path))


def test_missing_key_index_is_corrupt_metadata(tmp_path: Path, fs: pafs.FileSystem) -> None:
    """pyarrow-written event-shaped files lack hive.acid.key.index (Hive refuses them too)."""
    path, _ = streaming_file(tmp_path, fs)
    copy = tmp_path / "copy"
    po.write_table(read_events(fs, path), str(copy))
    assert read_events(fs, str(copy)).num_rows == 300
    with pytest.raises(CorruptFileError, match=r"hive\.acid\.key\.index"):
        read_acid_metadata(fs, str(copy))


def test_missing_file_raises_file_not_found(tmp_path: Path, fs: pafs.FileSystem) -> None:
    with pytest.raises(FileNotFoundError):
        read_events(fs, str(tmp_path / "nope"))


def test_row_fields_decode_only_the_asked_children_by_position(tmp_path: Path) -> None:
    fs = pafs.LocalFileSystem()
    cols = parse_columns("id int, msg string, amount double")
    path = write_path(tmp_path, "delta_0000001_0000001")
    w = AcidWriter(fs, path, cols, options=WriterOptions(), side_file=False)
    w.insert(1, B0, pa.table({"id": pa.array([1, 2], pa.int32()), "msg": ["a", "b"], "amount": [0.5, 1.5]}))
    w.close()
    table = read_events(fs, path, row_fields=[2, 0])
    assert table.schema.field("row").type == pa.struct([("id", pa.int32()), ("amount", pa.float64())])
    assert table.column("row").to_pylist() == [{"id": 1, "amount": 0.5}, {"id": 2, "amount": 1.5}]
    (batch,) = iter_event_batches(fs, path, columns=["rowId", "row"], row_fields=[1])
    assert batch.schema.names == ["rowId", "row"] and batch.column("row").to_pylist() == [
        {"msg": "a"},
        {"msg": "b"},
    ]
    assert read_events(fs, path, row_fields=[]).schema.names == [
        "operation",
        "originalTransaction",
        "bucket",
        "rowId",
        "currentTransaction",
    ]
    # a position past the file's fields is a column added since it was written: left out (it reads NULL)
    assert read_events(fs, path, row_fields=[3, 1]).column("row").to_pylist() == [{"msg": "a"}, {"msg": "b"}]
    assert "row" not in read_events(fs, path, row_fields=[3]).schema.names
    # with the table's column names, fields are found by name (a renamed column is not found), as Hive does
    named = read_events(fs, path, row_fields=[0, 1], row_names=["amount", "renamed", "id"])
    assert named.column("row").to_pylist() == [{"amount": 0.5}, {"amount": 1.5}]
