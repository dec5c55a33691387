"""Compaction while the table is written and read: streaming and deletes go on in threads and in processes, and
every scan, at its own snapshot, returns exactly the committed rows (no duplicate, none missing) with ROW__IDs
that never change. A transaction batch stays open across compactions; a worker is killed at each stage."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from compactorhelpers import dirs, hidden, rows_with_ids

from acidstream import Metastore
from acidstream.acid.writeids import ValidWriteIdList
from acidstream.compactor import Compactor, CompactorConfig
from read.readhelpers import connect, create, delete_rows, write_delete_events

RowId = tuple[int, int, int]


class Truth:
    """What was written and deleted, by write id, recorded before each commit (so any snapshot can be checked)."""

    def __init__(self, refresh: Any = None) -> None:
        self.refresh = (
            refresh  # called after each scan's snapshot: learns what writers in other processes did
        )
        self.written: dict[int, list[int]] = {}
        self.deleted: dict[int, int] = {}  # row id value -> delete write id
        self.row_ids: dict[int, RowId] = {}
        self.lock = threading.Lock()
        self.checks = 0

    def expected(self, snapshot: ValidWriteIdList) -> list[int]:
        with self.lock:
            live = [i for w, ids in self.written.items() if snapshot.is_write_id_valid(w) for i in ids]
            gone = {i for i, w in self.deleted.items() if snapshot.is_write_id_valid(w)}
        return sorted(i for i in live if i not in gone)

    def check(self, ms: Metastore, table: str) -> list[dict[str, Any]]:
        scan = ms.table(table).scan(with_row_id=True)
        rows = scan.to_arrow().to_pylist()
        if self.refresh is not None:
            self.refresh(self)
        ids = sorted(r["id"] for r in rows)
        assert ids == self.expected(scan.write_ids), f"snapshot {scan.write_ids}"
        with self.lock:
            for r in rows:
                rid = (r["ROW__ID"]["writeid"], r["ROW__ID"]["bucketid"], r["ROW__ID"]["rowid"])
                assert self.row_ids.setdefault(r["id"], rid) == rid, f"row {r['id']} changed its ROW__ID"
            self.checks += 1
        return rows


def run_threads(*targets: Any) -> None:
    """Run the callables in threads; re-raise the first failure."""
    errors: list[BaseException] = []

    def guard(fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guard(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    if errors:
        raise errors[0]
    assert not any(t.is_alive() for t in threads)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_streaming_deleting_and_compacting_in_threads(ms: Metastore) -> None:
    create(ms, "t", "id int, msg string", "CLUSTERED BY (id) INTO 2 BUCKETS")
    truth = Truth()
    done = threading.Event()
    rnd = random.Random(7)

    def stream() -> None:
        try:
            with connect(ms, "t", batch=5) as conn:
                for n in range(80):
                    time.sleep(0.01)  # let compactions interleave with the commits
                    conn.begin_transaction()
                    ids = [n * 10 + j for j in range(5)]
                    with truth.lock:
                        truth.written[conn.current_write_id()] = [] if n % 7 == 3 else ids  # type: ignore[index]
                    conn.write_batch(pa.table({"id": ids, "msg": [f"txn {n}"] * 5}))
                    if n % 7 == 3:
                        conn.abort_transaction()
                    else:
                        conn.commit_transaction()
        finally:
            done.set()

    def delete() -> None:
        location = ms.table("db.t").location
        while not done.is_set():
            rows = truth.check(ms, "db.t")
            if rows:
                victims = rnd.sample(rows, min(3, len(rows)))
                txn = ms.open_txns(1)[0]
                [(_, wid)] = ms.allocate_table_write_ids([txn], "db.t")
                with truth.lock:
                    for r in victims:
                        truth.deleted.setdefault(r["id"], wid)
                keys = [
                    (r["ROW__ID"]["writeid"], r["ROW__ID"]["bucketid"], r["ROW__ID"]["rowid"])
                    for r in victims
                ]
                write_delete_events(ms, "t", wid, keys, location)
                ms.commit_txn(txn)
            time.sleep(0.05)

    def compact() -> None:
        compactor = Compactor(ms, CompactorConfig(retention=0, parallelism=2))
        kinds = ["minor", "major"]
        while not done.is_set():
            compactor.compact("db.t", kind=kinds[truth.checks % 2])
            compactor.clean()
            time.sleep(0.05)

    def read() -> None:
        while not done.is_set():
            truth.check(ms, "db.t")

    run_threads(stream, delete, compact, read)
    compactor = Compactor(ms, CompactorConfig(retention=0))
    compactor.compact("db.t", kind="major")
    compactor.clean()
    truth.check(ms, "db.t")
    states = {c.state for c in ms.show_compactions()}
    assert "succeeded" in states and "failed" not in states
    assert truth.checks > 10
    assert len(ms.show_compactions()) > 10 and len(truth.deleted) > 10
    assert len(dirs(ms, "db.t")) <= 2 and hidden(ms, "db.t") == []


def test_a_batch_of_ten_stays_open_across_compactions(ms: Metastore) -> None:
    create(ms, "t", "id int, msg string")
    truth = Truth()
    compactor = Compactor(ms, CompactorConfig(retention=0))
    with connect(ms, "t", batch=1) as conn:  # some history before the batch
        for n in range(3):
            conn.begin_transaction()
            truth.written[conn.current_write_id()] = [n]  # type: ignore[index]
            conn.write_batch(pa.table({"id": [n], "msg": ["before"]}))
            conn.commit_transaction()
    with connect(ms, "t", batch=10) as conn:
        for n in range(10, 20):
            conn.begin_transaction()
            truth.written[conn.current_write_id()] = [] if n == 13 else [n]  # type: ignore[index]
            conn.write_batch(pa.table({"id": [n], "msg": ["batch"]}))
            conn.abort_transaction() if n == 13 else conn.commit_transaction()
            truth.check(ms, "db.t")
            if n in (12, 15):
                compactor.compact("db.t", kind="major")
                compactor.compact("db.t", kind="minor")
                compactor.clean()
                truth.check(ms, "db.t")
                assert "delta_0000004_0000013" in dirs(ms, "db.t")  # the open batch's delta is left alone
    compactor.compact("db.t", kind="major")
    compactor.clean()
    assert dirs(ms, "db.t") == ["base_0000013"]
    truth.check(ms, "db.t")
    assert ms.get_valid_write_ids("db.t").aborted_ids == ()


# --- processes ------------------------------------------------------------------------------------------------------

WRITER = """
import sys, pyarrow as pa
from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
url, wh, log, n, first = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
ms = Metastore.connect(url, warehouse=wh)
delim = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
conn = (StreamingConnection.builder().with_metastore(ms).with_database("db").with_table("t")
        .with_record_writer(delim).with_transaction_batch_size(4).connect())
