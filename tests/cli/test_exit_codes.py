"""Each row of the exit code table in ``docs/cli.md``, triggered through the real ``acidstream`` command (a
subprocess).

130 and 143 (interrupted) are in test_interrupt.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream import Metastore


@pytest.fixture
def ms(warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{warehouse / 'metastore.db'}", warehouse=warehouse) as m:
        m.execute("CREATE DATABASE testing")
        m.execute(
            "CREATE TABLE testing.alerts (id int, msg string) PARTITIONED BY (continent string, country string) "
            "CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        yield m


def command(warehouse: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "acidstream.cli", *args, "--warehouse", str(warehouse)]


def env(faults: str = "") -> dict[str, str]:
    return {**os.environ, "ACIDSTREAM_METASTORE": "", "ACIDSTREAM_WAREHOUSE": "", "ACIDSTREAM_FAULTS": faults}


def run(warehouse: Path, *args: str, stdin: bytes = b"", faults: str = "") -> tuple[int, str]:
    """(exit code, stderr)"""
    res = subprocess.run(
        command(warehouse, *args), input=stdin, capture_output=True, env=env(faults), timeout=120
    )
    return res.returncode, res.stderr.decode()


def test_0_success(ms: Metastore, warehouse: Path) -> None:
    assert run(warehouse, "show", "tables", "testing")[0] == 0


def test_1_other_error(ms: Metastore, warehouse: Path) -> None:
    code, err = run(warehouse, "repl", "status")
    assert code == 1 and "is no replica" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("stream", "testing.alerts", "--partition", "Asia"), "InvalidPartition"),
        (("merge", "testing.alerts", "--source", "{source}", "--on", "nosuchcol"), "nosuchcol: not a column"),
        (("show", "tables", "--metastore", "mysql://user@host/db"), "unsupported metastore URL 'mysql://"),
        (("show", "tables", "--metastore", "not a url"), "or thrift://host:9083"),
        (("sql", "SELEC * FROM testing.alerts"), "SyntaxError"),
        (("stream", "testing.alerts", "--records-per-txn", "0"), "--records-per-txn"),
    ],
)
def test_2_usage(ms: Metastore, warehouse: Path, tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    source = tmp_path / "changes.csv"
    source.write_text("id,msg\n1,a\n")
    code, err = run(warehouse, *(a.format(source=source) for a in args), stdin=b"1,a\n")
    assert code == 2 and message in err, err
    assert ms.table("testing.alerts").scan().count() == 0


def test_3_bad_input_records(ms: Metastore, warehouse: Path) -> None:
    code, err = run(warehouse, "stream", "testing.alerts", stdin=b"one,a,Asia,India\n")
    assert code == 3 and "SerializationError" in err


@pytest.mark.parametrize(
    "args", [("show", "tables", "--metastore", "sqlite:///{tmp}/none.db"), ("cat", "testing.nope")]
)
def test_4_metastore(ms: Metastore, warehouse: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    code, err = run(warehouse, *(a.format(tmp=tmp_path) for a in args))
    assert code == 4 and "looked in: metastore" in err, err


def test_5_storage_io(ms: Metastore, warehouse: Path) -> None:
    code, err = run(
        warehouse,
        "stream",
        "testing.alerts",
        stdin=b"1,a,Asia,India\n",
        faults="orc.flush.tail=oserror:ENOSPC",
    )
    assert code == 5 and "No space left on device" in err


def test_5_storage_io_in_a_scan(ms: Metastore, warehouse: Path) -> None:
    assert run(warehouse, "stream", "testing.alerts", stdin=b"1,a,Asia,India\n")[0] == 0
    code, err = run(warehouse, "cat", "testing.alerts", faults="scan.listing=oserror:EIO")
    assert code == 5 and "StorageUnavailable" in err and "continent=Asia/country=India" in err, err


def test_6_transaction_failure(ms: Metastore, warehouse: Path) -> None:
    """The stream's txn is aborted under it (as the housekeeper aborts one that timed out) before its commit."""
    proc = subprocess.Popen(
        command(warehouse, "stream", "testing.alerts"),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env("orc.flush.tail=sleep:3"),
    )
    assert proc.stdin is not None
    proc.stdin.write(b"1,a,Asia,India\n")
    proc.stdin.close()  # the end of input: the commit flushes, and sleeps there
    deadline = time.monotonic() + 60
    while not (txns := [t.txn_id for t in ms.show_txns() if t.state.name == "OPEN"]):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    ms.abort_txns(txns)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 6 and "aborted" in err, err
    assert ms.table("testing.alerts").scan().count() == 0
