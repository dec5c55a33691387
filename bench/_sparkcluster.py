"""A Spark standalone cluster on loopback for the benchmarks: a master and N workers of C cores each, every daemon
its own JVM from pyspark's jars (``bin/spark-class``), every worker on a loopback address of its own (Spark sees N
hosts) with an environment, home, temporary and work directory of its own, as the tests' cluster starts them.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _daemon_env(home: Path, host: str) -> dict[str, str]:
    """A daemon's whole environment, written out rather than inherited (no AWS or acidstream variables)."""
    for folder in ("home", "tmp", "work", "local"):
        (home / folder).mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home / "home"),
        "TMPDIR": str(home / "tmp"),
        "SPARK_HOME": os.path.dirname(pyspark.__file__),
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_LOCAL_DIRS": str(home / "local"),
        "SPARK_WORKER_DIR": str(home / "work"),
        "SPARK_LOCAL_IP": host,
        "PYSPARK_PYTHON": sys.executable,
        "LANG": "C.UTF-8",
    }
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


@contextmanager
def standalone(root: Path, workers: int, cores: int) -> Iterator[Cluster]:
    """Start a master and ``workers`` workers of ``cores`` cores under ``root``; stop them on the way out."""
    spark_class = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")
    port, ui_port = free_port(), free_port()
    master = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen[bytes]] = []

    def start(name: str, args: list[str], host: str) -> None:
        env = _daemon_env(root / name, host)
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
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 15)
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait()


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
            state = json.load(answer)
    except (OSError, ValueError):
        return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")
