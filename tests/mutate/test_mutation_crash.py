"""``kill -9`` in the middle of a mutation, and a txn aborted under a live client.

A client killed with a coordinator in the middle of a group (a data file with a stripe and no footer) or after
its coordinators closed, before the commit: nothing of the txn is ever visible, the housekeeper aborts it once
its heartbeats stop, its locks go with it, and the table takes new mutations, streaming and compaction with
every read exact. A worker's coordinator killed mid-write while its driver lives: the retried task replaces
what the attempt left and the commit is exact. A txn the housekeeper aborts under a live client calls its lock
failure listener, and its commit fails cleanly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from mutatejobs import BIG_ROWS, CRASH, CRASH_OTHER, NEW_PARTITION, big_message

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.acid.codec import decode_statement_id
from acidstream.catalog import Metastore
from acidstream.metastore import TxnStatus
from acidstream.mutate import MutationSummary, MutatorClient

pytestmark = pytest.mark.slow

JOBS = Path(__file__).with_name("mutatejobs.py")
TXN_TIMEOUT = 2.0
Row = tuple[Any, ...]


def job(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(JOBS), *args], stdout=subprocess.PIPE, text=True)


def wait_for(proc: subprocess.Popen[str], word: str) -> str:
    """What follows ``word`` on the first line the job prints starting with it."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(word):
            return line[len(word) :].strip()
    pytest.fail(f"the job exited with {proc.wait()} before printing {word}")


def kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)


def rows(ms: Metastore, table: str) -> list[Row]:
    """Every visible row with its ROW__ID, sorted."""
    out = []
    for r in ms.table(table).scan(with_row_id=True).to_arrow().to_pylist():
        rid = r.pop("ROW__ID")
        out.append(((rid["writeid"], rid["bucketid"], rid["rowid"]), *r.values()))
    return sorted(out)


def values(table_rows: list[Row]) -> list[Row]:
    """The rows without their ROW__IDs (an update gives a row a new one)."""
    return sorted(r[1:] for r in table_rows)


def planned(before: list[Row]) -> list[Row]:
    """The model of ``mutatejobs.plan`` applied to ``CRASH``'s rows ``(id, msg, p)``."""
    after = [
        (i, f"updated {i}" if p == "p0" else msg, p)
        for i, msg, p in values(before)
        if not (p == "p1" and i % 2 == 0)
    ]
    after += [(i, big_message(i), NEW_PARTITION) for i in range(1000, 1000 + BIG_ROWS)]
    return sorted(after)


def wait_aborted(url: str, warehouse: Path, txn_id: int) -> None:
    """Run the housekeeper until it aborts ``txn_id`` (its heartbeats stopped for longer than the txn's own
    timeout), within 30 s."""
    with Metastore.connect(url, warehouse=warehouse) as reaper:
        deadline = time.monotonic() + 30
        while reaper.get_txn_state(txn_id) is TxnStatus.OPEN:
            assert time.monotonic() < deadline, f"txnid:{txn_id} still open"
            reaper.perform_timeouts()
            time.sleep(0.2)
        assert reaper.get_txn_state(txn_id) is TxnStatus.ABORTED


