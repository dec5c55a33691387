"""Executors lost in the middle of a batch write's task on a cluster: the executor's JVM killed (``kill -9``), and
the Python workers of a task. Spark retries the task on an executor left; every row is committed once, nothing
of the killed attempt reaches the table, and no txn or lock is left open."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from acidstream.metastore import TxnStatus
from support.lostexecutors import executor_of, run_killing, stalled_worker, task_workers
from support.sparkcluster import SCHEMA, SparkCluster, local_events, popen_job, rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_write_tasks_lose_their_executor_and_their_python_workers(
    cluster: SparkCluster, tmp_path: Path
) -> None:
    """One job of two appends: the first's stalled task loses its executor's JVM, the second's its Python
    workers (the executor lives on). Each case is a task attempt killed in the middle of its writing; one job
    proves both at the cost of one driver."""
    warehouse, url, ms = local_events(tmp_path)
    marker = tmp_path / "marker"
    marker.mkdir()
    options = {"metastore": url, "warehouse": str(warehouse)}
    slow = {"marker": str(marker), "rows": 500}
    second = {"options": options, "table": "c.events", "schema": SCHEMA, "append": rows(3000, 3000),
              "slices": 3, "slow": slow}  # fmt: skip
    job = {"options": options, "table": "c.events", "schema": SCHEMA, "append": rows(0, 3000), "slices": 3,
           "slow": slow, "then": [{**second, "read": True}]}  # fmt: skip

    def kill(driver: subprocess.Popen[str], seen: set[str]) -> None:
        os.kill(executor_of(stalled_worker(marker, driver, seen)), signal.SIGKILL)
        for pid in task_workers(stalled_worker(marker, driver, seen)):
            os.kill(pid, signal.SIGKILL)

    answer = run_killing(popen_job(cluster, tmp_path, job), kill)
    assert len(list(marker.glob("passed-*"))) == 2, "no later attempt of a killed task ran"

    assert sorted(map(tuple, answer["then"][0]["rows"])) == sorted(map(tuple, rows(0, 6000)))
    assert sorted(ms.table("c.events").scan().to_arrow()["id"].to_pylist()) == list(range(6000))
    files = sorted(str(p.relative_to(warehouse)) for p in warehouse.rglob("*") if p.is_file())
    assert {f.split("/")[2] for f in files} == {
        f"delta_000000{w}_000000{w}_000{s}" for w in (1, 2) for s in range(3)
    }
    assert not [t for t in ms.show_txns() if t.state is TxnStatus.OPEN]
    assert ms.show_locks() == []
