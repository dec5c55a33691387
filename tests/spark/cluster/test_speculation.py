"""Spark's speculative copies under ``spark.speculation``, in one driver run on the cluster (a cluster job's
driver and executors cost more than its checks):

- the data source's batch writer, exactly-once sink and snapshot read on a local warehouse shared by the
  cluster's workers: the append's task of partition 0 and each micro-batch's stall on their first attempt, Spark
  starts a copy of each on the other host, and both attempts write. Every committed row is in the table once,
  nothing of a losing attempt is left, and the tasks ran in processes that share neither the driver's
  environment nor its working directory;
- then, in the same session, a Spark merge and a Spark compaction of a table of their own whose writing task of
  partition 0 stalls once it has written its files: Spark copies it, both attempts merge (or compact) the same
  buckets, and tests/spark/cluster/test_speculation_mutations.py's checks hold (every row once, one commit, no
  txn or lock open, only the compaction's base after the cleaner)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_speculation_mutations import STEPS, check

from acidstream.catalog import Metastore
from acidstream.spark.stream_write import PROPERTY_PREFIX
from support.lostexecutors import SPECULATION
from support.sparkcluster import SCHEMA, SparkCluster, local_events, rows, run_job

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@dataclass(frozen=True)
class Table:
    """One of the run's tables: its warehouse, metastore, and the marker directory of its stalled tasks."""

    warehouse: Path
    ms: Metastore
    marker: Path


@dataclass(frozen=True)
class Run:
    answer: dict[str, Any]  # the batch write's and the sink's; the merge's and the compaction's in "then"
    sink: Table
    mutations: Table


def table(root: Path) -> tuple[Table, str]:
    root.mkdir()
    warehouse, url, ms = local_events(root)
    (root / "marker").mkdir()
    return Table(warehouse, ms, root / "marker"), url


@pytest.fixture(scope="module")
def run(cluster: SparkCluster, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One driver: the batch write, the sink and the read, then the merge and the compaction."""
    tmp_path = tmp_path_factory.mktemp("speculation")
    sink, url = table(tmp_path / "sink")
    mutations, mutations_url = table(tmp_path / "mutations")
    (tmp_path / "in").mkdir()
    for n in range(2):  # two files: two micro-batches of the exactly-once sink
        lines = (json.dumps({"id": i, "msg": m}) for i, m in rows(3000 + n * 1500, 1500))
        (tmp_path / "in" / f"part-{n}.json").write_text("\n".join(lines) + "\n")
    stream = {"input": str(tmp_path / "in"), "checkpoint": str(tmp_path / "checkpoint")}
    then = {"options": {"metastore": mutations_url, "warehouse": str(mutations.warehouse)}, "table": "c.events",
            "schema": SCHEMA, "append": rows(0, 3000), "steps": STEPS, "read": True}  # fmt: skip
    job = {"conf": SPECULATION, "probe": True, "options": {"metastore": url, "warehouse": str(sink.warehouse)},
           "table": "c.events", "schema": SCHEMA, "append": rows(0, 3000), "slices": 3, "stream": stream,
           "slow": {"marker": str(sink.marker), "rows": 200}, "read": True,
           "stall": str(mutations.marker), "then": [then]}  # fmt: skip
    return Run(run_job(cluster, tmp_path, job), sink, mutations)


def table_files(warehouse: Path) -> list[str]:
    return sorted(str(p.relative_to(warehouse)) for p in warehouse.rglob("*") if p.is_file())


def test_a_batch_write_and_the_sink_with_speculative_copies_of_stalled_tasks(run: Run) -> None:
    answer, warehouse, ms = run.answer, run.sink.warehouse, run.sink.ms
    driver_pid, driver_cwd = answer["driver"]
    assert all(pid != driver_pid and cwd != driver_cwd and not leaked for pid, cwd, leaked in answer["tasks"])
    assert len({cwd for _, cwd, _ in answer["tasks"]}) == 2  # two executors, each in its own work dir
    # the append's stage and each micro-batch's: a copy of each stalled task passed it
    assert len(list(run.sink.marker.glob("passed-*"))) == 3, "Spark did not copy each stage's stalled task"
    assert sorted(map(tuple, answer["rows"])) == sorted(map(tuple, rows(0, 6000)))
    assert sorted(ms.table("c.events").scan().to_arrow()["id"].to_pylist()) == list(range(6000))
    (sink,) = [v for k, v in ms.table("c.events").properties.items() if k.startswith(PROPERTY_PREFIX)]
    assert json.loads(sink)["batchId"] == 1  # the sink committed its two micro-batches, once each
    # one delta of each task's statement, and nothing of the losing attempts (their files were never moved in)
    assert table_files(warehouse) == [
        f"c.db/events/delta_000000{w}_000000{w}_000{s}/{name}"
        for w in (1, 2, 3)
        for s in range(3)
        for name in ("_orc_acid_version", "bucket_00000", "bucket_00001")
    ]


def test_a_merge_and_a_compaction_with_speculative_copies_of_stalled_tasks(run: Run) -> None:
    (answer,) = run.answer["then"]
    assert len(list(run.mutations.marker.glob("passed-*"))) == 2, (
        "Spark did not copy the merge's and the compaction's task"
    )
    check(answer, run.mutations.ms, run.mutations.warehouse)
