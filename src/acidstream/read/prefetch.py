"""Reading a plan's files from a remote store (S3, HDFS) ahead of their reader, several at a time.

A reader opens its files one after another, and on a remote store each costs two or three round trips before
its bytes arrive (pyarrow's S3 client asks for the object's size, then gets it; WebHDFS asked for the file's
status, then opened it at the namenode, which sent the reader to a DataNode): a merge reading 320 small delta
files spent most of its time waiting on them. The files a plan names, and their lengths, are known before the
first is opened, so they are fetched side by side, a bounded window ahead of the one being read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future

import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.acid.orc.reader import WHOLE_READ_BYTES
from acidstream.read.delegating import DelegatingHandler
from acidstream.read.planning import BucketTask, FileSlice, remote_pool
from acidstream.storage import local_path, read_prefix

#: Files fetched ahead of the last one opened (their bytes held until it is opened).
WINDOW = 16


def prefetching(fs: pafs.FileSystem, pieces: Iterable[FileSlice]) -> pafs.FileSystem:
    """``fs``, or on a remote store a filesystem whose ``open_input_file`` of each whole-read file of
    ``pieces`` (in the order a reader opens them) answers with its bytes fetched ahead; every other call goes
    to ``fs``. For reading only. A file of an open streaming batch (read up to its side file's length, with
    the checks of a prefix) is left to ``fs``."""
    if local_path(fs, "/") is not None:
        return fs
    order: dict[str, int] = {}
    for piece in pieces:
        if piece.part is None and not piece.open_batch and piece.length <= WHOLE_READ_BYTES:
            order.setdefault(piece.path, piece.length)
    if len(order) < 2:
        return fs
    return pafs.PyFileSystem(Prefetcher(fs, order))


def task_files(tasks: Iterable[BucketTask]) -> Iterator[FileSlice]:
    """The files of ``tasks`` in the order a bucket reader opens them: each task's delete files, then its
    insert files."""
    for task in tasks:
        yield from task.delete_files
        yield from task.insert_files


class Prefetcher(DelegatingHandler):
    """The handler of :func:`prefetching`'s filesystem (``lengths``: each file's, in the order it is read). A
    fetch that failed leaves the file's open to the store's own, which fails as it always did (a missing file:
    ``FileNotFoundError``; a file shorter than planned: a length beyond its end)."""

    def __init__(self, base: pafs.FileSystem, lengths: Mapping[str, int]) -> None:
        super().__init__(base)
        self._lengths = dict(lengths)
        self._order = list(lengths)
        self._index = {path: i for i, path in enumerate(self._order)}
        self._fetches: dict[str, Future[pa.Buffer]] = {}
        self._submitted = 0
        self._lock = threading.Lock()
        self._ahead(0)

    def _ahead(self, upto: int) -> None:
        """Submit the fetches of every file before position ``upto + WINDOW``."""
        with self._lock:
            pool = remote_pool()
            while self._submitted < min(len(self._order), upto + WINDOW):
                path = self._order[self._submitted]
                self._fetches[path] = pool.submit(self._fetch, path)
                self._submitted += 1

    def _fetch(self, path: str) -> pa.Buffer:
        return read_prefix(self._base, path, self._lengths[path])

    def open_input_file(self, path: str) -> pa.NativeFile:
        position = self._index.get(path)
        if position is None:
            return self._base.open_input_file(path)
        self._ahead(position + 1)
        with self._lock:
            fetch = self._fetches.pop(path, None)
        if fetch is None or fetch.exception() is not None:  # opened again, or the fetch failed
            return self._base.open_input_file(path)
        return pa.BufferReader(fetch.result())
