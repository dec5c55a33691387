"""The ``bucket_N_flush_length`` side file of open streaming files: write it, read it, trust it.

A streaming batch keeps one ORC file per bucket open across many commits; the side file lists the offsets of
the readable footers written at each commit, so readers use the committed prefix of a file still being
written. Content: 8-byte big-endian signed longs, no header (Java ``DataOutputStream.writeLong``); see
docs/format.md, Side files.
"""

from __future__ import annotations

import contextlib
import os
import struct

import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.acid.names import ParsedDelta, side_file_path
from acidstream.errors import CorruptFileError, SideFileNotReadable
from acidstream.storage import flush

_LONG = struct.Struct(">q")
_NOT_READABLE = "found but is not readable.  Consider waiting or orcfiledump --recover"


def read_flush_lengths(fs: pafs.FileSystem, side_path: str) -> list[int] | None:
    """All recorded footer offsets in order; None when there is no side file.

    An empty file gives ``[]`` (the caller decides, see ``logical_extent``). A trailing partial long raises
    SideFileNotReadable (Hive propagates the EOFException of ``readLong``); negative or decreasing values
    raise CorruptFileError, since ORC footers only ever move forward.
    """
    try:
        with fs.open_input_stream(side_path) as stream:
            data = stream.read()
    except FileNotFoundError:
        return None
    if len(data) % _LONG.size:
        raise SideFileNotReadable(
            side_path, f"ends in a partial long ({len(data)} bytes is not a multiple of 8); {_NOT_READABLE}"
        )
    values = [v for (v,) in _LONG.iter_unpack(data)]
    for i, v in enumerate(values):
        if v < 0 or (i and v < values[i - 1]):
            raise CorruptFileError(side_path, f"flush length #{i} = {v} is negative or decreasing: {values}")
    return values


def logical_extent(
    fs: pafs.FileSystem, data_path: str, parsed_delta: ParsedDelta | None, physical_length: int
) -> tuple[int, bool]:
    """``AcidUtils.getLogicalLength`` — how many bytes of ``data_path`` a reader may use — and whether a side
    file set it (the writer's batch is still open, so JVM readers of the physical tail must not get the file).

    Files outside a delta that may carry a side file, and files whose side file is absent (the writer closed
    the file, which deletes it), are used whole. Otherwise the last recorded offset counts; an empty side
    file (created but its first long not yet flushed) raises SideFileNotReadable, as Hive throws "found but
    is not readable": readers should retry shortly. An offset beyond the physical length means the data
    file lost bytes the writer had published: CorruptFileError.

    ``physical_length`` (from a directory listing) may be older than the side file: a live writer appends
    data, then its length to the side file, and at close its final footer, then deletes the side file. So
    the data file's length is taken again *after* reading the side file: it then covers every length the
    side file held, and the whole file once the side file is gone.
    """
    if parsed_delta is None or not parsed_delta.may_contain_side_file:
        return physical_length, False
    side = side_file_path(data_path)
    lengths = read_flush_lengths(fs, side)
    info = fs.get_file_info(data_path)
    if info.type == pafs.FileType.File and info.size is not None:
        physical_length = info.size
    if lengths is None:
        return physical_length, False
    if not lengths:
        raise SideFileNotReadable(side, _NOT_READABLE)
    last = lengths[-1]
    if last > physical_length:
        raise CorruptFileError(
            data_path, f"side file records flush length {last} beyond the physical length {physical_length}"
        )
    return last, True


def _create_exclusive(fs: pafs.FileSystem, path: str) -> None:
    """Fail if ``path`` exists, like Hive's ``create(overwrite=false)``.

    On a LocalFileSystem ``O_CREAT|O_EXCL`` makes this atomic. pyarrow.fs offers no exclusive create for
    other filesystems, so there it is check-then-create: two writers racing on the same side file could both
    pass. acidstream never has two writers for one (delta, bucket), since write ids are allocated uniquely.
    """
    if isinstance(fs, pafs.LocalFileSystem):
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            raise FileExistsError(f"side file {path} already exists") from None
        return
    if fs.get_file_info(path).type != pafs.FileType.NotFound:
        raise FileExistsError(f"side file {path} already exists")


class SideFileWriter:
    """The writer half of ``OrcRecordUpdater``'s side-file protocol.

    Each long is flushed as soon as it is written. On LocalFileSystem a pyarrow output stream writes straight
    to the OS, so the bytes are visible to other processes after ``flush()`` (not necessarily durable
    across a machine crash). Object stores (S3, GCS) publish nothing before close, so side files, like
    batches of more than one transaction, are only meaningful on filesystems with visible flushes.
    """

    def __init__(self, fs: pafs.FileSystem, side_path: str, stream: pa.NativeFile) -> None:
        self.fs, self.path, self._stream = fs, side_path, stream
        self._last = 0

    @classmethod
    def create(cls, fs: pafs.FileSystem, data_path: str) -> SideFileWriter:
        """Create the side file of ``data_path`` (must not exist) holding one long 0, flushed."""
        side = side_file_path(data_path)
        _create_exclusive(fs, side)
        try:
            writer = cls(fs, side, fs.open_output_stream(side))
            writer._write(0)
        except OSError:
            with contextlib.suppress(
                OSError
            ):  # an empty side file would make readers wait for its first long
                fs.delete_file(side)
            raise
        return writer

    @property
    def last(self) -> int:
        """The last length appended (0 when none was): readers may be using any length up to it."""
        return self._last

    def append(self, offset: int) -> None:
        """Record the end offset of the footer just written; offsets never move backwards."""
        if offset < self._last:
            raise ValueError(f"flush length {offset} < previous {self._last} for {self.path}")
        self._write(offset)
        self._last = offset

    def _write(self, value: int) -> None:
        if self._stream.closed:
            raise ValueError(f"side file {self.path} is closed")
        self._stream.write(_LONG.pack(value))
        flush(self.fs, self.path, self._stream)

    def close(self) -> None:
        """Close and keep the side file (its data file could not be cut back to the last length in it)."""
        if not self._stream.closed:
            self._stream.close()

    def close_and_delete(self) -> None:
        """Close and delete, as ``OrcRecordUpdater.close`` does once the data file has its final footer."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(self.path)
