"""``acidstream stream`` and ``acidstream cat`` end to end, in a real subprocess (stdin, exit codes)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from acidstream import Metastore


def run(args: list[str], stdin: bytes = b"", wh: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    extra = ["--warehouse", str(wh)] if wh is not None else []
    return subprocess.run(
        [sys.executable, "-m", "acidstream.cli", *args, *extra],
        input=stdin,
        capture_output=True,
        timeout=120,
    )


@pytest.fixture
def wh(warehouse: Path) -> Path:
    with Metastore.connect(f"sqlite:///{warehouse / 'metastore.db'}", warehouse=str(warehouse)) as ms:
        ms.execute("CREATE DATABASE testing")
        ms.execute(
            "CREATE TABLE testing.alerts (id int, msg string) PARTITIONED BY (continent string, country string) "
            "CLUSTERED BY (id) INTO 5 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
    return warehouse


def test_stream_commits_by_count_then_cat_prints_rows(wh: Path) -> None:
    data = b"".join(f"{i},m{i}\n".encode() for i in range(25))
    res = run(["stream", "testing.alerts", "--partition", "Asia,India", "--records-per-txn", "10"], data, wh)
    assert res.returncode == 0, res.stderr.decode()
    assert res.stderr.count(b"25 rows committed in 3 txns, 0 records rejected") == 1  # the final line, once
    out = run(["cat", "testing.alerts", "--row-id"], wh=wh)
    assert out.returncode == 0, out.stderr.decode()
    lines = out.stdout.decode().splitlines()
    assert len(lines) == 25
    fields = [line.split("\t") for line in lines]
    assert all(set(json.loads(f[0])) == {"writeid", "bucketid", "rowid"} for f in fields)
    assert sorted((int(f[1]), f[2]) for f in fields) == [(i, f"m{i}") for i in range(25)]
    assert {(f[3], f[4]) for f in fields} == {("Asia", "India")}
    assert run(["cat", "testing.alerts", "--limit", "3"], wh=wh).stdout.decode().count("\n") == 3


def test_stream_json_dynamic_partitions(wh: Path) -> None:
    data = b'{"id": 1, "msg": "a", "continent": "EU", "country": "FR"}\n{"id": 2, "msg": "b", "continent": "EU"}\n'
    res = run(["stream", "testing.alerts", "--format", "json"], data, wh)
    assert res.returncode == 0, res.stderr.decode()
    out = run(["cat", "testing.alerts", "--columns", "id,country"], wh=wh).stdout.decode().splitlines()
    assert sorted(out) == ["1\tFR", "2\tNULL"]


def test_a_bad_record_says_what_was_committed_and_what_was_not(wh: Path) -> None:
    data = b"".join(f"{i},ok\n".encode() for i in range(1, 26)) + b"oops,x\n27,ok\n\n28,ok\n"
    bad = run(["stream", "testing.alerts", "--partition", "A,B", "--records-per-txn", "10"], data, wh)
    assert bad.returncode == 3
    err = bad.stderr.decode()
    assert "SerializationError: record 5, field 'id'" in err
    assert "the bad one is input record 26 " in err
    assert "committed: input records 1-20 (2 transactions)" in err
    assert "not committed: input records 21-28 (their transaction is aborted) and all input after them" in err
    assert "--dead-letter FILE" in err and "`tail -n +21`" in err
    out = run(["cat", "testing.alerts", "--columns", "id"], wh=wh).stdout.decode().split()
    assert sorted(map(int, out)) == list(range(1, 21))


def test_exit_codes_say_what_failed(wh: Path) -> None:
    bad = run(["stream", "testing.alerts", "--partition", "A,B"], b"1,ok\nnot-a-number,x\n", wh)
    assert bad.returncode == 3 and b"SerializationError" in bad.stderr and b"'id'" in bad.stderr
    assert b"committed: nothing (0 transactions)" in bad.stderr
    missing = run(["stream", "testing.nope"], b"1,x\n", wh)
    assert missing.returncode == 4 and b"InvalidTable" in missing.stderr
    usage = run(["stream", "testing.alerts", "--format", "regex"], b"", wh)
    assert usage.returncode == 2 and b"--regex" in usage.stderr


def test_dead_letter_keeps_the_stream_going(wh: Path, tmp_path: Path) -> None:
    dead = tmp_path / "dead.jsonl"
    res = run(
        ["stream", "testing.alerts", "--partition", "A,B", "--dead-letter", str(dead)],
        b"1,ok\nbad,x\n3,ok\n",
        wh,
    )
    assert res.returncode == 0, res.stderr.decode()
    assert b"2 rows committed in 1 txn, 1 record rejected" in res.stderr
    assert json.loads(dead.read_text())["record"] == "bad,x"


def test_help_everywhere() -> None:
    for args in (["--help"], ["stream", "--help"], ["cat", "--help"], ["spark-shell", "--help"]):
        res = run(args)
        assert res.returncode == 0 and b"Usage:" in res.stdout


def test_a_bad_delimiter_is_a_usage_error_and_an_escape_names_a_tab(wh: Path) -> None:
    for delimiter in (";;", "é", "\\q"):
        bad = run(["stream", "testing.alerts", "--delimiter", delimiter], b"1,x\n", wh)
        assert bad.returncode == 2, bad.stderr.decode()
        assert b"Invalid value for '--delimiter'" in bad.stderr and b"Traceback" not in bad.stderr
    res = run(["stream", "testing.alerts", "--partition", "A,B", "--delimiter", "\\t"], b"1\tx,y\n", wh)
    assert res.returncode == 0, res.stderr.decode()
    assert run(["cat", "testing.alerts", "--columns", "id,msg"], wh=wh).stdout == b"1\tx,y\n"
    regex = run(["stream", "testing.alerts", "--format", "regex", "--regex", "(a"], b"", wh)
    assert regex.returncode == 2 and b"Invalid value for '--regex'" in regex.stderr


def test_csv_reads_quoted_fields_and_delimited_reads_quotes_as_data(wh: Path) -> None:
    data = b'1,"hello, world",EU,"FR"\n2,"two\nlines",EU,DE\n3,"say ""hi""",EU,DE\n'
    res = run(["stream", "testing.alerts"], data, wh)
    assert res.returncode == 0, res.stderr.decode()
    assert b"3 rows committed in 1 txn, 0 records rejected" in res.stderr
    rows = run(["cat", "testing.alerts", "--columns", "id,msg,country"], wh=wh).stdout.decode()
    assert "1\thello, world\tFR" in rows and "2\ttwo\nlines\tDE" in rows and '3\tsay "hi"\tDE' in rows
    hive = run(["stream", "testing.alerts", "--format", "delimited"], b'4,"hello, world",EU,FR\n', wh)
    assert hive.returncode == 3 and b"record 0: record has 5 fields, the table has 4 columns" in hive.stderr


