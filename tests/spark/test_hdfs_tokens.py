"""HDFS delegation tokens a Spark job gets for itself, on a kerberized MiniDFSCluster whose tokens expire 15 s
after they are got or renewed (``dfs.namenode.delegation.token.renew-interval``, a cluster of this module's
own: the session's keeps Hadoop's day). The driver has a ticket; Spark's Python workers have none (an empty
ticket cache, no keytab): they write only with the token the driver got for the job's warehouse
(``spark.acidstream.warehouse``), and a streaming query writes on long after its token's first expiry, because
the driver renews the token meanwhile."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acidstream import Metastore
from acidstream.storage import configure_stores
from support.deps import import_or_skip
from support.hdfscluster import HdfsUnavailable, MiniHdfs, hdfs_cluster
from support.ticketless import driver_with_ticket, ticketless_workers

pytestmark = pytest.mark.spark

import_or_skip("requests_gssapi")

#: The cluster's token lifetime unless renewed, in seconds.
RENEW_INTERVAL = 15


@pytest.fixture(scope="module")
def short_tokens(kdc: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniHdfs]:
    """A kerberized MiniDFSCluster whose delegation tokens expire :data:`RENEW_INTERVAL` s after their last
    renewal."""
    setting = f"dfs.namenode.delegation.token.renew-interval={RENEW_INTERVAL * 1000}"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ACIDSTREAM_HDFS_SETTINGS", setting)
        try:
            started = hdfs_cluster(tmp_path_factory.mktemp("hdfs-short-tokens"), kdc_dir=kdc.dir)
            cluster = started.__enter__()
        except HdfsUnavailable as exc:
            pytest.skip(f"kerberized HDFS is unavailable: {exc}")
    try:
        yield cluster
    finally:
        started.__exit__(None, None, None)


@pytest.mark.slow
def test_a_stream_writes_on_past_its_first_tokens_expiry(
    spark: Any, short_tokens: MiniHdfs, kdc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acidstream.spark import register

    warehouse = driver_with_ticket(monkeypatch, short_tokens, kdc, tmp_path / "driver-ccache")
    previous = configure_stores(hdfs={})
    options = {"metastore": f"sqlite:///{tmp_path / 'm.db'}", "warehouse": warehouse}
    with Metastore.connect(options["metastore"], warehouse=warehouse) as ms:
        ms.execute(
            "CREATE TABLE ticks (id bigint, at string) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
    restore_workers = ticketless_workers(spark, short_tokens.conf_dir, kdc, tmp_path / "worker-ccache")
    # the warehouse in the session's configuration, as the job's spark-submit would set it: the driver gets the
    # token at register() (the shared session's configuration is live; the key goes again below)
    live = spark.sparkContext._jsc.sc().conf()
    live.set("spark.acidstream.warehouse", warehouse)
    query = None
    try:
        job = register(spark)
        ticks = (
            job.readStream.format("rate")
            .option("rowsPerSecond", 5)
            .load()
            .selectExpr("value id", "cast(timestamp as string) at")
        )
        query = (
            ticks.writeStream.format("acidstream")
            .options(**options)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="2 seconds")
            .start("ticks")
        )
        started = time.monotonic()
        while time.monotonic() - started < 2.5 * RENEW_INTERVAL:  # well past the first token's expiry
            assert query.exception() is None, query.exception()
            time.sleep(1)
        late = (query.lastProgress or {}).get("batchId", -1)
        # a batch begun after that, and committed
        while (query.lastProgress or {}).get("batchId", -1) <= late + 1:
            assert query.exception() is None, query.exception()
            time.sleep(1)
        query.stop()
        assert query.exception() is None
        written = sum(p["numInputRows"] for p in query.recentProgress)
    finally:
        if query is not None and query.isActive:
            query.stop()
        live.remove("spark.acidstream.warehouse")
        restore_workers()  # before register(), which reads the workers' environment
        register(spark)
        configure_stores(**previous)
    with Metastore.connect(options["metastore"], warehouse=warehouse) as ms:
        ids = ms.table("ticks").scan(columns=["id"]).to_arrow().column("id").to_pylist()
    assert len(ids) == len(set(ids)) >= written > 0
