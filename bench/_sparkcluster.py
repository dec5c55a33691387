"""A Spark standalone cluster on loopback for the benchmarks: a master and N workers of C cores each, every daemon
its own JVM from pyspark's jars (``bin/spark-class``), every worker on a loopback address of its own (Spark sees N
hosts) with an environment, home, temporary and work directory of its own: the daemons of the tests' cluster
(``tests/support/sparkcluster.py``, whose environment and teardown it shares), in other numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.sparkcluster import daemon_env, free_port, stop_daemons

__all__ = ["Cluster", "free_port", "standalone"]

#: Seconds the daemons have to come up on a loaded machine.
START_DEADLINE = 240.0
#: Each executor's heap per core it runs tasks on (the work is in its Python workers).
EXECUTOR_MEMORY_PER_CORE_MIB = 512


@dataclass(frozen=True)
class Cluster:
    master: str  # spark://127.0.0.1:port
    workers: int
    cores: int  # per worker
    worker_pids: tuple[int, ...]  # each worker daemon: its executors and their Python workers run below it

    def driver_conf(self) -> dict[str, str]:
        """A driver's settings for one executor per worker, using every core, on loopback."""
        return {
            "spark.master": self.master,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.cores": str(self.cores),
            "spark.executor.memory": f"{EXECUTOR_MEMORY_PER_CORE_MIB * self.cores}m",
            "spark.cores.max": str(self.workers * self.cores),
        }


@contextmanager
def standalone(root: Path, workers: int, cores: int) -> Iterator[Cluster]:
    """Start a master and ``workers`` workers of ``cores`` cores under ``root``; stop them on the way out."""
    spark_class = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")
    port, ui_port = free_port(), free_port()
    master = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen[bytes]] = []

    def start(name: str, args: list[str], host: str) -> None:
        env = daemon_env(root / name, host)
        with open(root / name / "daemon.log", "ab") as log:
            processes.append(
                subprocess.Popen(
                    [spark_class, *args], env=env, cwd=env["HOME"], stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )  # fmt: skip

    try:
        start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                         "--webui-port", str(ui_port)], "127.0.0.1")  # fmt: skip
        for n in range(workers):
            host = f"127.0.0.{n + 2}"
            start(f"worker{n}", ["org.apache.spark.deploy.worker.Worker", master, "--host", host,
                                 "--cores", str(cores), "--memory", "4g", "--webui-port", "0",
                                 "--work-dir", str(root / f"worker{n}" / "work")], host)  # fmt: skip
        deadline = time.monotonic() + START_DEADLINE
        while _alive_workers(ui_port) < workers:
            exited = [p.args for p in processes if p.poll() is not None]
            if exited or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the cluster under {root} did not start (exited: {exited}); see its daemon.log"
                )
            time.sleep(0.5)
        yield Cluster(master, workers, cores, tuple(p.pid for p in processes[1:]))
    finally:
        stop_daemons(processes)


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
            state = json.load(answer)
    except (OSError, ValueError):
        return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")
