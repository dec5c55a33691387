"""Streaming from several OS processes at once, and a writer killed with SIGKILL mid-transaction."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from acidstream import Metastore

pytestmark = pytest.mark.slow

WRITER = textwrap.dedent(
    """
    import sys, time
    from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
    url, wh, worker, txns, per_txn, mode = sys.argv[1:7]
    worker, txns, per_txn = int(worker), int(txns), int(per_txn)
    ms = Metastore.connect(url, warehouse=wh, txn_timeout=float(sys.argv[7]) if len(sys.argv) > 7 else 300)
    conn = (StreamingConnection.builder().with_metastore(ms).with_database("testing").with_table("alerts")
            .with_agent_info(f"worker-{worker}").with_transaction_batch_size(3)
            .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
            # tiny parse batch and buffer bound: rows reach the file (auto-flush) before any commit
            .with_configuration({"heartbeat_interval": 600, "parse_batch_records": 5, "max_buffered_bytes": 1})
            .connect())
    for t in range(txns):
        conn.begin_transaction()
        for i in range(per_txn):
            rid = (worker * txns + t) * per_txn + i
            conn.write(f"{rid},w{worker},Asia,c{rid % 3}".encode())
        if mode == "hang" and t == txns - 1:  # flushed rows of an open txn on disk: wait to be killed
            assert conn.stats()["auto_flushes"] > 0
            print("READY", conn.current_transaction_id(), flush=True)
            time.sleep(600)
        conn.commit_transaction()
    conn.close()
    print("DONE", flush=True)
    """
)


def _writer(
    url: str, wh: Path, worker: int, txns: int, per_txn: int, mode: str, *extra: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, url, str(wh), str(worker), str(txns), str(per_txn), mode, *extra],
        stdout=subprocess.PIPE,
        text=True,
    )


def _setup(url: str, wh: Path) -> Metastore:
    ms = Metastore.connect(url, warehouse=str(wh), txn_timeout=2)
    ms.execute("CREATE DATABASE testing")
    ms.execute(
        "CREATE TABLE testing.alerts (id int, msg string) PARTITIONED BY (continent string, country string) "
        "CLUSTERED BY (id) INTO 5 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    return ms


def test_several_processes_stream_into_one_table(metastore_url: str, warehouse: Path) -> None:
    ms = _setup(metastore_url, warehouse)
    workers = [_writer(metastore_url, warehouse, w, 5, 40, "ok") for w in range(4)]
    for p in workers:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0 and "DONE" in out
    got = ms.table("testing.alerts").scan(columns=["id", "country"]).to_arrow()
    ids = sorted(got.column("id").to_pylist())
    assert ids == list(range(4 * 5 * 40))  # no loss, no duplicate
    assert {(r["id"] % 3, r["country"]) for r in got.to_pylist()} == {(0, "c0"), (1, "c1"), (2, "c2")}
    assert sorted(p.name for p in ms.list_partitions("testing.alerts")) == [
        "continent=Asia/country=c0",
        "continent=Asia/country=c1",
        "continent=Asia/country=c2",
    ]
    ms.close()


def test_killed_writer_rows_never_visible_and_txn_aborted_by_timeout(
    metastore_url: str, warehouse: Path
) -> None:
    ms = _setup(metastore_url, warehouse)
    proc = _writer(metastore_url, warehouse, 0, 2, 10, "hang", "2")
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY"), line
    open_txn = int(line.split()[1])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    # The first txn committed; the second had flushed rows on disk when the process died.
    assert sorted(
        ms.table("testing.alerts").scan(columns=["id"]).to_arrow().column("id").to_pylist()
    ) == list(range(10))
    time.sleep(3)
    assert open_txn in ms.perform_timeouts() or ms.get_txn_state(open_txn).name == "ABORTED"
    assert ms.get_txn_state(open_txn).name == "ABORTED"
    assert sorted(
        ms.table("testing.alerts").scan(columns=["id"]).to_arrow().column("id").to_pylist()
    ) == list(range(10))
    ms.close()
