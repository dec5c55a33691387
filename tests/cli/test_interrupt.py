"""SIGTERM ends a command as SIGINT does: the open transaction is aborted, its lock released, what was committed
is said, and the exit code is 128 + the signal. Real subprocesses, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from acidstream import Metastore


@pytest.fixture
def ms(warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{warehouse / 'metastore.db'}", warehouse=warehouse) as m:
        m.execute("CREATE DATABASE testing")
        m.execute(
            "CREATE TABLE testing.alerts (id int, msg string) CLUSTERED BY (id) INTO 2 BUCKETS "
            "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        yield m


def start(warehouse: Path, *args: str, faults: str = "") -> subprocess.Popen[bytes]:
    env = {"ACIDSTREAM_WAREHOUSE": str(warehouse), "ACIDSTREAM_METASTORE": "", "ACIDSTREAM_FAULTS": faults}
    return subprocess.Popen(
        [sys.executable, "-m", "acidstream.cli", *args],
        env={**os.environ, **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def open_txns(ms: Metastore) -> list[int]:
    return [t.txn_id for t in ms.show_txns() if t.state.name == "OPEN"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_aborts_the_open_txn_of_stream_and_says_what_was_committed(
    ms: Metastore, warehouse: Path, sig: signal.Signals
) -> None:
    proc = start(warehouse, "stream", "testing.alerts", "--records-per-txn", "2", "--commit-interval", "600")
    assert proc.stdin is not None
    proc.stdin.write(b"1,a\n2,b\n3,c\n")  # one txn committed, the next one open with record 3
    proc.stdin.flush()
    wait_for(lambda: ms.table("testing.alerts").scan().count() == 2 and len(open_txns(ms)) == 1, "record 3")
    assert [lock.txn_id for lock in ms.show_locks()] == open_txns(ms)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err.decode()
    text = err.decode()
    assert f"interrupted by {sig.name}" in text
    assert "committed: input records 1-2 (1 transaction)" in text
    assert "not committed: input records 3-3 (their transaction is aborted)" in text
    assert open_txns(ms) == [] and ms.show_locks() == []
    assert ms.table("testing.alerts").scan().count() == 2


def test_a_commit_under_way_finishes_before_the_signal_is_acted_on(ms: Metastore, warehouse: Path) -> None:
    """The signal waits for the commit and its count, so what the command says is committed is."""
    proc = start(
        warehouse, "stream", "testing.alerts", "--records-per-txn", "2", faults="metastore.commit=sleep:3"
    )
    assert proc.stdin is not None
    proc.stdin.write(b"1,a\n2,b\n")  # the second record commits: it sleeps inside the commit
    proc.stdin.flush()
    wait_for(lambda: len(open_txns(ms)) == 1, "the transaction")
    time.sleep(1)  # in the commit's sleep
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err.decode()
    assert "committed: input records 1-2 (1 transaction)" in err.decode()
    assert ms.table("testing.alerts").scan().count() == 2 and open_txns(ms) == []


def test_sigterm_stops_repl_sync_follow_with_its_summary(
    ms: Metastore, warehouse: Path, tmp_path: Path
) -> None:
    replica = tmp_path / "replica"
    proc = start(
        warehouse,
        "repl",
        "sync",
        f"sqlite:///{warehouse / 'metastore.db'}",
        f"sqlite:///{replica / 'metastore.db'}",
        "--target-warehouse",
        str(replica),
        "--follow",
        "--poll-interval",
        "0.1",
    )
    wait_for(lambda: (replica / "metastore.db").exists(), "the replica's metastore")
    time.sleep(1)  # its schema
    with Metastore.connect(f"sqlite:///{replica / 'metastore.db'}", warehouse=replica) as target:
        wait_for(lambda: "testing" in target.list_databases(), "the bootstrap")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err.decode()
    assert b"events applied" in out and b"interrupted by SIGTERM" in err


def test_sigterm_aborts_a_merge_in_progress(ms: Metastore, warehouse: Path, tmp_path: Path) -> None:
    source = tmp_path / "changes.csv"
    source.write_text("id,msg\n1,a\n2,b\n")
    merge = start(
        warehouse,
        "merge",
        "testing.alerts",
        "--source",
        str(source),
        "--on",
        "id",
        faults="orc.flush.tail=sleep:5",
    )
    wait_for(lambda: len(open_txns(ms)) == 1, "the merge's transaction")
    merge.send_signal(signal.SIGTERM)
    _, err = merge.communicate(timeout=60)
    assert merge.returncode == 143, err.decode()
    assert "committed to testing.alerts: nothing (the merge is one transaction: aborted)" in err.decode()
    assert open_txns(ms) == [] and ms.show_locks() == []
    assert ms.table("testing.alerts").scan().count() == 0
