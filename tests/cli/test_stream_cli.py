"""``acidstream stream`` and ``acidstream cat`` end to end, in a real subprocess (stdin, exit codes)."""

from __future__ import annotations

import json
import subprocess
import sys
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
