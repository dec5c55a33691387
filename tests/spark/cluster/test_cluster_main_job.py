"""``acidstream main-job --master spark://...`` on the standalone cluster: the command is the driver, the
workers' executors write the micro-batches; the job's metastore, warehouse and store settings reach them through
the job (the driver runs without any ``AWS_*`` or ``ACIDSTREAM_*`` variable, its stores from an
``acidstream.toml``; the workers never had any). Its summary is truthful and every landed row is in the table
exactly once:

* on S3 (moto) with a PostgreSQL metastore, landing in a local directory the workers share (one machine: as a
  disk every node mounts), stopped by SIGTERM after its first commit and run again: the rerun resumes the run
  from its checkpoint, the bucket files are counted on S3;
* on HDFS (the session's MiniDFSCluster) with a PostgreSQL metastore, landing under ``<warehouse>/_landing`` on
  HDFS: the driver writes the files and the executors' and driver's JVMs read them and the checkpoint there;
* on a local warehouse with the Hive 4 metastore, whose table Hive 4's readers judge.

(SQLite, the local default, is the main job's in tests/spark/test_main_job.py; on the cluster it would prove
nothing the PostgreSQL case does not.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from acidstream.catalog import Metastore
from acidstream.spark.main_job import PLACES, TABLE
from acidstream.storage import configure_stores, table_filesystem
from hive4.judge import judge
from support.backends import sql_metastore_url
from support.deps import import_or_skip
from support.sparkcluster import SparkCluster, driver_env

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS, FILES = 300, 3  # three micro-batches (transactions) of 100 rows: a stop after the first leaves two


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


@contextmanager
def store_of(store: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """(warehouse, the job's landing arguments) on ``store``, with an ``acidstream.toml`` in ``tmp_path`` (the
    job's directory) holding its ``[s3]`` or ``[hdfs]`` settings, and this process reaching it the same way."""
    if store == "local":
        yield str(tmp_path / "wh"), []  # local disk, shared by the workers (one machine)
        return
    if store == "s3":
        endpoint = request.getfixturevalue("s3_endpoint")
        settings = {"endpoint_override": endpoint.split("://", 1)[1], "scheme": "http", "region": "us-east-1",
                    "access_key": "acidstream", "secret_key": "acidstream"}  # fmt: skip
        warehouse, landing = (
            f"s3://acidstream-tests/main-job-{uuid.uuid4().hex[:8]}",
            ["--landing", "landing"],
        )
    else:
        namenode = request.getfixturevalue("hdfs_namenode")
        settings = {"webhdfs_port": namenode.webhdfs_port}
        warehouse, landing = f"{namenode.uri}/main-job-{uuid.uuid4().hex[:8]}/wh", []
    table = "\n".join(f"{k} = {v!r}".replace("'", '"') for k, v in settings.items())
    (tmp_path / "acidstream.toml").write_text(f"[{store}]\n{table}\n")
    previous = configure_stores(**{store: settings})
    try:
        yield warehouse, landing
    finally:
        configure_stores(**previous)


def main_job(cluster: SparkCluster, tmp_path: Path, args: list[str]) -> subprocess.Popen[str]:
    """``acidstream main-job --master <the cluster> ARGS`` run in ``tmp_path``, in a process group of its own."""
    conf = [f"{k}={v}" for k, v in cluster.driver_conf().items() if k != "spark.master"]
    return subprocess.Popen(
        [sys.executable, "-m", "acidstream.cli", "main-job", "--master", cluster.master, *args,
         *(arg for pair in conf for arg in ("--conf", pair))],
        env={**driver_env(tmp_path), "COLUMNS": "250"},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )  # fmt: skip


def ended(job: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = job.communicate()
    assert "Traceback" not in err, err[-4000:]
    return job.returncode, out, err


def stop_after_a_commit(job: subprocess.Popen[str], landing: Path) -> None:
    """SIGTERM to ``job`` once its first micro-batch has committed: Spark's commit log in the run's checkpoint
    (written after the sink committed the batch's transaction) has its entry."""
    while job.poll() is None:
        if any(landing.glob("run-*/_checkpoint/commits/0")):
            job.send_signal(signal.SIGTERM)
            return
        time.sleep(0.1)
    pytest.fail(f"the job ended before its first commit was seen: {job.communicate()}")


def landing_left(landing: str) -> list[str]:
    """What the job left in its landing directory (local or on HDFS)."""
    fs, path = table_filesystem(landing)
    return [i.base_name for i in fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))]


@pytest.mark.parametrize(
    "backend, store",
    [
        pytest.param("postgresql", "s3", marks=pytest.mark.postgres),
        pytest.param("postgresql", "hdfs", marks=pytest.mark.postgres),
        pytest.param("hive4", "local", marks=pytest.mark.hive4),
    ],
)
@pytest.mark.timeout(1200)  # the session's HDFS or Hive 4 may start in its setup, on a loaded machine
def test_main_job_on_the_cluster_commits_each_row_once(
    cluster: SparkCluster, tmp_path: Path, backend: str, store: str, request: pytest.FixtureRequest
) -> None:
    apps_before = executors(cluster)
    with metastore_of(backend, request, tmp_path) as url, store_of(store, request, tmp_path) as (wh, landing):
        # --reset: testing.alerts is the job's one table, and the Hive 4 metastore is the session's
        args = ["--metastore", url, "--warehouse", wh, "--rows", str(ROWS), "--files", str(FILES), *landing]
        first = main_job(cluster, tmp_path, [*args, "--reset"])
        if store == "s3":  # stopped after its first commit, then run again: the rerun resumes it
            stop_after_a_commit(first, tmp_path / "landing")
            code, out, err = ended(first)
            assert code == 143, err[-4000:] + out[-2000:]
            assert said(out)["stopped"].startswith("by a signal, with ")
            first = main_job(cluster, tmp_path, args)
        code, out, err = ended(first)
        assert code == 0, err[-4000:] + out[-2000:]
        ran_on = {worker for worker, _ in executors(cluster) - apps_before}
        assert ran_on == {"worker0", "worker1"}  # the job's executors ran on both workers, not in the driver
        summary = said(out)
        if store == "s3":
            assert summary["resumed"].startswith("run-")
            assert 0 < int(summary["rows ingested (this run)"].replace(",", "")) < ROWS
        else:
            assert summary["rows ingested (this run)"] == f"{ROWS:,}"
            assert summary["transactions committed"].startswith(f"{FILES} ")
        assert summary["rows in table"] == f"{ROWS:,}"

        ms = Metastore.connect(url, warehouse=wh)
        ids = ms.table(TABLE).scan(columns=["id"]).to_arrow()["id"].to_pylist()
        assert Counter(ids) == Counter(range(ROWS))  # each landed row once, across the stop and the rerun
        buckets = int(summary["bucket files"])
        fs, path = table_filesystem(ms.table(TABLE).location)
        listed = fs.get_file_info(pafs.FileSelector(path, recursive=True))
        assert buckets == sum(1 for i in listed if i.base_name.startswith("bucket_")) > 0
        if backend == "hive4":
            landed = [(i, f"alert {i}", *PLACES[i % len(PLACES)]) for i in range(ROWS)]
            judge(request.getfixturevalue("hive4"), ms, TABLE, expected=landed)
        landing_dir = str(tmp_path / "landing") if landing else f"{wh}/_landing"
        assert landing_left(landing_dir) == []  # each finished run's files and checkpoint are gone


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
