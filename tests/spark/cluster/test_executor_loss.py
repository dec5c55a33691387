"""Executors lost in the middle of a batch write's task on a cluster: the executor's JVM killed (``kill -9``), and
the Python workers of a task. Spark retries the task on an executor left; every row is committed once, nothing
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


def stalled_worker(marker: Path, driver: subprocess.Popen[str], seen: set[str]) -> int:
    """The pid of the Python worker of the next task to stall (a ``stalled-<stage>`` not in ``seen``)."""
    deadline = time.monotonic() + STALL_DEADLINE
    while not (stalled := [p for p in marker.glob("stalled-*[0-9]") if p.name not in seen]):
        assert driver.poll() is None, driver.communicate()[1][-4000:]
        assert time.monotonic() < deadline, "the stalled task never started"
        time.sleep(0.2)
    seen.add(stalled[0].name)
    return int(stalled[0].read_text())


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
    driver = popen_job(cluster, tmp_path, job)
    seen: set[str] = set()
    try:
        os.kill(executor_of(stalled_worker(marker, driver, seen)), signal.SIGKILL)
        for pid in task_workers(stalled_worker(marker, driver, seen)):
            os.kill(pid, signal.SIGKILL)
        out, err = driver.communicate()
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
    assert driver.returncode == 0, err[-4000:]
    assert len(list(marker.glob("passed-*"))) == 2, "no later attempt of a killed task ran"

    answer = json.loads(out.strip().splitlines()[-1])
    assert sorted(map(tuple, answer["then"][0]["rows"])) == sorted(map(tuple, rows(0, 6000)))
    assert sorted(ms.table("c.events").scan().to_arrow()["id"].to_pylist()) == list(range(6000))
    files = sorted(str(p.relative_to(warehouse)) for p in warehouse.rglob("*") if p.is_file())
    assert {f.split("/")[2] for f in files} == {
        f"delta_000000{w}_000000{w}_000{s}" for w in (1, 2) for s in range(3)
    }
    assert not [t for t in ms.show_txns() if t.state is TxnStatus.OPEN]
    assert ms.show_locks() == []
