"""``spark.speculation`` on a cluster: a task of partition 0 stalls on its first attempt, Spark starts a copy of it
on the other host, and both attempts write; every committed row is in the table once and nothing of the losing
attempt is left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.sparkcluster import SCHEMA, SparkCluster, local_events, rows, run_job

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: Speculate as soon as half a stage's tasks are done and a task runs 1.5 times the median (Spark's default
#: multiplier), checked every 100 ms.
SPECULATION = {
    "spark.speculation": "true",
    "spark.speculation.interval": "100ms",
    "spark.speculation.quantile": "0.5",
    "spark.speculation.minTaskRuntime": "0s",
}


def table_files(warehouse: Path) -> list[str]:
    return sorted(str(p.relative_to(warehouse)) for p in warehouse.rglob("*") if p.is_file())


def test_a_batch_write_with_a_speculative_copy_of_a_stalled_task(
    cluster: SparkCluster, tmp_path: Path
) -> None:
    warehouse, url, ms = local_events(tmp_path)
    marker = tmp_path / "marker"
    marker.mkdir()
    job = {"conf": SPECULATION, "options": {"metastore": url, "warehouse": str(warehouse)}, "table": "c.events",
           "schema": SCHEMA, "append": rows(0, 3000), "slices": 3, "slow": {"marker": str(marker), "rows": 500},
           "read": True}  # fmt: skip
    answer = run_job(cluster, tmp_path, job)

    assert list(marker.glob("passed-*")), "Spark started no speculative copy of the stalled task"
    assert sorted(map(tuple, answer["rows"])) == sorted(map(tuple, rows(0, 3000)))
    assert sorted(ms.table("c.events").scan().to_arrow()["id"].to_pylist()) == list(range(3000))
    # one delta of each task's statement, and nothing of the losing attempt (its files were never moved in)
    assert table_files(warehouse) == [
        f"c.db/events/delta_0000001_0000001_000{s}/{name}"
        for s in range(3)
        for name in ("_orc_acid_version", "bucket_00000", "bucket_00001")
    ]


def test_the_sink_with_speculative_copies_of_stalled_tasks(cluster: SparkCluster, tmp_path: Path) -> None:
    """Each micro-batch's task of partition 0 stalls on its first attempt until its copy has passed it."""
    warehouse, url, ms = local_events(tmp_path)
    (tmp_path / "in").mkdir()
    for n in range(2):
        lines = (json.dumps({"id": i, "msg": m}) for i, m in rows(n * 1500, 1500))
        (tmp_path / "in" / f"part-{n}.json").write_text("\n".join(lines) + "\n")
    marker = tmp_path / "marker"
    marker.mkdir()
    stream = {"input": str(tmp_path / "in"), "checkpoint": str(tmp_path / "checkpoint")}
    job = {"conf": SPECULATION, "options": {"metastore": url, "warehouse": str(warehouse)}, "table": "c.events",
           "schema": SCHEMA, "stream": stream, "slow": {"marker": str(marker), "rows": 200}}  # fmt: skip
    run_job(cluster, tmp_path, job)

    assert len(list(marker.glob("passed-*"))) == 2, "Spark did not copy each micro-batch's stalled task"
    assert sorted(ms.table("c.events").scan().to_arrow()["id"].to_pylist()) == list(range(3000))
    deltas = {f.split("/")[2] for f in table_files(warehouse)}
    assert deltas == {f"delta_000000{w}_000000{w}_000{s}" for w in (1, 2) for s in range(3)}
