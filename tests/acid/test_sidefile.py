from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from acidstream.acid.names import ParsedDelta, side_file_path
from acidstream.acid.sidefile import SideFileWriter, logical_extent, read_flush_lengths
from acidstream.errors import CorruptFileError, SideFileNotReadable

FS = pafs.LocalFileSystem()
STREAMING = ParsedDelta(11, 20, None, 0, False)


def longs(*values: int) -> bytes:
    return b"".join(struct.pack(">q", v) for v in values)


@pytest.fixture
def data_file(tmp_path: Path) -> str:
    d = tmp_path / "delta_0000011_0000020"
    d.mkdir()
    f = d / "bucket_00000"
    f.write_bytes(b"x" * 100)
    return str(f)


def test_writer_protocol_bytes(data_file: str) -> None:
    w = SideFileWriter.create(FS, data_file)
    side = Path(side_file_path(data_file))
    assert side.read_bytes() == longs(0)  # written and flushed at creation
    w.append(40)
    w.append(40)
    w.append(90)
    assert side.read_bytes() == longs(0, 40, 40, 90)
    assert read_flush_lengths(FS, str(side)) == [0, 40, 40, 90]
    assert logical_extent(FS, data_file, STREAMING, 100)[0] == 90
    w.close_and_delete()
    assert not side.exists()
    assert logical_extent(FS, data_file, STREAMING, 100)[0] == 100


def test_flushed_bytes_visible_to_another_process(data_file: str) -> None:
    w = SideFileWriter.create(FS, data_file)
    w.append(77)
    code = f"import sys; sys.stdout.write(open({side_file_path(data_file)!r}, 'rb').read().hex())"
    seen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert bytes.fromhex(seen) == longs(0, 77)
    w.close_and_delete()


def test_create_fails_if_side_file_exists(data_file: str) -> None:
    Path(side_file_path(data_file)).write_bytes(longs(0, 5))
    with pytest.raises(FileExistsError):
        SideFileWriter.create(FS, data_file)
    assert Path(side_file_path(data_file)).read_bytes() == longs(0, 5)  # untouched


def test_create_fails_if_exists_on_non_local_fs(data_file: str) -> None:
    sub = pafs.SubTreeFileSystem(str(Path(data_file).parent), FS)
    SideFileWriter.create(sub, "bucket_00000").close_and_delete()
    Path(side_file_path(data_file)).write_bytes(b"")
    with pytest.raises(FileExistsError):
        SideFileWriter.create(sub, "bucket_00000")


def test_append_rejects_decreasing_offset(data_file: str) -> None:
    w = SideFileWriter.create(FS, data_file)
    w.append(50)
    with pytest.raises(ValueError, match="previous 50"):
        w.append(49)
    w.close_and_delete()
    with pytest.raises(ValueError, match="closed"):
        w.append(60)


def test_absent_side_file(data_file: str) -> None:
    assert read_flush_lengths(FS, side_file_path(data_file)) is None
    assert logical_extent(FS, data_file, STREAMING, 100)[0] == 100


@pytest.mark.parametrize(
    "parsed",
    [
        None,
        ParsedDelta(5, 5, None, 0, False),
        ParsedDelta(11, 20, None, 0, True),
        ParsedDelta(11, 20, None, 9, False),
    ],
)
def test_side_file_ignored_where_hive_ignores_it(data_file: str, parsed: ParsedDelta | None) -> None:
    Path(side_file_path(data_file)).write_bytes(longs(0, 30))
    assert logical_extent(FS, data_file, parsed, 100)[0] == 100


def test_only_first_long_means_nothing_committed(data_file: str) -> None:
    Path(side_file_path(data_file)).write_bytes(longs(0))
    assert logical_extent(FS, data_file, STREAMING, 100)[0] == 0


def test_empty_side_file_is_not_readable(data_file: str) -> None:
    Path(side_file_path(data_file)).write_bytes(b"")
    assert read_flush_lengths(FS, side_file_path(data_file)) == []
    with pytest.raises(SideFileNotReadable, match=r"found but is not readable\.  Consider waiting") as exc:
        logical_extent(FS, data_file, STREAMING, 100)[0]
    assert exc.value.path == side_file_path(data_file)
    assert exc.value.retryable


def test_partial_trailing_long(data_file: str) -> None:
    Path(side_file_path(data_file)).write_bytes(longs(0, 11) + b"\x00\x00\x00")
    with pytest.raises(SideFileNotReadable, match="partial long") as exc:
        logical_extent(FS, data_file, STREAMING, 100)[0]
    assert side_file_path(data_file) in str(exc.value)


def test_decreasing_values_are_corrupt(data_file: str) -> None:
    Path(side_file_path(data_file)).write_bytes(longs(0, 60, 40))
    with pytest.raises(CorruptFileError, match="decreasing") as exc:
        logical_extent(FS, data_file, STREAMING, 100)[0]
    assert not isinstance(exc.value, SideFileNotReadable)


def test_negative_value_is_corrupt(data_file: str) -> None:
    Path(side_file_path(data_file)).write_bytes(longs(-1))
    with pytest.raises(CorruptFileError, match="negative"):
        read_flush_lengths(FS, side_file_path(data_file))


def test_length_beyond_physical_is_corrupt(data_file: str) -> None:
    Path(side_file_path(data_file)).write_bytes(longs(0, 101))
    with pytest.raises(CorruptFileError, match="beyond the physical length 100") as exc:
        logical_extent(FS, data_file, STREAMING, 100)[0]
    assert exc.value.path == data_file


def test_a_listing_older_than_the_side_file_is_not_corruption(data_file: str) -> None:
    """A reader beside a live writer: the listing saw 60 bytes, then the writer flushed to 90 and
    appended 90 to the side file, then the reader read the side file. The data file's length now is what
    counts, read after the side file."""
    Path(side_file_path(data_file)).write_bytes(longs(0, 40, 90))
    assert logical_extent(FS, data_file, STREAMING, 60) == (90, True)


def test_a_listing_older_than_the_close_takes_the_whole_closed_file(data_file: str) -> None:
    """The writer closed the file (final footer, side file deleted) after the listing saw 60 bytes."""
    assert logical_extent(FS, data_file, STREAMING, 60) == (100, False)


def test_orc_reads_our_side_file_like_hive(jvm: Any, spark: Any, data_file: str) -> None:
    """orc-core's ``OrcAcidUtils.getLastFlushLength`` (what Hive's readers use) sees the offsets we append."""
    fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    path = jvm.org.apache.hadoop.fs.Path(data_file)
    last = jvm.org.apache.orc.impl.OrcAcidUtils.getLastFlushLength
    assert last(fs, path) == 2**63 - 1  # no side file
    w = SideFileWriter.create(FS, data_file)
    assert last(fs, path) == 0
    w.append(12345678901)
    assert last(fs, path) == 12345678901
    w.close_and_delete()
