"""Where a table or partition location lives: a pyarrow filesystem and the path inside it."""

from __future__ import annotations

import os

import pyarrow.fs as pafs


def table_filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """``(filesystem, path)`` for a local path, a ``file://`` URI or any URI pyarrow resolves (s3://, hdfs://)."""
    if location.startswith("file://"):
        return pafs.LocalFileSystem(), os.path.abspath(location[len("file://") :])
    if "://" in location:
        return pafs.FileSystem.from_uri(location)
    return pafs.LocalFileSystem(), os.path.abspath(location)
