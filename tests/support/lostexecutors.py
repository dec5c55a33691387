"""Killing what runs a stalled task on the session's Spark cluster: finding the Python worker of a task that
stalled (its marker file names its pid), the executor JVM above it or its sibling workers, and running a driver
while something kills them."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Speculate as soon as half a stage's tasks are done and a task runs 1.5 times the median (Spark's default
#: multiplier), checked every 100 ms.
SPECULATION = {
    "spark.speculation": "true",
    "spark.speculation.interval": "100ms",
    "spark.speculation.quantile": "0.5",
    "spark.speculation.minTaskRuntime": "0s",
}


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


def run_killing(
    driver: subprocess.Popen[str], kill: Callable[[subprocess.Popen[str], set[str]], None]
) -> dict[str, Any]:
    """Let ``kill`` kill what it finds while ``driver`` runs (it records the stalls it took in the set), then
    the driver's answer; the driver must succeed, and never outlives the test."""
    try:
        kill(driver, set())
        out, err = driver.communicate()
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
    assert driver.returncode == 0, err[-4000:]
    answer: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return answer
