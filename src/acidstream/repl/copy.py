"""Copying a replicated file's new bytes to the replica, verified by continuing its CRC-32, with a copy of the
whole file as the fallback when checksums disagree (docs/format.md, Replication).

Order on the replica, so that no reader ever sees bytes a commit has not vouched for: a new open batch file gets
its side file (one long 0) first, then the data bytes are appended, then the side file is extended; a closed
file appears whole through a rename; the replica's commit comes after all of it (the loader's job). Appends
continue from the replica's physical length, so a loader killed mid-copy resumes without duplicating bytes.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import pyarrow.fs as pafs

from acidstream.acid.checksum import crc32, crc32_of_chunks, read_range
from acidstream.acid.names import side_file_path
from acidstream.acid.orc import prepare_directory
from acidstream.acid.sidefile import read_flush_lengths
from acidstream.errors import CorruptFileError, ReplicationError, StreamingIOFailure
from acidstream.metastore.models import TableDefinition, WrittenFile
from acidstream.repl.bootstrap import partition_files
from acidstream.repl.plan import BootstrapFile
from acidstream.storage import table_filesystem

log = logging.getLogger(__name__)
_LONG = struct.Struct(">q")


class SourceBytes(Protocol):
    """Where a replica reads source bytes: the source's files themselves, or a dump of them."""

    def read(self, path: str, start: int, end: int, *, event_id: int | None = None) -> Iterator[bytes]:
        """Bytes ``[start, end)`` of source file ``path`` (as named by event ``event_id``)."""
        ...

    def size(self, path: str, *, event_id: int | None = None) -> int:
        """How many bytes of ``path`` there are to copy (for files an event names without describing them)."""
        ...

    def current_files(
        self, table: TableDefinition, directory: str, *, event_id: int | None = None
    ) -> list[BootstrapFile]:
        """Every file now in the source's partition ``directory`` of ``table``: what a replica copies again
        when a file event ``event_id`` names is gone (cleaned before the replica copied it)."""
        ...


class LiveSource:
    """The source's files: a URI through the filesystem it names, a plain path (as writers name files in
    events) through ``filesystem`` — the source warehouse's (see :func:`source_filesystem`)."""

    def __init__(self, filesystem: pafs.FileSystem | None = None) -> None:
        self.filesystem = filesystem or pafs.LocalFileSystem()
        self.bytes_read = 0

    def _resolve(self, path: str) -> tuple[pafs.FileSystem, str]:
        return table_filesystem(path) if "://" in path else (self.filesystem, path)

    def size(self, path: str, *, event_id: int | None = None) -> int:
        fs, inner = self._resolve(path)
        info = fs.get_file_info(inner)
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(path)
        return int(info.size or 0)

    def read(self, path: str, start: int, end: int, *, event_id: int | None = None) -> Iterator[bytes]:
        fs, inner = self._resolve(path)
        for chunk in read_range(fs, inner, start, end):
            self.bytes_read += len(chunk)
            yield chunk

    def current_files(
        self, table: TableDefinition, directory: str, *, event_id: int | None = None
    ) -> list[BootstrapFile]:
        return partition_files(table, directory, None)


def source_filesystem(warehouse: str) -> pafs.FileSystem:
    """The filesystem of a source warehouse (a directory or URI), where its events' plain paths live."""
    return table_filesystem(warehouse)[0]


@dataclass
class CopyStats:
    bytes_copied: int = 0
    files_recopied: int = 0


@dataclass(frozen=True)
class Copied:
    """A replica file's state after a copy: its length and CRC-32 (as ``repl_files`` records them)."""

    path: str
    length: int
    crc32: int


