"""``acidstream main-job`` end to end, twice on one warehouse (the second run ingests only its own files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from acidstream.catalog import Metastore
from acidstream.cli import cli
from acidstream.spark.main_job import POOL_PROPERTY, ROWS_PER_FILE, default_files, whole_files


def test_main_job_streams_landing_files_and_is_rerunnable(acid_spark: Any, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    args = [
        "main-job",
        "--rows",
        "900",
        "--files",
        "3",
        "--warehouse",
        str(warehouse),
        "--query-interval",
        "0.2",
    ]
    first = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert first.exit_code == 0, first.output
    assert "records/s" in first.output and "900" in first.output
    second = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert second.exit_code == 0, second.output

    ms = Metastore.connect(f"sqlite:///{warehouse / 'metastore.db'}", warehouse=warehouse)
    ids = ms.table("testing.alerts").scan(columns=["id"]).to_arrow().column("id").to_pylist()
    assert sorted(ids) == list(range(1800))
    assert ms.get_valid_write_ids("testing.alerts").high_watermark == 6  # one txn per landing file
    assert acid_spark.sparkContext._jsc is not None  # the shared session survived the command
    assert acid_spark.sparkContext.getLocalProperty(POOL_PROPERTY) is None  # the thread's pool is put back

    reset = CliRunner().invoke(cli, [*args, "--reset"], catch_exceptions=False)
    assert reset.exit_code == 0, reset.output
    ids = ms.table("testing.alerts").scan(columns=["id"]).to_arrow().column("id").to_pylist()
    assert sorted(ids) == list(range(900))


def test_whole_files_accepts_only_sums_of_landing_file_sizes() -> None:
    sizes = [300, 300, 100]
    assert [n for n in range(0, 701, 50) if whole_files(n, sizes)] == [0, 100, 300, 400, 600, 700]


def test_default_landing_files_are_sized_by_rows() -> None:
    rows = [1, ROWS_PER_FILE, ROWS_PER_FILE + 1, 4 * ROWS_PER_FILE]
    assert [default_files(n) for n in rows] == [1, 1, 2, 4]