with open(log, "a") as out, conn:
    for k in range(n):
        conn.begin_transaction()
        ids = [first + k * 10 + j for j in range(3)]
        out.write(f"{conn.current_write_id()} {' '.join(map(str, ids))}\\n"); out.flush()
        conn.write_batch(pa.table({"id": ids, "msg": ["p"] * 3}))
        conn.commit_transaction()
"""

DAEMON = """
import signal, sys
from acidstream import Metastore
from acidstream.compactor import CompactorConfig, CompactorDaemon
ms = Metastore.connect(sys.argv[1], warehouse=sys.argv[2])
config = CompactorConfig(retention=0, check_interval=0.2, cleaner_interval=0.1, delta_num_threshold=2)
daemon = CompactorDaemon(ms, config, workers=2, poll_interval=0.1)
signal.signal(signal.SIGTERM, lambda *_: daemon.stop())
summary = daemon.run()
print(summary.counts(), flush=True)
"""


def python(code: str, *args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], text=True, **kw)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_streaming_and_compactor_daemons_in_processes(tmp_path: Path, warehouse: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ms.db'}"
    with Metastore.connect(url, warehouse=str(warehouse)) as ms:
        ms.execute("CREATE DATABASE db")
        create(ms, "t", "id int, msg string")
        log = tmp_path / "written.log"
        log.touch()
        writers = [python(WRITER, url, str(warehouse), str(log), "25", str(first)) for first in (0, 10**6)]
        daemons = [python(DAEMON, url, str(warehouse), stdout=subprocess.PIPE) for _ in range(2)]

        def refresh(truth: Truth) -> None:
            with truth.lock:
                for line in log.read_text().split("\n")[:-1]:  # complete lines only
                    wid, *ids = map(int, line.split())
                    truth.written[wid] = ids

        truth = Truth(refresh)
        try:
            while any(w.poll() is None for w in writers):
                truth.check(ms, "db.t")
            assert [w.returncode for w in writers] == [0, 0]
            deadline = time.monotonic() + 60
            while len(dirs(ms, "db.t")) > 2 and time.monotonic() < deadline:
                truth.check(ms, "db.t")
                time.sleep(0.2)
        finally:
            outputs = []
            for d in daemons:
                d.send_signal(signal.SIGTERM)
                outputs.append(d.communicate(timeout=120)[0])
        assert [d.returncode for d in daemons] == [0, 0]
        truth.check(ms, "db.t")
        assert len(truth.expected(ms.get_valid_write_ids("db.t"))) == 150
        done = [c for c in ms.show_compactions() if c.state == "succeeded"]
        assert done and not [c for c in ms.show_compactions() if c.state == "failed"]
        assert len({c.worker_id for c in ms.show_compactions() if c.worker_id}) >= 1


# --- kill -9 --------------------------------------------------------------------------------------------------------

WORKER = """
import sys
from acidstream import Metastore
from acidstream.compactor import Compactor, CompactorConfig
ms = Metastore.connect(sys.argv[1], warehouse=sys.argv[2], txn_timeout=float(sys.argv[3]))
Compactor(ms, CompactorConfig(retention=0)).compact("db.t", kind=sys.argv[4])
"""


@pytest.fixture
def crash_table(tmp_path: Path, warehouse: Path) -> Iterator[tuple[str, Metastore]]:
    url = f"sqlite:///{tmp_path / 'ms.db'}"
    with Metastore.connect(url, warehouse=str(warehouse), txn_timeout=1.0) as ms:
        ms.execute("CREATE DATABASE db")
        create(ms, "t", "id int, msg string", "CLUSTERED BY (id) INTO 3 BUCKETS")
        with connect(ms, "t", batch=1) as conn:
            for n in range(6):
                conn.begin_transaction()
                conn.write_batch(pa.table({"id": list(range(n * 50, n * 50 + 50)), "msg": ["x" * 20] * 50}))
                conn.commit_transaction()
        delete_rows(ms, "t", [rows_with_ids(ms, "db.t")[0][0]])
        yield url, ms


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("stage", "kind", "expected"),
    [
        ("written", "major", "initiated"),  # before publishing: reverted, _tmp removed, retried
        ("published", "minor", "ready for cleaning"),  # publication recorded, nothing moved: rolled forward
        ("moved", "minor", "ready for cleaning"),  # one of two directories moved: rolled forward
    ],
)
def test_kill_9_of_a_worker(
    crash_table: tuple[str, Metastore], warehouse: Path, stage: str, kind: str, expected: str
) -> None:
    url, ms = crash_table
    before = rows_with_ids(ms, "db.t")
    env = {**os.environ, "ACIDSTREAM_COMPACTOR_PAUSE": stage}
    child = python(WORKER, url, str(warehouse), "1.0", kind, stderr=subprocess.PIPE, env=env)
    assert child.stderr is not None
    for line in child.stderr:
        if line.startswith("acidstream-compactor-paused"):
            break
    else:
        pytest.fail(f"worker exited with {child.wait()} before pausing at {stage}")
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert rows_with_ids(ms, "db.t") == before  # a reader meanwhile sees the same rows
    [info] = ms.show_compactions()
    assert info.state == "working"
    time.sleep(2.2)  # twice the txn timeout: the worker's heartbeats have stopped
    ms.perform_timeouts()
    compactor = Compactor(ms, CompactorConfig(retention=0))
    assert compactor.recover() == [(info.id, expected)]
    assert hidden(ms, "db.t") == []
    assert rows_with_ids(ms, "db.t") == before
    compactor.run_once()  # the retry (or the cleaning)
    assert rows_with_ids(ms, "db.t") == before
    assert ms.get_compaction(info.id).state == "succeeded"
    assert hidden(ms, "db.t") == []
