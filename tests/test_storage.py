"""The storage boundary: filesystem capabilities by what pyarrow says a filesystem is, and dropped data's removal."""

from __future__ import annotations

from pathlib import Path

import pyarrow.fs as pafs

from acidstream.storage import capabilities, delete_locations, local_path, table_filesystem


def test_local_disks_flush_and_append_object_stores_do_neither(tmp_path: Path) -> None:
    local = pafs.LocalFileSystem()
    assert capabilities(local).can_flush_and_append
    assert capabilities(pafs.SubTreeFileSystem(str(tmp_path), local)).can_flush_and_append
    s3 = pafs.S3FileSystem(anonymous=True, region="us-east-1")
    assert not capabilities(s3).can_flush_and_append
    assert not capabilities(pafs.SubTreeFileSystem("bucket/warehouse", s3)).can_flush_and_append


def test_locations_resolve_to_a_filesystem_and_a_path(tmp_path: Path) -> None:
    fs, path = table_filesystem(f"file://{tmp_path}/t")
    assert isinstance(fs, pafs.LocalFileSystem) and path == f"{tmp_path}/t"
    assert local_path(fs, path) == path
    assert local_path(pafs.SubTreeFileSystem(str(tmp_path), fs), "/t") == f"{tmp_path}/t"


def test_deleting_a_dropped_tables_locations_tolerates_one_already_gone(tmp_path: Path) -> None:
    (tmp_path / "t" / "delta_0000001_0000001").mkdir(parents=True)
    (tmp_path / "t" / "delta_0000001_0000001" / "bucket_00000").write_bytes(b"x")
    delete_locations([str(tmp_path / "t"), str(tmp_path / "never")])
    assert not (tmp_path / "t").exists()
