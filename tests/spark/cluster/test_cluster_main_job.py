"""``acidstream main-job --master spark://...`` on the standalone cluster: the command is the driver, the
workers' executors write the micro-batches; the job's metastore and warehouse reach them through the job (the
driver runs without any ``ACIDSTREAM_*`` variable, the workers never had one). Its summary is truthful and every
landed row is in the table exactly once."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from acidstream.catalog import Metastore
from acidstream.spark.main_job import TABLE
from support.backends import sql_metastore_url
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


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_main_job_on_the_cluster_commits_each_row_once(
    cluster: SparkCluster, tmp_path: Path, backend: str
) -> None:
    warehouse = tmp_path / "wh"  # local disk, shared by the workers (one machine)
    conf = [f"{k}={v}" for k, v in cluster.driver_conf().items() if k != "spark.master"]
    apps_before = executors(cluster)
    with sql_metastore_url(backend, tmp_path) as url:
        args = ["--metastore", url, "--warehouse", str(warehouse), "--rows", str(ROWS), "--files", str(FILES)]
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
