"""A pyarrow filesystem handler passing every call to another filesystem: the base of the read path's
wrappers, each of which answers some calls itself (:mod:`acidstream.read.listing`,
:mod:`acidstream.read.prefetch`)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs


class DelegatingHandler(pafs.FileSystemHandler):
    """Every call goes to ``base``; its type name stays the store's (``py::s3``: still an object store)."""

    def __init__(self, base: pafs.FileSystem) -> None:
        self._base = base

    def get_type_name(self) -> str:
        return str(self._base.type_name).rsplit("::", 1)[-1]

    def normalize_path(self, path: str) -> str:
        return str(self._base.normalize_path(path))

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return list(self._base.get_file_info(paths))

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return list(self._base.get_file_info(selector))

    def create_dir(self, path: str, recursive: bool) -> None:
        self._base.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self._base.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self._base.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise OSError("a wrapping filesystem deletes nothing at its root")

    def delete_file(self, path: str) -> None:
        self._base.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self._base.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self._base.copy_file(src, dest)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self._base.open_input_stream(path)

    def open_input_file(self, path: str) -> pa.NativeFile:
        return self._base.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self._base.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self._base.open_append_stream(path, metadata=metadata)
