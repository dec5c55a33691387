"""The streaming sink: one txn per micro-batch, exactly once across stops, restarts and replays."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from acidstream.catalog import Metastore
from acidstream.metastore import TxnStatus
from acidstream.spark.stream_write import PROPERTY_PREFIX, TAG_PREFIX

SCHEMA = "id int, msg string, continent string, country string"
ROWS_PER_FILE = 50


def land(directory: Path, first_file: int, files: int) -> None:
    directory.mkdir(exist_ok=True)
    for f in range(first_file, first_file + files):
        lines = [
            f"{f * ROWS_PER_FILE + i},m{i},{'Asia' if f % 2 else 'Europe'},C{f % 3}"
            for i in range(ROWS_PER_FILE)
        ]
        tmp = directory / f".f{f:03d}.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        tmp.rename(directory / f"f{f:03d}.csv")


def start(
    spark: Any, landing: Path, checkpoint: Path, opts: dict[str, str], *, frame: Any = None, **extra: str
) -> Any:
    source = frame if frame is not None else spark.readStream.format("csv").schema(SCHEMA)
    df = source.option("maxFilesPerTrigger", 1).load(str(landing)) if frame is None else frame
    writer = df.writeStream.format("acidstream").options(**opts).option("checkpointLocation", str(checkpoint))
    return writer.options(**extra).trigger(availableNow=True).start("testing.alerts")


def ids(ms: Metastore) -> list[int]:
    return sorted(ms.table("testing.alerts").scan(columns=["id"]).to_arrow().column("id").to_pylist())


def sink_txns(ms: Metastore) -> list[Any]:
    return [t for t in ms.show_txns() if (t.agent_info or "").startswith(TAG_PREFIX)]


def test_each_micro_batch_commits_one_txn_with_its_batch_id(
    acid_spark: Any, ms: Metastore, opts: dict[str, str], tmp_path: Path
) -> None:
    land(tmp_path / "in", 0, 3)
    q = start(acid_spark, tmp_path / "in", tmp_path / "ck", opts)
    q.awaitTermination()
    assert ids(ms) == list(range(3 * ROWS_PER_FILE))
    assert ms.get_valid_write_ids("testing.alerts").high_watermark == 3
    (key,) = [k for k in ms.table("testing.alerts").properties if k.startswith(PROPERTY_PREFIX)]
    recorded = json.loads(ms.table("testing.alerts").properties[key])
    assert (recorded["queryId"], recorded["batchId"]) == (str(q.id), 2)
    assert q.lastProgress["sink"]["numOutputRows"] == ROWS_PER_FILE
    assert all(t.state is not TxnStatus.OPEN for t in sink_txns(ms))


def test_query_stopped_mid_batch_and_restarted_writes_every_row_once(
    acid_spark: Any, ms: Metastore, opts: dict[str, str], tmp_path: Path
) -> None:
    from pyspark.sql.functions import udf

    @udf("int")
    def slow(i):  # type: ignore[no-untyped-def]  # one pause per file: keeps a batch in flight
        if i % ROWS_PER_FILE == 0:
            time.sleep(2.0)
        return i

    land(tmp_path / "in", 0, 4)
    frame = (
        acid_spark.readStream.format("csv")
        .schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .load(str(tmp_path / "in"))
        .withColumn("id", slow("id"))
    )
    q = start(acid_spark, tmp_path / "in", tmp_path / "ck", opts, frame=frame)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not [p for p in q.recentProgress if p["numInputRows"]]:
        time.sleep(0.2)
    time.sleep(1.0)  # inside the next batch's pause
    q.stop()
    visible = ids(ms)
    assert len(visible) % ROWS_PER_FILE == 0 and len(visible) < 4 * ROWS_PER_FILE  # whole batches only

    q2 = start(acid_spark, tmp_path / "in", tmp_path / "ck", opts)
    q2.awaitTermination()
    assert q2.id == q.id
    assert ids(ms) == list(range(4 * ROWS_PER_FILE))
    assert all(t.state is not TxnStatus.OPEN for t in sink_txns(ms))


def test_replayed_batch_of_the_same_query_is_skipped(
    acid_spark: Any, ms: Metastore, opts: dict[str, str], tmp_path: Path
) -> None:
    land(tmp_path / "in", 0, 2)
    q = start(acid_spark, tmp_path / "in", tmp_path / "ck", opts)
    q.awaitTermination()
    hwm = ms.get_valid_write_ids("testing.alerts").high_watermark
    # the table committed batch 1, but the checkpoint "did not": Spark re-runs batch 1 on restart
    for name in ("1", ".1.crc"):
        (tmp_path / "ck" / "commits" / name).unlink()
    q2 = start(acid_spark, tmp_path / "in", tmp_path / "ck", opts)
    q2.awaitTermination()
    assert [p["batchId"] for p in q2.recentProgress if p["numInputRows"]] == [1]
    assert ids(ms) == list(range(2 * ROWS_PER_FILE))
    assert ms.get_valid_write_ids("testing.alerts").high_watermark == hwm  # no txn for the replay


def test_lost_checkpoint_is_refused_instead_of_duplicating(
    acid_spark: Any, ms: Metastore, opts: dict[str, str], tmp_path: Path
) -> None:
    land(tmp_path / "in", 0, 1)
    start(acid_spark, tmp_path / "in", tmp_path / "ck", opts, sinkId="alerts-feed").awaitTermination()
    for child in sorted((tmp_path / "ck").rglob("*"), reverse=True):  # checkpoint lost: new query id, batch 0
        child.rmdir() if child.is_dir() else child.unlink()
    q = start(acid_spark, tmp_path / "in", tmp_path / "ck", opts, sinkId="alerts-feed")
    with pytest.raises(Exception, match="Was the checkpoint lost"):
        q.awaitTermination()
    assert ids(ms) == list(range(ROWS_PER_FILE))


def test_tasks_of_one_micro_batch_elect_one_txn_on_each_backend(
    acid_spark: Any, metastore_url: str, warehouse: Path, tmp_path: Path, create_alerts: Any
) -> None:
    ms = create_alerts(metastore_url)
    opts = {"metastore": metastore_url, "warehouse": str(warehouse)}
    land(tmp_path / "in", 0, 4)
    frame = (
        acid_spark.readStream.format("csv")
        .schema(SCHEMA)
        .option("maxFilesPerTrigger", 2)
        .load(str(tmp_path / "in"))
    )
    start(acid_spark, tmp_path / "in", tmp_path / "ck", opts, frame=frame).awaitTermination()
    assert ids(ms) == list(range(4 * ROWS_PER_FILE))
    assert ms.get_valid_write_ids("testing.alerts").high_watermark == 2  # two batches, two txns
    deltas = {p.parent.name for p in warehouse.rglob("bucket_*")}
    assert deltas == {f"delta_000000{w}_000000{w}_000{s}" for w in (1, 2) for s in (0, 1)}  # two tasks each
    assert all(t.state is not TxnStatus.OPEN for t in sink_txns(ms))
