"""``spark.speculation`` on a cluster for a Spark merge and a Spark compaction: the writing task of partition 0 of
each stalls as its first attempt starts, Spark starts a copy of it on the other host, and both attempts merge
(or compact) the same buckets at once. Every row is in the table once, the merge committed once, the compaction
published once, and nothing of the losing attempts is in the table: once the cleaner has run, the table holds the
compaction's base and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_speculation import SPECULATION

from acidstream.compactor import CompactorConfig
from acidstream.compactor.cleaner import Cleaner
from acidstream.metastore import TxnStatus
from support.sparkcluster import SCHEMA, SparkCluster, local_events, rows, run_job

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_merge_and_a_compaction_with_speculative_copies_of_stalled_tasks(
    cluster: SparkCluster, tmp_path: Path
) -> None:
    warehouse, url, ms = local_events(tmp_path)
    marker = tmp_path / "marker"
    marker.mkdir()
    changed = [[i, f"new{i}"] for i in range(0, 1000)] + rows(3000, 500)
    steps = [{"merge": changed, "on": ["id"]}, {"compact": "major"}]
    job = {"conf": SPECULATION, "options": {"metastore": url, "warehouse": str(warehouse)}, "table": "c.events",
           "schema": SCHEMA, "append": rows(0, 3000), "steps": steps, "stall": str(marker), "read": True}  # fmt: skip
    answer = run_job(cluster, tmp_path, job)

    assert len(list(marker.glob("passed-*"))) == 2, "Spark did not copy the merge's and the compaction's task"
    assert answer["steps"] == [{"inserted": 500, "updated": 1000, "deleted": 0}, ["ready for cleaning"]]
    expected = sorted(map(tuple, changed + rows(1000, 2000)))
    assert sorted(map(tuple, answer["rows"])) == expected
    table = ms.table("c.events").scan().to_arrow()
    assert sorted(zip(table["id"].to_pylist(), table["msg"].to_pylist(), strict=True)) == expected
    # one commit of the merge (the append's, the merge's and the compaction's txns, each committed once)
    assert [t.state for t in ms.show_txns()].count(TxnStatus.OPEN) == 0
    assert ms.get_valid_write_ids("c.events").high_watermark == 2

    Cleaner(ms, CompactorConfig(retention=0)).run_once()
    left = sorted(str(p.relative_to(warehouse)) for p in warehouse.rglob("*") if p.is_file())
    assert [f.split("/", 3)[3] for f in left] == [
        "_metadata_acid",
        "_orc_acid_version",
        "bucket_00000",
        "bucket_00001",
    ]
    assert {f.split("/")[2] for f in left} == {"base_0000002"}, left
    assert [p.name for p in (warehouse / "c.db" / "events").iterdir()] == ["base_0000002"]
