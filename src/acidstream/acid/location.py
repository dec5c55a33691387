"""Where a table or partition location lives: a pyarrow filesystem and the path inside it."""

from __future__ import annotations

import os

import pyarrow.fs as pafs

from acidstream.faults import substitute


def table_filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """``(filesystem, path)`` for a local path, a ``file://`` URI or any URI pyarrow resolves (s3://, hdfs://).

    Tests may substitute the filesystem (the ``storage.filesystem`` fault point) with one that fails."""
    if location.startswith("file://"):
        fs, path = pafs.LocalFileSystem(), os.path.abspath(location[len("file://") :])
    elif "://" in location:
        fs, path = pafs.FileSystem.from_uri(location)
    else:
        fs, path = pafs.LocalFileSystem(), os.path.abspath(location)
    return substitute("storage.filesystem", fs), path


def local_path(fs: pafs.FileSystem, path: str) -> str | None:
    """The OS path of ``path`` when ``fs`` is the local filesystem (or a sub-tree of it), else None."""
    if isinstance(fs, pafs.LocalFileSystem):
        return path
    if isinstance(fs, pafs.SubTreeFileSystem) and isinstance(fs.base_fs, pafs.LocalFileSystem):
        return os.path.join(fs.base_path, path.lstrip("/"))
    return None


def truncate(fs: pafs.FileSystem, path: str, length: int) -> bool:
    """Cut the file at ``path`` to ``length`` bytes where the filesystem can (local files); False elsewhere.

    pyarrow.fs offers no truncation; HDFS could, object stores cannot (and they never hold open streaming
    files, whose torn ends are what this cuts).
    """
    local = local_path(fs, path)
    if local is None:
        return False
    os.truncate(local, length)
    return True
