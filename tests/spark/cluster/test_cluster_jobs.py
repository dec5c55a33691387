"""Every Spark entry point but the sink (tests/spark/cluster/test_speculation.py has it) on a Spark standalone
cluster, on each store and metastore: the data source's batch append and snapshot read, and Spark's merge (both
of its plans), update, delete and compaction, on S3 with a PostgreSQL metastore, on HDFS, and on the Hive 4
metastore with Hive 4's readers judging what the cluster wrote.

The job's settings reach the executors through the job only: the workers' environment names no store and no
metastore. Two jobs, each first on the executors' new Python workers with work of its own on S3 (a batch append;
a merge), then on a second table in the same session (the job's ``then``: HDFS; the Hive 4 metastore): a cluster
job's driver and executors cost more than its checks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from acidstream.catalog import Metastore
from acidstream.storage import configure_stores, hdfs_client
from hive4.judge import judge
from hive4.referee import Referee
from support.backends import sql_metastore_url
from support.deps import import_or_skip
from support.hdfscluster import MiniHdfs
from support.sparkcluster import DDL, SCHEMA, SparkCluster, events_table, rows, run_job

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.postgres]

SECRET = "cluster-secret-7f3a9c"  # moto takes any credentials: this one is looked for where it must not be


def mutation_steps() -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """A merge split by bucket (its source shuffled to the buckets' tasks), a merge joined on a column the
    table is not bucketed on, an update, a delete and a major compaction; and the rows they leave of
    ``rows(0, 400)``."""
    steps: list[dict[str, Any]] = [
        {"merge": [[i, f"u{i}"] for i in range(300, 500)], "on": ["id"]},
        {"merge": rows(0, 50), "on": ["msg"], "when_matched": "delete", "when_not_matched": None},
        {"update": "id >= 450", "set": {"msg": "'late'"}},
        {"delete": "id < 60"},
        {"compact": "major"},
    ]
    expected = [(i, f"m{i}") for i in range(60, 300)] + [(i, f"u{i}") for i in range(300, 450)]
    expected += [(i, "late") for i in range(450, 500)]
    return steps, expected


@pytest.fixture
def hdfs_stores(hdfs_namenode: MiniHdfs) -> Iterator[MiniHdfs]:
    """This process (the test's) reaching the session's HDFS through ``configure_stores``, not the environment:
    a ``$HADOOP_CONF_DIR`` would reach the drivers the test starts, and their JVMs would take HDFS for their
    default filesystem."""
    previous = configure_stores(hdfs={"webhdfs_port": hdfs_namenode.webhdfs_port})
    yield hdfs_namenode
    configure_stores(**previous)


@pytest.fixture
def hive_ms(hive4_metastore: str) -> Iterator[Metastore]:
    import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")
    with Metastore.connect(hive4_metastore) as connected:
        yield connected


def hdfs_owners(location: str) -> dict[str, str]:
    """Owner of each file below ``location`` (an ``hdfs://`` directory), by path relative to it."""
    client = hdfs_client(location)
    root = location.split("://", 1)[1].split("/", 1)[1]
    owners, folders = {}, [f"/{root}"]
    while folders:
        folder = folders.pop()
        listed = client.call("LISTSTATUS", "GET", folder).json()["FileStatuses"]["FileStatus"]
        for status in listed:
            path = f"{folder}/{status['pathSuffix']}"
            if status["type"] == "DIRECTORY":
                folders.append(path)
            else:
                owners[path[len(root) + 2 :]] = status["owner"]
    return owners


def s3_job(s3_endpoint: str, url: str) -> dict[str, Any]:
    """A job on ``c.events`` of the metastore at ``url``, configured as Spark users configure one for S3:
    ``spark.hadoop.fs.s3a.*`` on the session, ``configure_stores`` on the driver."""
    host = s3_endpoint.split("://", 1)[1]
    conf = {
        "spark.hadoop.fs.s3a.endpoint": s3_endpoint,
        "spark.hadoop.fs.s3a.access.key": "cluster-key",
        "spark.hadoop.fs.s3a.secret.key": SECRET,
    }
    stores = {"s3": {"endpoint_override": host, "scheme": "http", "region": "us-east-1",
                     "access_key": "cluster-key", "secret_key": SECRET}}  # fmt: skip
    return {
        "conf": conf,
        "stores": stores,
        "options": {"metastore": url},
        "table": "c.events",
        "schema": SCHEMA,
    }


def scanned(ms: Metastore) -> list[tuple[int, str]]:
    table = ms.table("c.events").scan().to_arrow()
    return sorted(zip(table["id"].to_pylist(), table["msg"].to_pylist(), strict=True))


@pytest.mark.timeout(1200)  # the session's HDFS may start in its setup, on a loaded machine
def test_append_and_read_on_s3_then_append_merge_and_compaction_on_hdfs(
    cluster: SparkCluster, tmp_path: Path, s3_endpoint: str, hdfs_stores: MiniHdfs
) -> None:
    """S3: the secret appears in neither the read's plan string nor the event log. HDFS: the executors' WebHDFS
    port and user from ``spark.acidstream.hdfs.*`` only (the files they wrote are the job's user's, not the
    driver's ``configure_stores`` one's), and a merge and a major compaction through them."""
    events = tmp_path / "events"
    events.mkdir()
    hdfs_wh = f"{hdfs_stores.uri}/cluster-{uuid.uuid4().hex[:8]}/wh"
    hdfs_url = f"sqlite:///{tmp_path / 'hdfs.db'}"
    hdfs_ms = events_table(hdfs_url, hdfs_wh)
    hdfs_steps = [{"merge": [[i, f"u{i}"] for i in range(300, 500)], "on": ["id"]}, {"compact": "major"}]
    hdfs_expected = [(i, f"m{i}") for i in range(300)] + [(i, f"u{i}") for i in range(300, 500)]
    with sql_metastore_url("postgresql", tmp_path) as url:
        s3_ms = events_table(url, f"s3://acidstream-tests/cluster-{tmp_path.name}")
        job = s3_job(s3_endpoint, url)
        job["conf"].update({
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": f"file://{events}",
            "spark.eventLog.compress": "false",
            "spark.acidstream.hdfs.webhdfs_port": str(hdfs_stores.webhdfs_port),
            "spark.acidstream.hdfs.user": "etl",
        })  # fmt: skip
        job["stores"]["hdfs"] = {"webhdfs_port": hdfs_stores.webhdfs_port, "user": "driver"}
        on_hdfs = {"options": {"metastore": hdfs_url}, "table": "c.events", "schema": SCHEMA,
                   "append": rows(0, 400), "steps": hdfs_steps, "read": True}  # fmt: skip
        job.update(append=rows(0, 400), slices=2, read=True, explain=True, then=[on_hdfs])
        answer = run_job(cluster, tmp_path, job)

        assert sorted(map(tuple, answer["rows"])) == sorted(map(tuple, rows(0, 400)))
        assert scanned(s3_ms) == sorted(map(tuple, rows(0, 400)))
    assert SECRET not in answer["explain"]
    logged = [p.read_text(errors="replace") for p in events.rglob("*") if p.is_file()]
    assert any("spark.hadoop.fs.s3a.secret.key" in text for text in logged)  # the log holds the settings
    assert all(SECRET not in text for text in logged)

    (hdfs_answer,) = answer["then"]
    assert hdfs_answer["steps"] == [{"inserted": 100, "updated": 100, "deleted": 0}, ["ready for cleaning"]]
    assert sorted(map(tuple, hdfs_answer["rows"])) == hdfs_expected
    assert scanned(hdfs_ms) == hdfs_expected
    written = {path: owner for path, owner in hdfs_owners(hdfs_wh).items() if "/bucket_" in path}
    assert any("/base_" in path for path in written) and any("/delta_" in path for path in written)
    assert set(written.values()) == {"etl"}, written  # the executors asked as the job's user


@pytest.mark.hive4
@pytest.mark.timeout(1200)  # the session's Hive 4 metastore and referee may start in its setup
def test_mutations_on_s3_then_append_and_merge_on_the_hive4_metastore_judged_by_hive(
    cluster: SparkCluster, tmp_path: Path, s3_endpoint: str, hive4_metastore: str, hive4: Referee,
    hive_ms: Metastore,
) -> None:  # fmt: skip
    """S3: Spark's merge (both of its plans), update, delete and compaction, the job's first work on the
    executors (their Python workers know nothing of S3 but what the job carries): the tasks that read the
    target, write the mutations and compact the buckets reach moto through the job's settings. Hive 4
    metastore: an append and a merge, which Hive 4's readers (row-mode and vectorized) read exactly as
    committed."""
    db = f"cl_{uuid.uuid4().hex[:8]}"
    hive_ms.execute(f"CREATE DATABASE {db}")
    hive_ms.execute(DDL.format(db=db))
    hive_merge = {"merge": [[i, f"n{i}"] for i in range(150, 250)], "on": ["id"]}
    hive_expected = [(i, f"m{i}") for i in range(150)] + [(i, f"n{i}") for i in range(150, 250)]
    with sql_metastore_url("postgresql", tmp_path) as url:
        s3_ms = events_table(url, f"s3://acidstream-tests/cluster-{tmp_path.name}")
        s3_ms.table("c.events").merge(pa.table({"id": pa.array(range(400), pa.int32()),
                                                "msg": [f"m{i}" for i in range(400)]}), on=["id"])  # fmt: skip
        steps, expected = mutation_steps()
        job = s3_job(s3_endpoint, url)
        job["conf"]["spark.sql.autoBroadcastJoinThreshold"] = "-1"  # the bucket merge's source is shuffled
        on_hive = {"options": {"metastore": hive4_metastore}, "table": f"{db}.events", "schema": SCHEMA,
                   "append": rows(0, 200), "slices": 2, "steps": [hive_merge], "read": True}  # fmt: skip
        job.update(steps=steps, read=True, then=[on_hive])
        answer = run_job(cluster, tmp_path, job)

        merged, joined, updated, deleted, compacted = answer["steps"]
        assert merged == {"inserted": 100, "updated": 100, "deleted": 0}
        assert joined == {"inserted": 0, "updated": 0, "deleted": 50}
        assert updated["updated"] == 50 and deleted["deleted"] == 10
        assert compacted == ["ready for cleaning"]
        assert sorted(map(tuple, answer["rows"])) == expected
        assert scanned(s3_ms) == expected

    (hive_answer,) = answer["then"]
    assert sorted(map(tuple, hive_answer["rows"])) == hive_expected
    judge(hive4, hive_ms, f"{db}.events", expected=hive_expected)