@pytest.fixture
def crash(metastore_url: str, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(metastore_url, warehouse=warehouse) as ms:
        ms.execute("CREATE DATABASE crash")
        for name, partitioned in ((CRASH, True), (CRASH_OTHER, False)):
            ms.execute(
                f"CREATE TABLE {name} (id int, msg string) {'PARTITIONED BY (p string)' if partitioned else ''} "
                "CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
            )
        ids = list(range(60))
        source = pd.DataFrame({"id": ids, "msg": [f"m{i}" for i in ids], "p": [f"p{i % 3}" for i in ids]})
        ms.table(CRASH).merge(source, on=["id"])
        ms.table(CRASH_OTHER).merge(source[source.id < 10].drop(columns=["p"]), on=["id"])
        yield ms


def stream_one_txn(ms: Metastore, ids: list[int]) -> None:
    db, table = CRASH.split(".")
    with (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database(db)
        .with_table(table)
        .with_static_partition_values([NEW_PARTITION])
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .with_transaction_batch_size(2)
        .connect()
    ) as conn:
        conn.begin_transaction()
        conn.write_batch(pa.table({"id": pa.array(ids, pa.int32()), "msg": [f"s{i}" for i in ids]}))
        conn.commit_transaction()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("stage", ["writing", "closed"])
def test_kill_9_of_the_client_mid_transaction(
    crash: Metastore, metastore_url: str, warehouse: Path, stage: str
) -> None:
    ms = crash
    before, before_other = rows(ms, CRASH), rows(ms, CRASH_OTHER)
    proc = job("mutation", metastore_url, str(warehouse), str(TXN_TIMEOUT), stage)
    try:
        txn_id = int(wait_for(proc, "TXN"))
        wait_for(proc, "READY")
        delta = Path(ms.table(CRASH).location, f"p={NEW_PARTITION}")
        files = sorted(delta.glob("delta_*/bucket_*"))
        assert files, "the job wrote no insert file"
        if stage == "writing":  # one open data file: a stripe written, no footer yet
            assert len(files) == 1 and files[0].stat().st_size > 1000
    finally:
        kill(proc)
    assert (rows(ms, CRASH), rows(ms, CRASH_OTHER)) == (before, before_other)  # nothing visible
    wait_aborted(metastore_url, warehouse, txn_id)
    assert (rows(ms, CRASH), rows(ms, CRASH_OTHER)) == (before, before_other)

    # writable: its locks went with it (a mutation would wait for them), its files stay invisible
    assert ms.table(CRASH).update(pc.field("p") == "p0", {"msg": "after"}) == {
        "inserted": 0,
        "updated": 20,
        "deleted": 0,
    }
    ms.table(CRASH_OTHER).delete(pc.field("id") < 5)
    stream_one_txn(ms, [2000, 2001])
    expected = sorted(
        [(i, "after" if p == "p0" else msg, p) for i, msg, p in values(before)]
        + [(2000, "s2000", NEW_PARTITION), (2001, "s2001", NEW_PARTITION)]
    )
    assert values(rows(ms, CRASH)) == expected
    assert values(rows(ms, CRASH_OTHER)) == [r for r in values(before_other) if r[0] >= 5]
    for part in ("p0", NEW_PARTITION):  # the compactor skips the dead txn's files too
        ms.compact(CRASH, f"p={part}", "major", wait=True)
    assert values(rows(ms, CRASH)) == expected


@pytest.mark.timeout(180)
def test_kill_9_of_a_coordinator_process_and_the_retried_task(
    crash: Metastore, metastore_url: str, warehouse: Path, tmp_path: Path
) -> None:
    """The driver lives (heartbeating); its worker dies mid-group and the task runs again with the same
    statement id, replacing what the attempt left; the commit then holds exactly the task's mutations."""
    ms = crash
    before = rows(ms, CRASH)
    client = MutatorClient.builder().with_metastore(ms).add_sink_table(*CRASH.split(".")).build()
    client.connect()
    txn = client.new_transaction()
    [table] = client.get_tables()
    txn.begin()
    spec = tmp_path / "table.json"
    spec.write_text(table.to_json())
    args = (metastore_url, str(warehouse), str(spec), str(txn.snapshot()), "3")
    worker = job("coordinator", *args, "pause")
    try:
        wait_for(worker, "READY")
    finally:
        kill(worker)
    assert rows(ms, CRASH) == before
    retry = job("coordinator", *args, "retry")
    summary = MutationSummary.from_json(wait_for(retry, "SUMMARY"))
    assert retry.wait(60) == 0
    assert (summary.statement_id, summary.updated, summary.deleted, summary.inserted) == (3, 20, 10, BIG_ROWS)
    assert rows(ms, CRASH) == before
    txn.commit([summary])
    client.close()
    after = rows(ms, CRASH)
    assert values(after) == planned(before)
    written = {(r[0][0], decode_statement_id(r[0][1])) for r in after if r[3] in ("p0", NEW_PARTITION)}
    assert written == {(table.write_id, 3)}


@pytest.mark.timeout(120)
def test_lock_failure_listener_of_a_live_client(
    crash: Metastore, metastore_url: str, warehouse: Path
) -> None:
    """The client process heartbeats every 5 s, with a 2 s txn timeout of its own: the housekeeper aborts its
    txn in between. The client's next heartbeat calls the listener; its commit then fails with
    TransactionException and nothing of the txn is visible."""
    ms = crash
    before = rows(ms, CRASH)
    proc = job("listener", metastore_url, str(warehouse), "5", str(TXN_TIMEOUT))
    try:
        txn_id = int(wait_for(proc, "READY"))
        wait_aborted(metastore_url, warehouse, txn_id)
        out, _ = proc.communicate(timeout=60)
    finally:
        kill(proc)
    assert proc.returncode == 0, out
    lines = out.splitlines()
    assert lines[0] == f"LISTENER {txn_id} HeartBeatFailure"
    assert lines[1] == (
        f"COMMIT-FAILED ABORTED txnid:{txn_id} is dead: Heartbeat found aborted txns [{txn_id}] and missing txns []"
    )
    assert rows(ms, CRASH) == before
    assert ms.table(CRASH).delete(pc.field("p") == "p1")["deleted"] == 20  # the table is free again
