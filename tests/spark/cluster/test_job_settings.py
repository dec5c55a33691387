"""What a Spark job carries to its executors: the session's ``spark.hadoop.fs.s3a.*`` and ``spark.acidstream.*``
settings over the driver's ``configure_stores``, key by key, and never a value in its repr."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from acidstream.errors import StorageLocationError
from acidstream.spark.options import job_settings
from acidstream.storage import configure_stores


@pytest.fixture
def driver_stores() -> Iterator[None]:
    previous = configure_stores(s3={"endpoint_override": "driver:9000", "access_key": "driver-key",
                                    "secret_key": "driver-secret", "scheme": "https"})  # fmt: skip
    yield
    configure_stores(**previous)


def test_the_sessions_settings_win_key_by_key_over_the_drivers(driver_stores: None) -> None:
    job = job_settings({
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:4566",
        "spark.hadoop.fs.s3a.secret.key": "job-secret",
        "spark.acidstream.hdfs.user": "etl",
        "spark.acidstream.hdfs.webhdfs_port": "50070",
        "spark.acidstream.metastore": "postgresql://ms/db",
    })  # fmt: skip
    assert dict(job.s3) == {"endpoint_override": "127.0.0.1:4566", "scheme": "http",
                            "access_key": "driver-key", "secret_key": "job-secret"}  # fmt: skip
    assert dict(job.hdfs) == {"user": "etl", "webhdfs_port": 50070}
    assert dict(job.defaults) == {"metastore": "postgresql://ms/db"}
    assert "job-secret" not in repr(job) and "driver-key" not in repr(job)


def test_a_bare_endpoint_without_ssl_is_plain_http() -> None:
    job = job_settings({"spark.hadoop.fs.s3a.endpoint": "minio:9000",
                        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false"})  # fmt: skip
    assert dict(job.s3) == {"endpoint_override": "minio:9000", "scheme": "http"}


def test_a_bad_setting_is_named() -> None:
    with pytest.raises(StorageLocationError, match="webhdfs_port"):
        job_settings({"spark.acidstream.hdfs.webhdfs_port": "http"})
