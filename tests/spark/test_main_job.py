"""``acidstream main-job`` end to end, twice on one warehouse (the second run ingests only its own files).

Stopped and run again: tests/spark/test_main_job_rerun.py."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from acidstream.catalog import Metastore
from acidstream.cli import cli
from acidstream.cli.spark import DEFAULT_ROWS_HELP, ROWS_PER_FILE_HELP
from acidstream.errors import StorageLocationError, TransactionError
from acidstream.spark.main_job import (
    DEFAULT_ROWS,
    MANIFEST,
    POOL_PROPERTY,
    ROWS_PER_FILE,
    JobConfig,
    LandedRun,
    SnapshotWatcher,
    check_whole,
    default_files,
    land_files,
    landing_directory,
    prepare,
    spark_path,
)
from acidstream.storage import configure_stores
from acidstream.streaming.connection import StreamingConnection
from acidstream.streaming.writers import StrictDelimitedInputWriter

WIDE = {"COLUMNS": "200"}  # the summary table's rows on one line each


@pytest.mark.slow
def test_main_job_streams_landing_files_and_is_rerunnable(acid_spark: Any, tmp_path: Path) -> None:
    """The first run's 12 transactions leave 12 deltas in each partition: more than Hive's threshold of 10, so
    the job's compactor major-compacts every partition (while the ingest goes on or in its last pass), and
    the queries still see whole transactions only."""
    warehouse = tmp_path / "wh"
    args = ["main-job", "--warehouse", str(warehouse), "--query-interval", "0.2"]
    sized = ["--rows", "900", "--files", "3"]
    first = CliRunner().invoke(
        cli, [*args, "--rows", "1200", "--files", "12"], catch_exceptions=False, env=WIDE
    )
    assert first.exit_code == 0, first.output
    text = " ".join(first.output.split())
    assert "rows ingested (this run) │ 1,200" in text and "records/s" in text
    assert "12 (one per landing file and micro-batch)" in text
    assert "distinct snapshots mid-ingest, each with whole transactions only" in text
    assert "compactor: requested " in text  # a pass's figures, as it happens
    compacted = re.search(
        r"│ (\d+) compactions of \1 requested, [\d,]+ rows rewritten, 0 failed; (\d+) cleaned", text
    )
    assert compacted and int(compacted[1]) >= 10  # when the passes come decides how many more than one each
    assert compacted[2] == compacted[1]  # the job's finished queries no longer hold its cleaner back
    ms = Metastore.connect(f"sqlite:///{warehouse / 'metastore.db'}", warehouse=warehouse)
    partitions = list(Path(ms.table("testing.alerts").location).glob("continent=*/country=*"))
    assert len(partitions) == 10
    assert all(any(d.name.startswith("base_") for d in p.iterdir()) for p in partitions)
    second = CliRunner().invoke(cli, [*args, *sized], catch_exceptions=False, env=WIDE)
    assert second.exit_code == 0, second.output

    ids = ms.table("testing.alerts").scan(columns=["id"]).to_arrow().column("id").to_pylist()
    assert sorted(ids) == list(range(2100))
    assert ms.get_valid_write_ids("testing.alerts").high_watermark == 15  # one txn per landing file
    assert list((warehouse / "_landing").iterdir()) == []  # each finished run's files and checkpoint are gone
    assert acid_spark.sparkContext._jsc is not None  # the shared session survived the command
    assert acid_spark.sparkContext.getLocalProperty(POOL_PROPERTY) is None  # the thread's pool is put back

    reset = CliRunner().invoke(cli, [*args, *sized, "--reset"], catch_exceptions=False, env=WIDE)
    assert reset.exit_code == 0, reset.output
    ids = ms.table("testing.alerts").scan(columns=["id"]).to_arrow().column("id").to_pylist()
    assert sorted(ids) == list(range(900))


def test_check_whole_accepts_only_complete_files_that_stay() -> None:
    sizes = [300, 300, 100]
    check_whole({}, sizes, set())
    check_whole({0: 300, 2: 100}, sizes, {0})
    with pytest.raises(TransactionError, match="part of a transaction"):
        check_whole({0: 300, 1: 299}, sizes, set())
    with pytest.raises(TransactionError, match="part of a transaction"):
        check_whole({3: 1}, sizes, set())
    with pytest.raises(TransactionError, match=r"files \[1\] disappeared"):
        check_whole({0: 300}, sizes, {0, 1})


def test_the_watcher_fails_on_a_transaction_seen_in_part(acid_spark: Any, tmp_path: Path) -> None:
    """Landing file 1 (ids 10..19) committed as two transactions: a query sees it whole or not, never half."""
    warehouse = str(tmp_path / "wh")
    cfg = JobConfig(rows=20, files=2, warehouse=warehouse, metastore=f"sqlite:///{warehouse}/metastore.db")
    ms = prepare(cfg)
    conn = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("testing")
        .with_table("alerts")
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    )
    watcher = SnapshotWatcher(acid_spark, cfg, first_id=0, sizes=[10, 10])
    with conn:
        for ids in (range(10), range(10, 15), range(15, 20)):
            conn.begin_transaction()
            for i in ids:
                conn.write(f"{i},m,Asia,India".encode())
            conn.commit_transaction()
            if ids.start == 10:
                with pytest.raises(TransactionError, match=r"file → rows visible \{1: 5\}"):
                    watcher.observe()
            else:
                watcher.observe()
    assert watcher.snapshots == [1, 2]


def test_default_landing_files_are_sized_by_rows() -> None:
    rows = [1, ROWS_PER_FILE, ROWS_PER_FILE + 1, 4 * ROWS_PER_FILE]
    assert [default_files(n) for n in rows] == [1, 1, 2, 4]
    assert (f"{DEFAULT_ROWS:,}", f"{ROWS_PER_FILE:,}") == (DEFAULT_ROWS_HELP, ROWS_PER_FILE_HELP)  # --help


def test_a_failed_run_stops_its_compactor(acid_spark: Any, tmp_path: Path) -> None:
    """A run whose queries find a transaction seen in part fails (exit 6) with its compactor stopped: no pass
    may run on while the interpreter exits (each would fail, its pool refusing work)."""
    warehouse = tmp_path / "wh"
    cfg = JobConfig(
        rows=600, files=6, warehouse=str(warehouse), metastore=f"sqlite:///{warehouse}/metastore.db"
    )
    prepare(cfg)
    run = land_files(str(warehouse / "_landing"), cfg.rows, cfg.files, first_id=0)
    Path(run.path, MANIFEST).write_text(
        json.dumps({"first_id": 0, "sizes": [99] * 6})
    )  # a manifest that lies
    args = ["main-job", "--warehouse", str(warehouse), "--query-interval", "0.1"]
    res = CliRunner().invoke(cli, args, env=WIDE)
    assert res.exit_code == 6, res.output
    assert "saw part of a transaction" in res.output
    assert [t.name for t in threading.enumerate() if "compactor" in t.name] == []


def test_the_landing_directory_defaults_to_the_warehouse_and_is_never_on_an_object_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local: ``<warehouse>/_landing``, or the one named (made absolute: executors do not share the driver's
    directory), read by Spark as a ``file:`` URI. HDFS: under the warehouse, as it is. S3: none by default, and
    none there: a typed error naming the setting (no request is sent: the endpoint is a closed port)."""
    monkeypatch.chdir(tmp_path)
    assert landing_directory(str(tmp_path / "wh")) == str(tmp_path / "wh" / "_landing")
    assert landing_directory("s3://b/wh", "land") == str(tmp_path / "land")
    assert landing_directory("hdfs://nn:8020/wh/") == "hdfs://nn:8020/wh/_landing"
    run = LandedRun(str(tmp_path / "land" / "run-1"), 0, (10,))
    assert run.files == f"file://{tmp_path}/land/run-1/part-*.csv"
    assert run.checkpoint == f"file://{tmp_path}/land/run-1/_checkpoint"
    assert spark_path("hdfs://nn:8020/wh/_landing") == "hdfs://nn:8020/wh/_landing"
    previous = configure_stores(
        s3={"endpoint_override": "127.0.0.1:1", "scheme": "http", "region": "us-east-1"}
    )
    try:
        with pytest.raises(
            StorageLocationError, match=r"warehouse s3://b/wh is on an object store.*--landing"
        ):
            landing_directory("s3://b/wh")
        with pytest.raises(
            StorageLocationError, match=r"--landing, JobConfig.landing\) s3a://b/l is on an obj"
        ):
            landing_directory(str(tmp_path / "wh"), "s3a://b/l")
    finally:
        configure_stores(**previous)
