"""The data source's batch writer and snapshot read on a Spark standalone cluster (a master, two workers, each
its own JVM and Python workers): the job's settings reach the executors through the job, not the driver's
process, and tasks run in processes that share neither the driver's environment nor its working directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from acidstream.spark.stream_write import PROPERTY_PREFIX
from support.backends import sql_metastore_url
from support.sparkcluster import SCHEMA, SparkCluster, events_table, local_events, rows, run_job

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_append_stream_and_read_on_a_local_warehouse_shared_by_the_workers(
    cluster: SparkCluster, tmp_path: Path
) -> None:
    warehouse, url, ms = local_events(tmp_path)
    options = {"metastore": url, "warehouse": str(warehouse)}
    stream = {"input": str(tmp_path / "in"), "checkpoint": str(tmp_path / "checkpoint")}
    (tmp_path / "in").mkdir()
    for n, first in enumerate((500, 600)):  # two files: two micro-batches of the exactly-once sink
        lines = (json.dumps({"id": i, "msg": m}) for i, m in rows(first, 100))
        (tmp_path / "in" / f"part-{n}.json").write_text("\n".join(lines) + "\n")

    answer = run_job(cluster, tmp_path, {"probe": True, "options": options, "table": "c.events",
                                         "schema": SCHEMA, "append": rows(0, 500), "slices": 3,
                                         "stream": stream, "read": True})  # fmt: skip
    driver_pid, driver_cwd = answer["driver"]
    assert all(pid != driver_pid and cwd != driver_cwd and not leaked for pid, cwd, leaked in answer["tasks"])
    assert len({cwd for _, cwd, _ in answer["tasks"]}) == 2  # two executors, each in its own work dir
    assert sorted(map(tuple, answer["rows"])) == sorted(map(tuple, rows(0, 700)))
    assert sorted(ms.table("c.events").scan().to_arrow()["id"].to_pylist()) == list(range(700))
    (sink,) = [v for k, v in ms.table("c.events").properties.items() if k.startswith(PROPERTY_PREFIX)]
    assert json.loads(sink)["batchId"] == 1  # the sink committed its two micro-batches, once each


SECRET = "cluster-secret-7f3a9c"  # moto takes any credentials: this one is looked for where it must not be


@pytest.mark.postgres
def test_append_and_read_on_s3_with_the_jobs_spark_hadoop_settings(
    cluster: SparkCluster, tmp_path: Path, s3_endpoint: str
) -> None:
    """Configured as Spark users configure a job: ``spark.hadoop.fs.s3a.*`` on the session, ``configure_stores``
    on the driver; the executors' environment names no S3 server. Their tasks reach moto through the job's
    settings, and the secret appears in neither the plan string nor the event log."""
    with sql_metastore_url("postgresql", tmp_path) as url:
        warehouse = f"s3://acidstream-tests/cluster-{tmp_path.name}"
        ms = events_table(url, warehouse)
        events = tmp_path / "events"
        events.mkdir()
        host = s3_endpoint.split("://", 1)[1]
        conf = {
            "spark.hadoop.fs.s3a.endpoint": s3_endpoint,
            "spark.hadoop.fs.s3a.access.key": "cluster-key",
            "spark.hadoop.fs.s3a.secret.key": SECRET,
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": f"file://{events}",
            "spark.eventLog.compress": "false",
        }
        stores = {"s3": {"endpoint_override": host, "scheme": "http", "region": "us-east-1",
                         "access_key": "cluster-key", "secret_key": SECRET}}  # fmt: skip
        job = {"conf": conf, "stores": stores, "options": {"metastore": url}, "table": "c.events",
               "schema": SCHEMA, "append": rows(0, 400), "slices": 2, "read": True, "explain": True}  # fmt: skip
        answer = run_job(cluster, tmp_path, job)

        assert sorted(map(tuple, answer["rows"])) == sorted(map(tuple, rows(0, 400)))
        assert sorted(ms.table("c.events").scan().to_arrow()["id"].to_pylist()) == list(range(400))
        assert SECRET not in answer["explain"]
        logged = [p.read_text(errors="replace") for p in events.rglob("*") if p.is_file()]
        assert any("spark.hadoop.fs.s3a.secret.key" in text for text in logged)  # the log holds the settings
        assert all(SECRET not in text for text in logged)


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


@pytest.mark.postgres
def test_merge_update_delete_and_compaction_on_s3_with_the_jobs_settings(
    cluster: SparkCluster, tmp_path: Path, s3_endpoint: str
) -> None:
    """Spark's merge (both of its plans), update, delete and compaction on S3, the store configured only
    through ``spark.hadoop.fs.s3a.*`` and the driver's ``configure_stores``: the executors' tasks that read
    the target, write the mutations and compact the buckets reach moto through the job's settings."""
    with sql_metastore_url("postgresql", tmp_path) as url:
        warehouse = f"s3://acidstream-tests/cluster-{tmp_path.name}"
        ms = events_table(url, warehouse)
        host = s3_endpoint.split("://", 1)[1]
        conf = {
            "spark.hadoop.fs.s3a.endpoint": s3_endpoint,
            "spark.hadoop.fs.s3a.access.key": "cluster-key",
            "spark.hadoop.fs.s3a.secret.key": SECRET,
            "spark.sql.autoBroadcastJoinThreshold": "-1",  # the bucket merge's source goes through a shuffle
        }
        stores = {"s3": {"endpoint_override": host, "scheme": "http", "region": "us-east-1",
                         "access_key": "cluster-key", "secret_key": SECRET}}  # fmt: skip
        ms.table("c.events").merge(pa.table({"id": pa.array(range(400), pa.int32()),
                                             "msg": [f"m{i}" for i in range(400)]}), on=["id"])  # fmt: skip
        steps, expected = mutation_steps()
        # the job's first work on the executors is the merge's: their Python workers know nothing of S3 yet
        job = {"conf": conf, "stores": stores, "options": {"metastore": url}, "table": "c.events",
               "schema": SCHEMA, "steps": steps, "read": True}  # fmt: skip
        answer = run_job(cluster, tmp_path, job)

        merged, joined, updated, deleted, compacted = answer["steps"]
        assert merged == {"inserted": 100, "updated": 100, "deleted": 0}
        assert joined == {"inserted": 0, "updated": 0, "deleted": 50}
        assert updated["updated"] == 50 and deleted["deleted"] == 10
        assert compacted == ["ready for cleaning"]
        assert sorted(map(tuple, answer["rows"])) == expected
        table = ms.table("c.events").scan().to_arrow()
        assert sorted(zip(table["id"].to_pylist(), table["msg"].to_pylist(), strict=True)) == expected
