"""The storage boundary: filesystem capabilities by what pyarrow says a filesystem is, the stores' settings, and
dropped data's removal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from acidstream.errors import StorageLocationError
from acidstream.storage import (
    capabilities,
    configure_stores,
    delete_locations,
    hdfs_filesystem,
    local_path,
    table_filesystem,
)

S3 = {
    "endpoint_override": "http://127.0.0.1:9",
    "region": "eu-west-3",
    "access_key": "key",
    "secret_key": "secret",
    "session_token": "token",
    "scheme": "http",
}


@pytest.fixture
def unconfigured() -> Iterator[None]:
    """The process's store settings as the environment's while the test runs, and as they were after it."""
    previous = configure_stores()
    yield
    configure_stores(**previous)


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


def test_s3_settings_make_the_s3_filesystem_of_s3_locations(unconfigured: None) -> None:
    assert configure_stores(s3=S3) == {"s3": {}, "hdfs": {}}
    fs, path = table_filesystem("s3://bucket/wh/t/")
    assert fs == pafs.S3FileSystem(**S3, allow_delayed_open=True) and path == "bucket/wh/t"
    assert table_filesystem("s3://bucket/other")[0] is fs  # one client for the settings
    assert not capabilities(fs).can_rename_directories
    configure_stores(s3={**S3, "region": "us-west-2"})
    assert table_filesystem("s3://bucket/wh")[0] != fs


def test_hdfs_settings_replace_the_environments(unconfigured: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACIDSTREAM_WEBHDFS_PORT", "1234")
    monkeypatch.setenv("HADOOP_USER_NAME", "someone")
    configure_stores(hdfs={"webhdfs_port": 50070, "user": "etl", "connect_timeout": 2, "read_timeout": 3.5})
    fs, path = hdfs_filesystem("hdfs://nn:8020/wh")
    client = fs.handler.client
    assert (client.url, client.user, path) == ("http://nn:50070/webhdfs/v1", "etl", "/wh")
    assert client.timeout == (2, 3.5)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"s3": {"endpoint": "http://h:1"}}, "endpoint"),
        ({"hdfs": {"port": 9870}}, "port"),
        ({"s3": {"region": 3}}, "region"),
        ({"hdfs": {"webhdfs_port": "9870"}}, "webhdfs_port"),
        ({"hdfs": {"read_timeout": 0}}, "read_timeout"),
    ],
)
def test_an_unknown_setting_or_a_bad_value_is_refused_naming_it(
    unconfigured: None, settings: dict[str, dict[str, object]], named: str
) -> None:
    with pytest.raises(StorageLocationError, match=named):
        configure_stores(**settings)
    assert configure_stores() == {"s3": {}, "hdfs": {}}  # nothing was set
