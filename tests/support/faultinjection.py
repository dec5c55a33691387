"""Real faults for tests: a small tmpfs that fills up, a ``pyarrow.fs`` filesystem whose writes (or reads)
fail, a SQLite write lock held by another process.

A tmpfs needs root (``mount``); :func:`full_disk` uses one when it can and otherwise substitutes, through the
``storage.filesystem`` fault point, a filesystem that refuses writes past a byte budget as a full disk does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from acidstream import faults
from acidstream.read.delegating import DelegatingHandler


def can_mount_tmpfs() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None and shutil.which("umount") is not None


@contextlib.contextmanager
def small_tmpfs(directory: Path, size: int) -> Iterator[Path]:
    """A tmpfs of ``size`` bytes mounted on ``directory`` (made if missing), unmounted however the block ends."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(directory)],
        check=True,
        capture_output=True,
    )
    try:
        yield directory
    finally:
        done = subprocess.run(["umount", str(directory)], capture_output=True)
        if done.returncode != 0:  # a file still open somewhere: detach now, freed when it closes
            subprocess.run(["umount", "-l", str(directory)], check=True, capture_output=True)


class WriteBudget:
    """Shared by every stream of a :class:`FailingFileSystem`: bytes written, and write/flush calls made."""

    def __init__(self, capacity: int | None = None, fail_call: int | None = None, code: int = errno.EIO):
        self.capacity, self.fail_call, self.code = capacity, fail_call, code
        self.written = 0
        self.calls = 0
        self._lock = threading.Lock()

    def call(self, what: str) -> None:
        """Count a write or flush call; the ``fail_call``-th fails (``code``) and so does every later one."""
        with self._lock:
            self.calls += 1
            if self.fail_call is not None and self.calls >= self.fail_call:
                raise OSError(self.code, f"{os.strerror(self.code)} (injected at {what} call {self.calls})")

    def take(self, wanted: int) -> int:
        """How many of ``wanted`` bytes still fit (all of them without a capacity)."""
        with self._lock:
            room = wanted if self.capacity is None else max(0, min(wanted, self.capacity - self.written))
            self.written += room
            return room


class _FailingStream:
    """A file-like output stream over a real one: writes what fits in the budget, then fails like a full disk."""

    def __init__(self, inner: pa.NativeFile, budget: WriteBudget) -> None:
        self._inner, self._budget = inner, budget

    @property
    def closed(self) -> bool:
        return bool(self._inner.closed)

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return int(self._inner.tell())

    def write(self, data: Any) -> int:
        self._budget.call("write")
        view = memoryview(data).cast("B")
        room = self._budget.take(len(view))
        if room:
            self._inner.write(view[:room])
        if room < len(view):
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        return len(view)

    def flush(self) -> None:
        self._budget.call("flush")
        self._inner.flush()

    def close(self) -> None:
        self._inner.close()


class _FailingHandler(DelegatingHandler):
    """Every call goes to ``base`` (:class:`~acidstream.read.delegating.DelegatingHandler`); output streams go
    through the budget."""

    def __init__(self, base: pafs.FileSystem, budget: WriteBudget) -> None:
        super().__init__(base)
        self.budget = budget

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _FailingHandler) and other._base.equals(self._base)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def get_type_name(self) -> str:
        return str(self._base.type_name)  # it fails writes, and can do whatever its base can

    def delete_root_dir_contents(self) -> None:
        raise OSError(errno.EPERM, "refusing to empty the root directory")

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return pa.PythonFile(_FailingStream(self._base.open_output_stream(path), self.budget), mode="w")

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return pa.PythonFile(_FailingStream(self._base.open_append_stream(path), self.budget), mode="w")


def failing_filesystem(base: pafs.FileSystem, budget: WriteBudget) -> pafs.FileSystem:
    """``base`` seen through :class:`WriteBudget`: writes past its capacity or from its failing call fail."""
    return pafs.PyFileSystem(_FailingHandler(base, budget))


@contextlib.contextmanager
def failing_writes(budget: WriteBudget) -> Iterator[WriteBudget]:
    """Every table location opened meanwhile (``storage.filesystem``) writes through ``budget``."""
    with faults.armed("storage.filesystem", lambda fs: failing_filesystem(fs, budget)):
        yield budget