def test_records_short_of_fields_are_committed_with_nulls_and_counted(wh: Path) -> None:
    res = run(["stream", "testing.alerts"], b"33,few\n34,ok,EU,FR\n35\n", wh)
    assert res.returncode == 0, res.stderr.decode()
    assert b"2 records had fewer fields than the table's columns: the missing values are NULL" in res.stderr
    rows = run(["cat", "testing.alerts"], wh=wh).stdout.decode().splitlines()
    assert sorted(rows) == ["33\tfew\tNULL\tNULL", "34\tok\tEU\tFR", "35\tNULL\tNULL\tNULL"]
    full = run(["stream", "testing.alerts"], b"36,ok,EU,FR\n", wh)
    assert b"fewer fields" not in full.stderr


def test_a_rate_is_given_only_for_a_stream_that_ran_a_while(wh: Path) -> None:
    tiny = run(["stream", "testing.alerts", "--partition", "A,B"], b"1,x\n", wh)
    assert tiny.returncode == 0 and b"1 row committed in 1 txn, 0 records rejected\n" in tiny.stderr
    assert b"records/s" not in tiny.stderr
    args = [
        "stream",
        "testing.alerts",
        "--partition",
        "A,B",
        "--commit-interval",
        "0.1",
        "--warehouse",
        str(wh),
    ]
    slow = subprocess.Popen(
        [sys.executable, "-m", "acidstream.cli", *args], stdin=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert slow.stdin is not None
    slow.stdin.write(b"2,x\n")
    slow.stdin.flush()
    while b"2" not in run(["cat", "testing.alerts", "--columns", "id"], wh=wh).stdout.split():
        time.sleep(0.1)  # committed by time: the stream is running
    time.sleep(1.1)
    _, err = slow.communicate(b"3,y\n", timeout=120)
    assert slow.returncode == 0 and b"records/s" in err, err.decode()
