"""``acidstream main-job --master spark://...`` on the standalone cluster: the command is the driver, the
workers' executors write the micro-batches; the job's metastore and warehouse reach them through the job (the
driver runs without any ``ACIDSTREAM_*`` variable, the workers never had one). Its summary is truthful and every
landed row is in the table exactly once, on a PostgreSQL metastore and on the Hive 4 metastore, whose table
Hive 4's readers judge. (SQLite, the local default, is the main job's in tests/spark/test_main_job.py; on the
cluster it would prove nothing the PostgreSQL case does not.)"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from acidstream.catalog import Metastore
from acidstream.spark.main_job import PLACES, TABLE
from hive4.judge import judge
from support.backends import sql_metastore_url
from support.deps import import_or_skip
from support.sparkcluster import SparkCluster, driver_env

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS, FILES = 600, 3  # three micro-batches (transactions) of 200 rows


def executors(cluster: SparkCluster) -> set[tuple[str, str]]:
    """(worker, application) of every executor the cluster's workers have started (their work directories)."""
    return {(p.parents[1].name, p.name) for p in cluster.root.glob("worker*/work/app-*")}


def said(stdout: str) -> dict[str, str]:
    """The summary table's rows (label → value; a folded value's first line)."""
    rows = (line.strip("│ ").split("│") for line in stdout.splitlines() if line.count("│") >= 3)
    return {label.strip(): value.strip() for label, value, *_ in rows}


@contextmanager
def metastore_of(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a ``postgresql`` metastore of the test's own, or of the session's Hive 4 metastore."""
    if backend == "hive4":
        import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")
        yield request.getfixturevalue("hive4_metastore")
        return
    with sql_metastore_url(backend, tmp_path) as url:
        yield url


@pytest.mark.parametrize(
    "backend",
    [pytest.param("postgresql", marks=pytest.mark.postgres), pytest.param("hive4", marks=pytest.mark.hive4)],
)
def test_main_job_on_the_cluster_commits_each_row_once(
    cluster: SparkCluster, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    warehouse = tmp_path / "wh"  # local disk, shared by the workers (one machine)
    conf = [f"{k}={v}" for k, v in cluster.driver_conf().items() if k != "spark.master"]
    apps_before = executors(cluster)
    with metastore_of(backend, request, tmp_path) as url:
        # --reset: testing.alerts is the job's one table, and the Hive 4 metastore is the session's
        args = ["--metastore", url, "--warehouse", str(warehouse), "--rows", str(ROWS), "--files", str(FILES),
                "--reset"]  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "acidstream.cli", "main-job", "--master", cluster.master, *args,
             *(arg for pair in conf for arg in ("--conf", pair))],
            env={**driver_env(tmp_path), "COLUMNS": "250"},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-4000:] + done.stdout[-2000:]
        assert "Traceback" not in done.stderr
        ran_on = {worker for worker, _ in executors(cluster) - apps_before}
        assert ran_on == {"worker0", "worker1"}  # the job's executors ran on both workers, not in the driver
        summary = said(done.stdout)
        assert summary["rows ingested (this run)"] == f"{ROWS:,}"
        assert summary["rows in table"] == f"{ROWS:,}"
        assert summary["transactions committed"].startswith(f"{FILES} ")

        ms = Metastore.connect(url, warehouse=warehouse)
        ids = ms.table(TABLE).scan(columns=["id"]).to_arrow()["id"].to_pylist()
        assert Counter(ids) == Counter(range(ROWS))  # each landed row once
        if backend == "hive4":
            landed = [(i, f"alert {i}", *PLACES[i % len(PLACES)]) for i in range(ROWS)]
            judge(request.getfixturevalue("hive4"), ms, TABLE, expected=landed)
        assert not (warehouse / "_landing").exists() or not any((warehouse / "_landing").iterdir())


def test_a_conf_that_is_not_key_value_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "acidstream.cli", "main-job", "--warehouse", str(tmp_path), "--conf", "nokey"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "'nokey' is not KEY=VALUE" in done.stderr
    assert "Traceback" not in done.stderr