class FileCopier:
    """Copies source files (or their new ranges) into a replica's filesystem."""

    def __init__(self, source: SourceBytes) -> None:
        self.source = source
        self.stats = CopyStats()

    def copy(
        self,
        fs: pafs.FileSystem,
        target: str,
        written: WrittenFile,
        have: tuple[int, int] | None,
        *,
        event_id: int | None = None,
    ) -> Copied:
        """Bring ``target`` to hold source bytes ``[0, written.length)`` (at least), verified by checksum.

        ``have``: (length, CRC-32) the replica recorded for the file at its last applied event (None: none).
        """
        with _replica_disk(target):
            return self._copy(fs, target, written, have, event_id)

    def _copy(
        self,
        fs: pafs.FileSystem,
        target: str,
        written: WrittenFile,
        have: tuple[int, int] | None,
        event_id: int | None,
    ) -> Copied:
        physical = _size(fs, target)
        if written.open and physical is None:
            _write_side_file(fs, target, [0])  # readers see 0 bytes until the side file says more
            physical = _size(fs, target)
        length, value = have if have is not None else (0, 0)
        if physical is None:  # a new closed file appears whole, through a rename
            why = "missing on the replica" if have is not None else None
            return self._whole(fs, target, written, event_id, why)
        if physical < length:
            return self._whole(fs, target, written, event_id, "shorter on the replica than recorded")
        if (
            physical > length
        ):  # an earlier attempt (or the bootstrap) copied ahead: those bytes are the source's
            value = crc32_of_chunks(read_range(fs, target, length, physical), value)
            length = physical
        if written.length > length:
            value = self._append(fs, target, written, length, value, event_id)
            length = written.length
            if value != written.crc32:
                return self._whole(fs, target, written, event_id, "checksum mismatch after append")
        elif written.length == length:
            if value != written.crc32:
                return self._whole(fs, target, written, event_id, "checksum mismatch")
        else:
            prefix = crc32_of_chunks(read_range(fs, target, 0, written.length))
            if prefix != written.crc32:
                return self._whole(fs, target, written, event_id, "checksum mismatch of the copied prefix")
        self._finish_side_file(fs, target, written, length)
        return Copied(target, length, value)

    def _append(
        self,
        fs: pafs.FileSystem,
        target: str,
        written: WrittenFile,
        start: int,
        value: int,
        event_id: int | None,
    ) -> int:
        chunks = self.source.read(written.path, start, written.length, event_id=event_id)
        if _size(fs, target) is None:
            prepare_directory(fs, target.rsplit("/", 1)[0])
            stream = fs.open_output_stream(target)
        else:
            stream = fs.open_append_stream(target)
        with stream:
            for chunk in chunks:
                stream.write(chunk)
                value = crc32(chunk, value)
                self.stats.bytes_copied += len(chunk)
        crash_window()
        return value

    def _whole(
        self, fs: pafs.FileSystem, target: str, written: WrittenFile, event_id: int | None, why: str | None
    ) -> Copied:
        """A new file, or (``why``) a whole-file copy when a range copy cannot be trusted."""
        if why is not None:
            log.warning("replication: copying %s whole (%s)", written.path, why)
            self.stats.files_recopied += 1
        return self._copy_whole(fs, target, written, event_id, True)

    def copy_whole(
        self,
        fs: pafs.FileSystem,
        target: str,
        written: WrittenFile,
        *,
        event_id: int | None = None,
        verify: bool = True,
    ) -> Copied:
        """Copy ``[0, length)`` into a hidden file, check its CRC-32 (unless not ``verify``: none is known),
        rename it over ``target``; an open file's side file says 0 before and its length after."""
        with _replica_disk(target):
            return self._copy_whole(fs, target, written, event_id, verify)

    def _copy_whole(
        self, fs: pafs.FileSystem, target: str, written: WrittenFile, event_id: int | None, verify: bool
    ) -> Copied:
        directory, name = target.rsplit("/", 1)
        prepare_directory(fs, directory)
        staging = f"{directory}/.{name}.repl-{uuid.uuid4().hex}"
        value = 0
        try:
            with fs.open_output_stream(staging) as out:
                for chunk in self.source.read(written.path, 0, written.length, event_id=event_id):
                    out.write(chunk)
                    value = crc32(chunk, value)
                    self.stats.bytes_copied += len(chunk)
            if verify and value != written.crc32:
                raise ReplicationError(
                    f"{written.path}: the source's first {written.length} bytes have CRC-32 {value}, its commit "
                    f"recorded {written.crc32}: the source file changed or is corrupt"
                )
            if written.open and _size(fs, side_file_path(target)) is None:
                _write_side_file(fs, target, [0])
            fs.move(staging, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                fs.delete_file(staging)
        self._finish_side_file(fs, target, written, written.length)
        return Copied(target, written.length, value)

    def _finish_side_file(self, fs: pafs.FileSystem, target: str, written: WrittenFile, length: int) -> None:
        """After the data: the side file says ``length`` (open files), or goes (files the source closed)."""
        side = side_file_path(target)
        if not written.open:
            with contextlib.suppress(FileNotFoundError):
                fs.delete_file(side)
            return
        try:
            lengths = read_flush_lengths(fs, side)
        except CorruptFileError:  # a partial long from a killed append: rewrite what is whole
            lengths = None
            _rewrite_side_file(fs, side)
            lengths = read_flush_lengths(fs, side)
        if lengths is None:
            _write_side_file(fs, target, [length])
        elif not lengths or lengths[-1] < length:
            with fs.open_append_stream(side) as out:
                out.write(_LONG.pack(length))


#: Seconds to pause (at random up to) at each step of a load — after a file's bytes, before each event's record:
#: lets crash tests kill -9 a loader at many different points.
STEP_DELAY_ENV = "ACIDSTREAM_REPL_STEP_DELAY"


def crash_window() -> None:
    delay = os.environ.get(STEP_DELAY_ENV)
    if delay:
        time.sleep(random.random() * float(delay))


#: Errors of the replica's disk itself (full, over quota, failing): the copy stops, the event stays unapplied.
_DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})


@contextlib.contextmanager
def _replica_disk(target: str) -> Iterator[None]:
    """A full or failing replica disk raises :class:`StreamingIOFailure` (storage I/O, retryable) naming the
    file: the event is not recorded as applied, and a later load resumes from the bytes already there."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in _DISK_ERRORS:
            raise
        raise StreamingIOFailure(f"copying to the replica file {target}: {exc}") from exc


def _size(fs: pafs.FileSystem, path: str) -> int | None:
    info = fs.get_file_info(path)
    return None if info.type == pafs.FileType.NotFound else int(info.size or 0)


def _write_side_file(fs: pafs.FileSystem, data_path: str, values: list[int]) -> None:
    prepare_directory(fs, data_path.rsplit("/", 1)[0])
    with fs.open_output_stream(side_file_path(data_path)) as out:
        out.write(b"".join(_LONG.pack(v) for v in values))


def _rewrite_side_file(fs: pafs.FileSystem, side: str) -> None:
    with fs.open_input_stream(side) as f:
        data = f.read()
    whole = data[: len(data) - len(data) % _LONG.size]
    directory, name = side.rsplit("/", 1)
    staging = f"{directory}/.{name}.repl-{uuid.uuid4().hex}"
    with fs.open_output_stream(staging) as out:
        out.write(whole)
    fs.move(staging, side)
