"""A Spark merge and a Spark compaction whose writing task of partition 0 stalls on its first attempt once it
has written its files, before reporting them: with ``spark.speculation`` on, Spark starts a copy of it on the
other host, and both attempts merge (or compact) the same buckets; or its executor's JVM is killed (``kill -9``)
and Spark retries it on the other executor. Either way every row is in the table once, the merge committed
once, the compaction published once, no txn or lock is left open, and nothing of the other attempts is in the
table: once the cleaner has run, the table holds the compaction's base and nothing else.

The speculative copies' case runs in tests/spark/cluster/test_speculation.py's driver, after the batch write's
and the sink's (one driver and one set of executors for both); :func:`check` is both cases'."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from acidstream.catalog import Metastore
from acidstream.compactor import CompactorConfig
from acidstream.compactor.cleaner import Cleaner
from acidstream.metastore import TxnStatus
from support.lostexecutors import executor_of, run_killing, stalled_worker
from support.sparkcluster import SCHEMA, SparkCluster, local_events, popen_job, rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]


#: The merge (1,000 rows updated, 500 inserted) and the major compaction after an append of 3,000 rows.
CHANGED = [[i, f"new{i}"] for i in range(0, 1000)] + rows(3000, 500)
STEPS = [{"merge": CHANGED, "on": ["id"]}, {"compact": "major"}]
EXPECTED = sorted(map(tuple, CHANGED + rows(1000, 2000)))


def check(answer: dict[str, Any], ms: Metastore, warehouse: Path) -> None:
    """The steps' results, every row once, nothing open, and after the cleaner only the compaction's base."""
    assert answer["steps"] == [{"inserted": 500, "updated": 1000, "deleted": 0}, ["ready for cleaning"]]
    assert sorted(map(tuple, answer["rows"])) == EXPECTED
    table = ms.table("c.events").scan().to_arrow()
    assert sorted(zip(table["id"].to_pylist(), table["msg"].to_pylist(), strict=True)) == EXPECTED
    # the append's, the merge's and the compaction's txns, each committed once
    assert [t.state for t in ms.show_txns()].count(TxnStatus.OPEN) == 0 and ms.show_locks() == []
    assert ms.get_valid_write_ids("c.events").high_watermark == 2
    Cleaner(ms, CompactorConfig(retention=0)).run_once()
    left = sorted(
        str(p.relative_to(warehouse / "c.db" / "events")) for p in warehouse.rglob("*") if p.is_file()
    )
    assert left == [
        f"base_0000002/{n}" for n in ("_metadata_acid", "_orc_acid_version", "bucket_00000", "bucket_00001")
    ]
    assert [p.name for p in (warehouse / "c.db" / "events").iterdir()] == ["base_0000002"]


def test_a_merge_and_a_compaction_lose_the_executor_of_a_task(cluster: SparkCluster, tmp_path: Path) -> None:
    """The stalled task's executor JVM is killed, in the merge and then in the compaction: the killed attempt's
    files are whole in its own directory, and Spark's retry writes its own."""
    warehouse, url, ms = local_events(tmp_path)
    marker = tmp_path / "marker"
    marker.mkdir()
    job = {"options": {"metastore": url, "warehouse": str(warehouse)}, "table": "c.events", "schema": SCHEMA,
           "append": rows(0, 3000), "steps": STEPS, "stall": str(marker), "read": True}  # fmt: skip

    def kill(driver: subprocess.Popen[str], seen: set[str]) -> None:
        for _ in STEPS:
            os.kill(executor_of(stalled_worker(marker, driver, seen)), signal.SIGKILL)

    answer = run_killing(popen_job(cluster, tmp_path, job), kill)
    assert len(list(marker.glob("passed-*"))) == 2, "no later attempt of a killed task ran"
    check(answer, ms, warehouse)