#: The kinds of full disk :func:`full_disk` makes (tests parametrise over them; a tmpfs needs root).
class _UnreadableHandler(_FailingHandler):
    """A disk whose directory listings (``fails="listing"``) or data file reads (``"reading"``) fail with
    EIO, as a disk with bad sectors answers; side files and writes work."""

    def __init__(self, base: pafs.FileSystem, fails: str) -> None:
        super().__init__(base, WriteBudget())
        self.fails = fails

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        if self.fails == "listing":
            raise OSError(errno.EIO, f"{os.strerror(errno.EIO)} (injected: listing {selector.base_dir})")
        return super().get_file_info_selector(selector)

    def open_input_file(self, path: str) -> pa.NativeFile:
        if self.fails == "reading":
            raise OSError(errno.EIO, f"{os.strerror(errno.EIO)} (injected: reading {path})")
        return super().open_input_file(path)


@contextlib.contextmanager
def failing_reads(fails: str) -> Iterator[None]:
    """Every table location opened meanwhile (``storage.filesystem``) fails its listings or its data files'
    reads (see :class:`_UnreadableHandler`)."""
    with faults.armed("storage.filesystem", lambda fs: pafs.PyFileSystem(_UnreadableHandler(fs, fails))):
        yield


DISK_KINDS = ("tmpfs", "failing-fs")


def skip_unless_possible(kind: str) -> None:
    if kind == "tmpfs" and not can_mount_tmpfs():
        pytest.skip("mounting a tmpfs needs root (the failing-fs variant runs instead)")


class SmallDisk:
    """A directory with little room: a tmpfs, or one written through a :class:`FailingFileSystem` budget."""

    def __init__(self, path: Path, size: int, budget: WriteBudget | None) -> None:
        self.path, self.size, self._budget = path, size, budget

    @property
    def kind(self) -> str:
        return "tmpfs" if self._budget is None else "failing-fs"

    def make_room(self, more: int) -> None:
        """Free ``more`` bytes, as deleting other files would (a tmpfs grows, the budget rises)."""
        self.size += more
        if self._budget is None:
            subprocess.run(["mount", "-o", f"remount,size={self.size}", str(self.path)], check=True)
        else:
            assert self._budget.capacity is not None
            self._budget.capacity += more

    def fill_up(self, leave: int) -> None:
        """Let only about ``leave`` more bytes fit, as other files filling the disk would."""
        if self._budget is None:
            stats = os.statvfs(self.path)
            self.size = (stats.f_blocks - stats.f_bfree) * stats.f_frsize + leave
            subprocess.run(["mount", "-o", f"remount,size={self.size}", str(self.path)], check=True)
        else:
            self.size = self._budget.written + leave
            self._budget.capacity = self.size


@contextlib.contextmanager
def full_disk(directory: Path, capacity: int, kind: str | None = None) -> Iterator[SmallDisk]:
    """A directory that takes about ``capacity`` bytes: a tmpfs (``kind`` "tmpfs", the default as root), or
    a filesystem refusing writes past the budget ("failing-fs"), which cannot truncate either. Writes beyond
    it fail with ENOSPC; a tmpfs is unmounted however the block ends."""
    if kind is None:
        kind = "tmpfs" if can_mount_tmpfs() else "failing-fs"
    if kind == "tmpfs":
        with small_tmpfs(directory, capacity):
            yield SmallDisk(directory, capacity, None)
    else:
        directory.mkdir(parents=True, exist_ok=True)
        with failing_writes(WriteBudget(capacity=capacity)) as budget:
            yield SmallDisk(directory, capacity, budget)


def unmount_leftovers(under: Path) -> list[str]:
    """Detach any tmpfs still mounted below ``under`` (a test process interrupted mid-test); their paths."""
    left = []
    with open("/proc/mounts") as mounts:
        for line in mounts:
            _, where, fstype = line.split()[:3]
            if fstype == "tmpfs" and where.startswith(str(under)):
                left.append(where)
    for where in sorted(left, reverse=True):
        subprocess.run(["umount", "-l", where], capture_output=True)
    return left


@contextlib.contextmanager
def sqlite_write_lock_held(path: Path) -> Iterator[None]:
    """Another process holds the SQLite database's write lock (BEGIN IMMEDIATE) until the block ends."""
    code = (
        "import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('BEGIN IMMEDIATE')\nprint('held', flush=True)\nsys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(30)
