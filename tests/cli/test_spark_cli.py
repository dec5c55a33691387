"""The Spark commands without Spark: main-job's summary keeps long values whole, and it refuses a landing
directory it cannot use before it starts Spark; spark-shell -e refuses an obviously wrong query before it starts
Spark."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from acidstream.cli import cli
from acidstream.cli._text import console
from acidstream.cli.spark import summary_table
from acidstream.spark.main_job import JobReport

REPORT = JobReport(
    rows=1_000_000,
    seconds=60.0,
    transactions=40,
    table_rows=1_000_000,
    partitions=10,
    files=50,
    snapshots=[0, 12, 40],
    compaction={"compacted": 10, "requested": 10, "rows_written": 900_000, "failed": 0, "cleaned": 10},
)
LOG = "/srv/data/" + "a-rather-long-directory-name/" * 6 + "wh/_logs/spark.log"


def test_piped_the_summary_keeps_the_log_path_on_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    console().print(summary_table(REPORT, "/srv/wh", LOG))
    lines = capsys.readouterr().out.splitlines()
    assert any(LOG in line and "Spark log" in line for line in lines)
    assert any("(replaced files go once no query that may read them is left)" in line for line in lines)


def test_a_narrow_terminal_folds_the_log_path_without_cutting_it() -> None:
    narrow = Console(width=70, force_terminal=True, record=True)
    narrow.print(summary_table(REPORT, "/srv/wh", LOG))
    cells = [line.split("│")[2].strip() for line in narrow.export_text().splitlines() if line.count("│") == 3]
    assert LOG in "".join(cells)


@pytest.mark.parametrize(
    ("query", "message", "at"),
    [
        ("SELEC 1", "unknown statement 'SELEC' (did you mean SELECT?)", 0),
        ("SELECT count(*) FROM alerts WHERE msg = 'oops", "unterminated quote: no closing '", 40),
        ("SELECT (1 + 2 FROM alerts", "'(' is never closed", 7),
    ],
)
def test_an_obviously_wrong_query_is_refused_before_spark_starts(
    warehouse: Path, query: str, message: str, at: int
) -> None:
    env = {**os.environ, "ACIDSTREAM_WAREHOUSE": str(warehouse), "ACIDSTREAM_METASTORE": ""}
    subprocess.run(
        [sys.executable, "-m", "acidstream.cli", "metastore", "init", "--no-config"], env=env, check=True
    )
    started = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "acidstream.cli", "spark-shell", "-e", query],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and f"SqlSyntaxError: {message} at position {at}" in res.stderr, res.stderr
    assert not (warehouse / "_logs").exists()  # Spark never started: it would log there
    assert time.monotonic() - started < 20


def test_main_job_says_it_waits_for_an_unreachable_metastore_before_starting_spark(tmp_path: Path) -> None:
    url = "postgresql://acid@127.0.0.1:1/none"  # port 1: refused, and retried
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "acidstream.cli",
            "main-job",
            "--metastore",
            url,
            "--warehouse",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 4, res.stderr
    assert res.stderr.startswith(f"waiting for the metastore at {url} to answer...\n")
    assert "MetastoreUnavailable" in res.stderr and not (tmp_path / "_logs").exists()  # Spark never started


@pytest.mark.parametrize("landing", [[], ["--landing", "s3://acidstream-tests/landing"]])
def test_main_job_on_s3_refuses_a_missing_or_object_store_landing_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, landing: list[str]
) -> None:
    """A warehouse on S3 needs a landing directory that renames atomically (Spark's checkpoint): a usage error
    naming the setting, before the metastore is reached or Spark starts (the endpoint is a closed port)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "acidstream.toml").write_text('[s3]\nendpoint_override = "127.0.0.1:1"\nscheme = "http"\n')
    args = [
        "main-job",
        "--warehouse",
        "s3://acidstream-tests/wh",
        "--metastore",
        "postgresql://x@127.0.0.1:1/n",
    ]
    res = CliRunner().invoke(cli, [*args, *landing])
    assert res.exit_code == 2, res.output
    assert "is on an object store" in res.output and "--landing" in res.output
    assert "waiting for the metastore" not in res.output
