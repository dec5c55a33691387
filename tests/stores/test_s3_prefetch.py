"""A plan's files fetched ahead of their reader on S3 (acidstream.read.prefetch): the same bytes, the same
failures, a bounded window of fetches."""

from __future__ import annotations

import uuid

import pyarrow.fs as pafs
import pytest

from acidstream.read import prefetch
from acidstream.read.planning import BucketTask, FileSlice
from acidstream.storage import table_filesystem

BUCKET = "acidstream-tests"


def _tasks(paths: list[str], lengths: list[int]) -> list[BucketTask]:
    pieces = tuple(FileSlice(p, n, 0, 1, 1, 0) for p, n in zip(paths, lengths, strict=True))
    return [BucketTask((), "", 0, pieces, ())]


def test_files_are_fetched_ahead_in_a_window_and_read_as_they_are(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prefetch, "WINDOW", 3)
    fs, root = table_filesystem(f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}")
    paths = [f"{root}/f{i}" for i in range(6)]
    contents = [bytes([i]) * (100 + i) for i in range(6)]
    for path, data in zip(paths, contents, strict=True):
        with fs.open_output_stream(path) as out:
            out.write(data)
    fs.delete_file(paths[4])  # gone after planning: its open fails as the store's own would

    ahead = prefetch.prefetching(fs, prefetch.task_files(_tasks(paths, [len(c) for c in contents])))
    handler = ahead.handler
    assert isinstance(handler, prefetch.Prefetcher) and handler._submitted == 3  # the first window only
    with ahead.open_input_file(paths[0]) as f:
        assert f.read() == contents[0]
    assert handler._submitted == 4  # one more for each file opened
    for i in (1, 2, 3, 5):
        with ahead.open_input_file(paths[i]) as f:
            assert f.read() == contents[i]
    with pytest.raises(FileNotFoundError):
        ahead.open_input_file(paths[4])
    with ahead.open_input_file(paths[0]) as f:  # a second open reads the store again
        assert f.read() == contents[0]


def test_a_local_filesystem_is_read_as_it_is(tmp_path: object) -> None:
    fs = pafs.LocalFileSystem()
    assert prefetch.prefetching(fs, prefetch.task_files(_tasks(["/a", "/b"], [1, 1]))) is fs
