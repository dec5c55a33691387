"""Executors lost in the middle of a batch write's task on a cluster: the executor's JVM killed (``kill -9``), or
the Python workers of its task. Spark retries the task on an executor left; every row is committed once, nothing
of the killed attempt reaches the table, and no txn or lock is left open."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from acidstream.metastore import TxnStatus
from support.sparkcluster import SCHEMA, SparkCluster, local_events, popen_job, rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: How long the stalled task has to show up before the test gives up (a loaded machine starts Spark slowly).
STALL_DEADLINE = 600.0


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def executor_of(worker: int) -> int:
    """The executor JVM a Python worker runs under (the worker's daemon's parent)."""
    pid = worker
    while pid > 1:
        if b"CoarseGrainedExecutorBackend" in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
        pid = parent_of(pid)
    raise AssertionError(f"no executor JVM above Python worker {worker}")


def task_workers(worker: int) -> list[int]:
    """The Python workers of the stalled task's executor: every child of the worker's daemon."""
    daemon = parent_of(worker)
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if parent_of(int(entry.name)) == daemon:
                    children.append(int(entry.name))
            except (OSError, ValueError):
                continue
    return children


def stalled_worker(marker: Path, driver: subprocess.Popen[str]) -> int:
    """The pid of the stalled task's Python worker, once it stalls."""
    deadline = time.monotonic() + STALL_DEADLINE
    while not (stalled := list(marker.glob("stalled-*[0-9]"))):
        assert driver.poll() is None, driver.communicate()[1][-4000:]
        assert time.monotonic() < deadline, "the stalled task never started"
        time.sleep(0.2)
    return int(stalled[0].read_text())


@pytest.mark.parametrize("lost", ["executor", "python-workers"])
def test_a_write_task_loses_its_executor(cluster: SparkCluster, tmp_path: Path, lost: str) -> None:
    warehouse, url, ms = local_events(tmp_path)
    marker = tmp_path / "marker"
    marker.mkdir()
    job = {"options": {"metastore": url, "warehouse": str(warehouse)}, "table": "c.events", "schema": SCHEMA,
           "append": rows(0, 3000), "slices": 3, "slow": {"marker": str(marker), "rows": 500}, "read": True}  # fmt: skip
    driver = popen_job(cluster, tmp_path, job)
    try:
        worker = stalled_worker(marker, driver)
        victims = [executor_of(worker)] if lost == "executor" else task_workers(worker)
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        out, err = driver.communicate()
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
    assert driver.returncode == 0, err[-4000:]
    assert list(marker.glob("passed-*")), "no later attempt of the killed task ran"

    answer = json.loads(out.strip().splitlines()[-1])
    assert sorted(map(tuple, answer["rows"])) == sorted(map(tuple, rows(0, 3000)))
    assert sorted(ms.table("c.events").scan().to_arrow()["id"].to_pylist()) == list(range(3000))
    files = sorted(str(p.relative_to(warehouse)) for p in warehouse.rglob("*") if p.is_file())
    assert {f.split("/")[2] for f in files} == {f"delta_0000001_0000001_000{s}" for s in range(3)}
    assert not [t for t in ms.show_txns() if t.state is TxnStatus.OPEN]
    assert ms.show_locks() == []
