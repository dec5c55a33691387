"""A scan's reader registration ends with its reader: when the scan closes, when its process exits, and, for a
reader that crashed, after a short lease (not the txn timeout), so the cleaner is held back only briefly."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from acidstream.catalog import Metastore
from acidstream.metastore.sql.client import READER_LEASE

READER = """
import sys, time
from acidstream.catalog import Metastore
ms = Metastore.connect(sys.argv[1], warehouse=sys.argv[2], txn_timeout=float(sys.argv[3]))
scan = ms.table("t").scan()
print("registered", flush=True)
if sys.argv[4] == "hang":
    time.sleep(600)
"""


@pytest.fixture
def ms(tmp_path: Path) -> Metastore:
    m = Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=tmp_path / "wh")
    m.execute("CREATE TABLE t (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
    m.table("t").merge(pd.DataFrame({"id": [1, 2]}), on=["id"])
    return m


def _reader(ms: Metastore, tmp_path: Path, txn_timeout: float, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", READER, ms.url, str(tmp_path / "wh"), str(txn_timeout), mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # registered
    return proc


def _leases(tmp_path: Path) -> list[int]:
    with sqlite3.connect(tmp_path / "ms.db") as db:
        return [lease for (lease,) in db.execute("SELECT sr_lease_ms FROM snapshot_readers")]


def test_a_reader_registers_with_a_short_lease(ms: Metastore, tmp_path: Path) -> None:
    proc = _reader(ms, tmp_path, 300.0, "hang")
    try:
        assert _leases(tmp_path) == [int(READER_LEASE * 1000)]  # not the 300 s txn timeout
        assert READER_LEASE <= 30
    finally:
        proc.kill()
        proc.wait()


def test_a_crashed_readers_registration_expires_after_its_lease(ms: Metastore, tmp_path: Path) -> None:
    proc = _reader(ms, tmp_path, 1.0, "hang")  # its lease: the shorter of READER_LEASE and its txn timeout
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(ms.active_readers("default.t")) == 1
    time.sleep(1.2)
    ms.perform_timeouts()
    assert ms.active_readers("default.t") == []


def test_a_reader_that_exits_unregisters(ms: Metastore, tmp_path: Path) -> None:
    proc = _reader(ms, tmp_path, 300.0, "exit")
    assert proc.wait(30) == 0
    assert ms.active_readers("default.t") == []
