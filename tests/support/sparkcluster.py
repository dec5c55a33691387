"""A Spark standalone cluster on loopback for the tests: a master and two workers, each its own JVM on a loopback
address of its own (Spark sees two hosts), started from pyspark's own jars (``bin/spark-class``), and a driver
run as a process of its own against it.

The workers' environment is written out, not inherited: no ``AWS_*`` or ``ACIDSTREAM_*`` variable, a home, a
temporary directory and a work directory of each worker's own. So an executor (and the Python workers it starts)
knows of a job only what the job itself carries, as on a cluster of other machines.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark

from acidstream import Metastore

#: Seconds the master and its workers have to come up on a loaded machine before the fixture gives up.
START_DEADLINE = 240.0
#: Executors' and daemons' heaps: the machine is small and shared.
DAEMON_MEMORY = "256m"
EXECUTOR_MEMORY = "512m"


class SparkClusterUnavailable(RuntimeError):
    """The cluster did not start (no Java, or a daemon exited)."""


@dataclass(frozen=True)
class SparkCluster:
    master: str  # spark://127.0.0.1:port
    root: Path  # each worker's own directories below it

    def driver_conf(self) -> dict[str, str]:
        """What a driver needs beyond its job's own settings: loopback, small executors, one per worker."""
        return {
            "spark.master": self.master,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
        }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _spark_home() -> str:
    return os.path.dirname(pyspark.__file__)


def daemon_env(home: Path, host: str = "127.0.0.1") -> dict[str, str]:
    """A daemon's whole environment: Java, Spark's home, this venv's Python, and directories of its own; it
    binds ``host``."""
    for folder in ("home", "tmp", "work", "local"):
        (home / folder).mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home / "home"),
        "TMPDIR": str(home / "tmp"),
        "SPARK_HOME": _spark_home(),
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "SPARK_LOCAL_DIRS": str(home / "local"),
        "SPARK_WORKER_DIR": str(home / "work"),
        "SPARK_LOCAL_IP": host,
        "PYSPARK_PYTHON": sys.executable,
        "LANG": "C.UTF-8",
    }
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def _workers_alive(ui_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
        state = json.load(answer)
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


@contextmanager
def spark_cluster(root: Path, workers: int = 2) -> Iterator[SparkCluster]:
    """Start a master and ``workers`` workers (1 core each) under ``root``; stop them all on the way out."""
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        raise SparkClusterUnavailable("no java on the PATH")
    spark_class = os.path.join(_spark_home(), "bin", "spark-class")
    port, ui_port = free_port(), free_port()
    master = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []

    def start(name: str, args: list[str], host: str = "127.0.0.1") -> None:
        home = root / name
        log = home / "daemon.log"
        env = daemon_env(home, host)
        with open(log, "ab") as out:
            processes.append(
                subprocess.Popen(
                    [spark_class, *args],
                    env=env,
                    cwd=env["HOME"],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        logs.append(log)

    try:
        start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                         "--webui-port", str(ui_port)])  # fmt: skip
        for n in range(workers):
            # a host of its own (loopback's 127.0.0.2...): Spark runs a speculative copy of a task only on a
            # host where no attempt of it runs
            home, host = root / f"worker{n}", f"127.0.0.{n + 2}"
            start(f"worker{n}", ["org.apache.spark.deploy.worker.Worker", master, "--host", host,
                                 "--cores", "1", "--memory", "1g", "--webui-port", "0",
                                 "--work-dir", str(home / "work")], host)  # fmt: skip
        deadline = time.monotonic() + START_DEADLINE
        while True:
            alive = 0
            with contextlib.suppress(OSError, ValueError):
                alive = _workers_alive(ui_port)
            if alive == workers:
                break
            exited = [p.args[1] for p in processes if p.poll() is not None]
            if exited or time.monotonic() > deadline:
                tails = "\n".join(f"{log}:\n{log.read_text(errors='replace')[-2000:]}" for log in logs)
                raise SparkClusterUnavailable(f"{alive}/{workers} workers alive, exited: {exited}\n{tails}")
            time.sleep(0.5)
        yield SparkCluster(master, root)
    finally:
        stop_daemons(processes)


def stop_daemons(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    """Stop each daemon started in a session of its own, with what it started (SIGTERM to its process group,
    SIGKILL after 30 s), and wait for it."""
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 15)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()


def run_driver(
    script: Path, spec: Mapping[str, object], *, cwd: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with this venv's Python as the job's driver, ``spec`` as JSON on its stdin; the caller
    reads its answer from stdout (a failed driver's stderr is its story)."""
    return subprocess.run(
        [sys.executable, str(script)],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(env),
        check=False,
    )


#: The cluster tests' driver script (its docstring lists the job's keys).
DRIVER = Path(__file__).parents[1] / "spark" / "cluster" / "cluster_driver.py"
#: The cluster tests' table, and its rows' Spark schema.
DDL = (
    "CREATE TABLE {db}.events (id int, msg string) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
    "TBLPROPERTIES ('transactional'='true')"
)
SCHEMA = "id int, msg string"


def events_table(url: str, warehouse: Path | str) -> Metastore:
    """A metastore at ``url`` holding the cluster tests' table ``c.events`` (:data:`DDL`)."""
    ms = Metastore.connect(url, warehouse=warehouse)
    ms.execute("CREATE DATABASE c")
    ms.execute(DDL.format(db="c"))
    return ms


def local_events(tmp_path: Path) -> tuple[Path, str, Metastore]:
    """``c.events`` in a SQLite metastore and a warehouse under ``tmp_path``: (warehouse, url, metastore)."""
    warehouse = tmp_path / "wh"
    url = f"sqlite:///{tmp_path / 'metastore.db'}"
    return warehouse, url, events_table(url, warehouse)


def driver_env(tmp_path: Path) -> dict[str, str]:
    """The driver's environment: this one without the AWS and acidstream variables (the job says it all)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ACIDSTREAM_"))}
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["TMPDIR"] = str(tmp_path)
    return env


def start_job(
    cluster: SparkCluster, tmp_path: Path, job: Mapping[str, Any]
) -> subprocess.CompletedProcess[str]:
    """Run ``job`` (:data:`DRIVER`'s keys) on ``cluster`` with a driver of its own, whatever its outcome."""
    job = {**job, "conf": {**cluster.driver_conf(), **job.get("conf", {})}}
    return run_driver(DRIVER, job, cwd=tmp_path, env=driver_env(tmp_path))


def popen_job(cluster: SparkCluster, tmp_path: Path, job: Mapping[str, Any]) -> subprocess.Popen[str]:
    """Start ``job`` on ``cluster`` with a driver of its own, and return at once (its answer on its stdout)."""
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({**job, "conf": {**cluster.driver_conf(), **job.get("conf", {})}}))
    with open(spec) as stdin:
        return subprocess.Popen(
            [sys.executable, str(DRIVER)],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=driver_env(tmp_path),
        )


def run_job(cluster: SparkCluster, tmp_path: Path, job: Mapping[str, Any]) -> dict[str, Any]:
    """Run ``job`` on ``cluster``; its driver's answer (the job must succeed)."""
    done = start_job(cluster, tmp_path, job)
    assert done.returncode == 0, done.stderr[-4000:]
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def rows(first: int, count: int) -> list[list[Any]]:
    """``count`` rows of the test table from id ``first``."""
    return [[i, f"m{i}"] for i in range(first, first + count)]
