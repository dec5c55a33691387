"""``acidstream main-job`` stopped by SIGTERM at random points and run again: each landing file is committed
exactly once, ids stay unique across runs, every exit is 143 (then 0), each summary says what that run
committed, no traceback, and no Spark JVM outlives its job. Real processes, real signals."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from acidstream.catalog import Metastore
from acidstream.spark.main_job import TABLE

ROWS, FILES = 800, 8  # per landed run: 8 micro-batches of 100 rows (the stops take at most 5)
#: Where a stop comes: one of each kind, in a random order, with random parameters. Each kind's variants take
#: the same path to the stop (Spark's start-up; a batch's abort), so a run stops at one of them, drawn at random:
#: a signal in Spark's start-up, once or twice; after whole commits; in an open batch, to the job or its group
#: (which signals Spark's JVM too). Three stops and the run that finishes: four Spark jobs, not six.
POINTS = (
    ("start-up", "start-up, signalled twice"),
    ("after commits",),
    ("mid-batch", "mid-batch, to the group"),
)


def start(warehouse: Path) -> subprocess.Popen[str]:
    """The job in a process group of its own, as a shell starts it (so the group can be signalled)."""
    return subprocess.Popen(
        [sys.executable, "-m", "acidstream.cli", "main-job", "--rows", str(ROWS), "--files", str(FILES)],
        env={
            **os.environ,
            "ACIDSTREAM_WAREHOUSE": str(warehouse),
            "ACIDSTREAM_METASTORE": "",
            "COLUMNS": "250",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for(job: subprocess.Popen[str], condition: Callable[[], bool]) -> bool:
    """True once ``condition`` holds; False if the job ended first (it had nothing left to do)."""
    while not condition():
        if job.poll() is not None:
            return False
        time.sleep(0.05)
    return True


def jvms_of(warehouse: Path) -> list[psutil.Process]:
    """Spark JVMs started for this warehouse (by its environment), whoever their parent is now."""
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info["name"] == "java" and proc.environ().get("ACIDSTREAM_WAREHOUSE") == str(warehouse):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


class Table:
    """The test's own look at the job's table and its transactions (SQLite: read beside the job)."""

    def __init__(self, warehouse: Path) -> None:
        self.db = warehouse / "metastore.db"
        self.warehouse = warehouse
        self._ms: Metastore | None = None

    @property
    def ms(self) -> Metastore | None:
        if self._ms is None and self.db.exists():
            ms = Metastore.connect(f"sqlite:///{self.db}", warehouse=self.warehouse)
            if "testing" in ms.list_databases() and "alerts" in ms.list_tables("testing"):
                self._ms = ms
        return self._ms

    def write_ids(self) -> int:
        return self.ms.get_valid_write_ids(TABLE).high_watermark if self.ms else 0

    def open_batch(self) -> bool:
        return self.ms is not None and any(t.state.name == "OPEN" for t in self.ms.show_txns())

    def ids(self) -> list[int]:
        if self.ms is None:
            return []
        return self.ms.table(TABLE).scan(columns=["id"]).to_arrow().column("id").to_pylist()


def stop_at(point: str, job: subprocess.Popen[str], table: Table, rng: random.Random) -> bool:
    """Signal ``job`` at ``point``; False if it ended before getting there."""
    if point.startswith("start-up"):
        started = wait_for(job, lambda: bool(jvms_of(table.warehouse)))
        time.sleep(rng.uniform(0, 1.5))  # somewhere in Spark's start-up (the JVM's launch, the context's)
    else:
        before = table.write_ids()
        commits = rng.randint(1, 2) if point == "after commits" else rng.randint(0, 1)
        started = wait_for(job, lambda: table.write_ids() >= before + commits)
        if point.startswith("mid-batch"):
            started = started and wait_for(job, table.open_batch)
    if not started:
        return False
    if point.endswith("to the group"):
        os.killpg(job.pid, signal.SIGTERM)  # as `timeout` and service managers do: Spark's JVM gets it too
    else:
        job.send_signal(signal.SIGTERM)
    if point.endswith("twice"):
        time.sleep(0.2)
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)  # raised at once, wherever the start-up is
    return True


def summary_rows(out: str, label: str) -> int:
    found = re.search(rf"{re.escape(label)}\s*│ ([\d,]+)", out)
    assert found, out
    return int(found[1].replace(",", ""))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_main_job_stopped_at_random_points_and_run_again_commits_each_id_once(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    points = [rng.choice(variants) for variants in rng.sample(POINTS, len(POINTS))]
    warehouse = tmp_path / "wh"
    table = Table(warehouse)
    for point in [*points, None]:
        context = f"seed {seed}, points {points}, now {point}"
        rows_before = len(table.ids())
        job = start(warehouse)
        signalled = point is not None and stop_at(point, job, table, rng)
        out, err = job.communicate()
        assert job.returncode == (143 if signalled else 0), f"{context}\n{out}\n{err}"
        if signalled:
            assert err.rstrip().endswith("interrupted by SIGTERM"), f"{context}\n{err}"
        if not point or not point.endswith("twice"):  # a second signal is raised wherever the job is
            assert "Traceback" not in err, f"{context}\n{err}"
        survivors = psutil.wait_procs(jvms_of(warehouse), timeout=60)[1]
        assert survivors == [], f"{context}: Spark JVMs outlived their job: {survivors}"

        ids = table.ids()
        assert len(ids) == len(set(ids)), f"{context}: duplicate ids"
        assert sorted(ids) == list(range(len(ids))), context  # each run's ids follow the last run's
        if "rows ingested (this run)" in out:  # the summary (absent if stopped before the job began)
            assert summary_rows(out, "rows ingested (this run)") == len(ids) - rows_before, (
                f"{context}\n{out}"
            )
            assert summary_rows(out, "rows in table") == len(ids), f"{context}\n{out}"
        if table.ms is not None:
            assert not table.open_batch() and table.ms.show_locks() == [], context  # aborted, not left open
    assert len(ids) % ROWS == 0 and not re.search(r"│ stopped\s+│", out), out  # every landed run is complete
    assert list((warehouse / "_landing").iterdir()) == []  # and gone, files and checkpoint
