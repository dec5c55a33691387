"""Fixtures shared by the whole suite: warehouse directories and the metastore URLs to run behaviour suites on."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from hive4.referee import HiveUnavailable, Referee, hive_sh
from support.backends import hive_unavailable, sql_metastore_url


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    wh = tmp_path / "wh"
    wh.mkdir()
    return wh


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def metastore_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty metastore database URL on each backend (PostgreSQL: a schema of its own)."""
    with sql_metastore_url(request.param, tmp_path) as url:
        yield url


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """An S3 server on loopback for the session; the AWS environment points at it meanwhile."""
    from support.s3server import s3_server

    with s3_server() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def hdfs_namenode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A MiniDFSCluster on loopback for the session (scripts/hdfs.sh: a NameNode and a DataNode, WebHDFS on),
    with a Hadoop client configuration naming it (``conf_dir``, for ``$HADOOP_CONF_DIR``). Without Java, Maven
    or the jars: fails under CI, skips elsewhere."""
    from support.hdfscluster import HdfsUnavailable, hdfs_cluster

    running = ExitStack()
    try:
        cluster = running.enter_context(hdfs_cluster(tmp_path_factory.mktemp("hdfs")))
    except HdfsUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"HDFS is unavailable under CI: {exc}")
        pytest.skip(f"HDFS is unavailable (bash scripts/hdfs.sh fetch): {exc}")
    with running:
        yield cluster


@pytest.fixture(scope="session")
def hdfs_kerberos_namenode(kdc: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A kerberized MiniDFSCluster for the session (scripts/hdfs.sh start --kerberos): Kerberos RPC as
    hdfs/localhost, WebHDFS behind SPNEGO (HTTP/localhost, HTTP/127.0.0.1), delegation tokens; its URI names
    localhost. Skips or fails as ``hdfs_namenode`` does."""
    from support.hdfscluster import HdfsUnavailable, hdfs_cluster

    running = ExitStack()
    try:
        cluster = running.enter_context(
            hdfs_cluster(tmp_path_factory.mktemp("hdfs-kerberos"), kdc_dir=kdc.dir)
        )
    except HdfsUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"kerberized HDFS is unavailable under CI: {exc}")
        pytest.skip(f"kerberized HDFS is unavailable (bash scripts/hdfs.sh fetch): {exc}")
    with running:
        yield cluster


@pytest.fixture(scope="session")
def hive4_home() -> Path:
    """The cache directory with Hive's jars and our driver classes (fetched once, a no-op when up to date)."""
    try:
        return Path(hive_sh("fetch"))
    except HiveUnavailable as exc:
        hive_unavailable(str(exc))
        raise


@pytest.fixture(scope="session")
def hive4(hive4_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Referee]:
    """Hive 4's ACID reader and record writer, one JVM for the test session."""
    log = tmp_path_factory.mktemp("hive4-referee") / "referee.log"
    try:
        referee = Referee(hive4_home, log)
    except (OSError, RuntimeError) as exc:
        hive_unavailable(f"{exc} (log: {log})")
        raise
    yield referee
    referee.close()


@pytest.fixture(scope="session")
def hive4_metastore(
    hive4_home: Path, s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A standalone Hive Metastore with ACID on, on a loopback port: its ``thrift://`` URI. It reaches the
    session's S3 server through S3A (``--s3``), as a metastore whose databases may live on S3 must."""
    state = tmp_path_factory.mktemp("hive4-metastore")
    try:
        uri = hive_sh("start", str(state), "--s3", s3_endpoint)
    except HiveUnavailable as exc:
        hive_unavailable(str(exc))
        raise
    yield uri
    hive_sh("stop", str(state))


@pytest.fixture(scope="session")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An MIT Kerberos KDC on loopback for the session (scripts/kdc.sh, installed where missing), realm
    ACIDSTREAM.TEST, ``KRB5_CONFIG`` naming its krb5.conf meanwhile. Fails under CI, skips elsewhere."""
    from support.kdc import KdcUnavailable, kdc_server

    running = ExitStack()
    try:
        server = running.enter_context(kdc_server(tmp_path_factory.mktemp("kdc")))
    except KdcUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the KDC is unavailable under CI: {exc}")
        pytest.skip(f"the KDC is unavailable (bash scripts/kdc.sh install): {exc}")
    with running:
        yield server


@pytest.fixture(scope="session")
def hive4_kerberos_metastore(
    hive4_home: Path, kdc: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A kerberized Hive Metastore (SASL/GSSAPI as hive/localhost, QOP auth-conf or auth): its
    ``thrift://localhost:PORT`` URI."""
    state = tmp_path_factory.mktemp("hive4-kerberos-metastore")
    try:
        uri = hive_sh("start", str(state), "--kerberos", str(kdc.dir), "--qop", "privacy,authentication")
    except HiveUnavailable as exc:
        hive_unavailable(str(exc))
        raise
    yield uri
    hive_sh("stop", str(state))


@pytest.fixture
def tuned(monkeypatch: pytest.MonkeyPatch) -> None:
    """acidstream's process-wide settings asked for, as ``runtime.configure()`` asks, for one test."""
    from acidstream import runtime

    monkeypatch.setattr(runtime, "_configured", True)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one SparkSession of the test session (a JVM costs seconds: never build a second one)."""
    from acidstream.spark.session import session

    s = session("acidstream-tests", master="local[2]")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def jvm(spark: Any) -> Any:
    """py4j view of the shared JVM: Hive 2.3.10, storage-api 2.8.1 and orc-core classes from pyspark's jars."""
    return spark._jvm


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests using the ``spark``/``jvm`` fixtures are marked ``spark`` automatically, so ``-m 'not spark'`` works.
    Under pytest-xdist (scripts/test.sh runs two workers, a file each at a time), files with a ``slow`` test go
    first: started last, a few long files would leave one worker running alone at the end."""
    for item in items:
        if {"spark", "jvm"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)
    if hasattr(config, "workerinput"):  # an xdist worker: the same order on each, as xdist requires
        slow = {item.path for item in items if item.get_closest_marker("slow")}
        items.sort(key=lambda item: item.path not in slow)  # stable: collection order otherwise
