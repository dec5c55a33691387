"""The command line on a Hive 4 metastore (``--metastore thrift://...``): DDL, streaming from stdin, a statement,
reading back, and a compaction as the metastore's remote worker; a warehouse default is not needed there."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support.deps import import_or_skip

pytestmark = pytest.mark.hive4


def acidstream(*args: str, stdin: str = "") -> str:
    done = subprocess.run(
        [sys.executable, "-m", "acidstream.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_command_line_runs_on_a_hive_metastore(hive4_metastore: str) -> None:
    import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")
    ms = ("--metastore", hive4_metastore)
    acidstream("sql", *ms, "CREATE DATABASE IF NOT EXISTS clidb")
    acidstream(
        "sql",
        *ms,
        "CREATE TABLE clidb.events (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true')",
    )
    assert "events" in acidstream("show", "tables", "clidb", *ms)
    acidstream("stream", "clidb.events", *ms, stdin="".join(f"{i},m{i}\n" for i in range(5)))
    acidstream("sql", *ms, "UPDATE clidb.events SET msg = 'two' WHERE id = 2")
    acidstream("compact", "clidb.events", "--major", "--wait", *ms)
    lines = sorted(acidstream("cat", "clidb.events", *ms).splitlines())
    assert lines == ["0\tm0", "1\tm1", "2\ttwo", "3\tm3", "4\tm4"]
