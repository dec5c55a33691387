"""Reading a plan's files from an object store ahead of their reader, several at a time.

A reader opens its files one after another, and on an object store each costs two round trips before its
bytes arrive (pyarrow's client asks for the object's size, then gets it): a merge's worker reading 160 small
delta files spent most of its time waiting on them. The files a plan names are known before the first is
opened, so they are fetched side by side, a bounded window ahead of the one being read.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.acid.orc.reader import WHOLE_READ_BYTES
from acidstream.read.delegating import DelegatingHandler
from acidstream.read.planning import BucketTask
from acidstream.storage import is_object_store

#: Requests in flight at once, per process.
FETCH_THREADS = 8
#: Files fetched ahead of the last one opened (their bytes held until it is opened).
WINDOW = 16


@functools.cache
def _fetch_pool(pid: int) -> ThreadPoolExecutor:
    """This process's pool (one per pid: a forked worker does not inherit its parent's threads)."""
    return ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="acidstream-fetch")


def prefetching(fs: pafs.FileSystem, tasks: Sequence[BucketTask]) -> pafs.FileSystem:
    """``fs``, or on an object store a filesystem whose ``open_input_file`` of each whole-read file of
    ``tasks`` (delete files, then insert files, task by task: the order a reader opens them) answers with its
    bytes fetched ahead; every other call goes to ``fs``."""
    if not is_object_store(fs):
        return fs
    order: list[str] = []
    for task in tasks:
        for piece in (*task.delete_files, *task.insert_files):
            if piece.part is None and piece.length <= WHOLE_READ_BYTES and piece.path not in order:
                order.append(piece.path)
    if len(order) < 2:
        return fs
    return pafs.PyFileSystem(Prefetcher(fs, order))


class Prefetcher(DelegatingHandler):
    """The handler of :func:`prefetching`'s filesystem. A fetch that failed raises at the file's open, as the
    store's own open would (a missing file: ``FileNotFoundError``)."""

    def __init__(self, base: pafs.FileSystem, order: Sequence[str]) -> None:
        super().__init__(base)
        self._order = list(order)
        self._index = {path: i for i, path in enumerate(self._order)}
        self._fetches: dict[str, Future[pa.Buffer]] = {}
        self._submitted = 0
        self._lock = threading.Lock()
        self._ahead(0)

    def _ahead(self, upto: int) -> None:
        """Submit the fetches of every file before position ``upto + WINDOW``."""
        with self._lock:
            pool = _fetch_pool(os.getpid())
            while self._submitted < min(len(self._order), upto + WINDOW):
                path = self._order[self._submitted]
                self._fetches[path] = pool.submit(self._fetch, path)
                self._submitted += 1

    def _fetch(self, path: str) -> pa.Buffer:
        with self._base.open_input_file(path) as source:
            return source.read_buffer()

    def open_input_file(self, path: str) -> pa.NativeFile:
        position = self._index.get(path)
        if position is None:
            return self._base.open_input_file(path)
        self._ahead(position + 1)
        with self._lock:
            fetch = self._fetches.pop(path, None)
        if fetch is None:  # opened a second time: its bytes were handed over already
            return self._base.open_input_file(path)
        return pa.BufferReader(fetch.result())
