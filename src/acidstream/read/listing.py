"""One listing of a table's tree on an object store, in place of one per directory while a scan is planned.

Planning asks about each partition directory, lists it, then lists each base/delta directory it chose: on S3
a 4-partition table of 11 deltas each cost 52 requests. An object store lists every key under a prefix in one
request (a thousand keys a page), so the planner's questions are answered from that listing instead.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence

import pyarrow.fs as pafs

from acidstream.read.delegating import DelegatingHandler
from acidstream.storage import is_object_store, local_path


def listed_once(fs: pafs.FileSystem, roots: Sequence[str]) -> pafs.FileSystem:
    """``fs``, or on an object store a filesystem answering listings and file infos under ``roots`` from one
    recursive listing of each root (made at its first question); every other call goes to ``fs``. For the
    length of one plan: a listing is not refreshed."""
    if not is_object_store(fs):
        return fs
    return pafs.PyFileSystem(ListedTree(fs, roots))


class ListedTree(DelegatingHandler):
    """The handler of :func:`listed_once`'s filesystem."""

    def __init__(self, base: pafs.FileSystem, roots: Sequence[str]) -> None:
        super().__init__(base)
        self._roots = [r.rstrip("/") for r in roots]
        #: per listed root: each directory's children, and each path's info
        self._listed: dict[str, tuple[dict[str, list[pafs.FileInfo]], dict[str, pafs.FileInfo]]] = {}

    def _tree(self, path: str) -> tuple[str, dict[str, list[pafs.FileInfo]], dict[str, pafs.FileInfo]] | None:
        """(root, children, infos) of the listed root holding ``path``, listing it first if need be."""
        root = next((r for r in self._roots if path == r or path.startswith(r + "/")), None)
        if root is None:
            return None
        if root not in self._listed:
            children: dict[str, list[pafs.FileInfo]] = defaultdict(list)
            infos: dict[str, pafs.FileInfo] = {}
            everything = pafs.FileSelector(root, recursive=True, allow_not_found=True)
            for info in self._base.get_file_info(everything):
                infos[info.path] = info
                children[info.path.rsplit("/", 1)[0]].append(info)
            self._listed[root] = (dict(children), infos)
        return (root, *self._listed[root])

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [self._info(p.rstrip("/")) for p in paths]

    def _info(self, path: str) -> pafs.FileInfo:
        tree = self._tree(path)
        if tree is None:
            return self._base.get_file_info(path)
        root, _, infos = tree
        if path == root:
            # a root with keys under it is a directory; an empty one may still have a marker object
            return pafs.FileInfo(path, pafs.FileType.Directory) if infos else self._base.get_file_info(path)
        return infos.get(path) or pafs.FileInfo(path, pafs.FileType.NotFound)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        directory = selector.base_dir.rstrip("/")
        tree = None if selector.recursive else self._tree(directory)
        if tree is None:
            return list(self._base.get_file_info(selector))
        _, children, _ = tree
        if directory in children:
            return list(children[directory])
        if self._info(directory).type == pafs.FileType.Directory:
            return []
        if selector.allow_not_found:
            return []
        raise FileNotFoundError(f"{directory}: no such directory")


def each_listed_once(fs: pafs.FileSystem) -> pafs.FileSystem:
    """``fs``, or on a remote store (HDFS, S3) a filesystem answering a directory's listing asked again from
    its first answer; every other call goes to ``fs``. For the length of one plan over directories that do not
    change while it runs (a compaction checks its deltas' lengths, then plans them: 100 deltas were listed
    twice, 200 round trips)."""
    if local_path(fs, "/") is not None:
        return fs
    return pafs.PyFileSystem(ListingsKept(fs))


class ListingsKept(DelegatingHandler):
    """The handler of :func:`each_listed_once`'s filesystem (a failed listing is not kept: it is asked again)."""

    def __init__(self, base: pafs.FileSystem) -> None:
        super().__init__(base)
        self._kept: dict[tuple[str, bool, bool], list[pafs.FileInfo]] = {}
        self._lock = threading.Lock()

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        key = (selector.base_dir.rstrip("/"), selector.recursive, selector.allow_not_found)
        with self._lock:
            kept = self._kept.get(key)
        if kept is None:
            kept = list(self._base.get_file_info(selector))
            with self._lock:
                self._kept[key] = kept
        return list(kept)
