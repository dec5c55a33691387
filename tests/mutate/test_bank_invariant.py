"""A bank transfer: processes move money between the rows of two tables, each transfer one mutation
txn over both tables, while a streaming writer appends to a third table. A reader taking ``ms.snapshot()`` and
scanning all three with it never sees the sum of balances change, sees every transfer on both tables or on
neither, and sees exactly the txns its snapshot contains."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mutatejobs import ACCOUNT_COLUMNS, ACCOUNTS, AUDIT, insert_accounts

from acidstream.acid.writeids import ValidTxnList
from acidstream.catalog import Metastore

pytestmark = pytest.mark.slow

JOBS = Path(__file__).with_name("mutatejobs.py")
BRANCHES = {i: f"b{i % 3}" for i in range(12)}  # account id -> branch (the partition)
OPENING = 100


def job(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(JOBS), *args], stdout=subprocess.PIPE, text=True)


class Ledger:
    """What the jobs logged before each commit: a transfer, or the ids a streaming txn wrote, by txn id."""

    def __init__(self, transfer_logs: list[Path], stream_log: Path) -> None:
        self.transfer_logs, self.stream_log = transfer_logs, stream_log
        self.transfers: dict[int, tuple[int, int, int, int]] = {}
        self.streamed: dict[int, list[int]] = {}

    def refresh(self) -> None:
        """Read the logs again (complete lines only: a job may be writing one)."""
        for log in self.transfer_logs:
            for line in log.read_text().split("\n")[:-1]:
                txn, a, da, b, db = map(int, line.split())
                self.transfers[txn] = (a, da, b, db)
        for line in self.stream_log.read_text().split("\n")[:-1]:
            txn, *ids = map(int, line.split())
            self.streamed[txn] = ids

    def accounts(
        self, snapshot: ValidTxnList
    ) -> tuple[dict[int, tuple[int, int]], dict[int, tuple[int, int]]]:
        """(balance, moves) of every checking and savings account after the transfers ``snapshot`` contains."""
        checking = {i: (OPENING, 0) for i in BRANCHES}
        savings = dict(checking)
        for txn, (a, da, b, db) in self.transfers.items():
            if snapshot.is_txn_valid(txn):
                checking[a] = (checking[a][0] + da, checking[a][1] + 1)
                savings[b] = (savings[b][0] + db, savings[b][1] + 1)
        return checking, savings

    def audit(self, snapshot: ValidTxnList) -> list[int]:
        return sorted(i for txn, ids in self.streamed.items() if snapshot.is_txn_valid(txn) for i in ids)

    def committed_transfers(self, snapshot: ValidTxnList) -> int:
        return sum(snapshot.is_txn_valid(txn) for txn in self.transfers)


def by_id(rows: list[dict[str, Any]]) -> dict[int, tuple[int, int]]:
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), (
        f"an account appears twice: {sorted(ids)}"
    )  # a half-applied split update
    return {r["id"]: (r["balance"], r["moves"]) for r in rows}


def check(ms: Metastore, ledger: Ledger) -> int:
    """One reader's view of the bank at one snapshot; returns how many transfers it contains."""
    snapshot = ms.snapshot()
    checking, savings = (
        by_id(ms.table(t).scan(columns=ACCOUNT_COLUMNS, snapshot=snapshot).to_arrow().to_pylist())
        for t in ACCOUNTS
    )
    audit = ms.table(AUDIT).scan(columns=["id"], snapshot=snapshot).to_arrow().column("id").to_pylist()
    ledger.refresh()  # after the scans: every txn the snapshot contains had logged itself before committing
    balances = [b for table in (checking, savings) for b, _ in table.values()]
    assert sum(balances) == 2 * len(BRANCHES) * OPENING, f"money appeared or vanished at {snapshot}"
    moves = [sum(m for _, m in table.values()) for table in (checking, savings)]
    assert moves[0] == moves[1], f"a transfer is visible on one table only at {snapshot}"
    assert (checking, savings) == ledger.accounts(snapshot), str(snapshot)
    assert sorted(audit) == ledger.audit(snapshot), str(snapshot)
    return ledger.committed_transfers(snapshot)


@pytest.fixture
def bank(metastore_url: str, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(metastore_url, warehouse=warehouse) as ms:
        ms.execute("CREATE DATABASE bank")
        for name in ACCOUNTS:
            ms.execute(
                f"CREATE TABLE {name} (id int, balance bigint, moves int) PARTITIONED BY (branch string) "
                "CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
            )
        ms.execute(
            f"CREATE TABLE {AUDIT} (id int, msg string) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
            "TBLPROPERTIES ('transactional'='true')"
        )
        insert_accounts(ms, BRANCHES, OPENING)
        yield ms


@pytest.mark.timeout(180)
def test_concurrent_transfers_never_change_the_sum(
    bank: Metastore, metastore_url: str, warehouse: Path, tmp_path: Path
) -> None:
    ms, wh = bank, str(warehouse)
    transfer_logs = [tmp_path / f"transfers-{w}.log" for w in range(3)]
    stream_log, stop = tmp_path / "stream.log", tmp_path / "stop"
    for log in [*transfer_logs, stream_log]:
        log.touch()
    ledger = Ledger(transfer_logs, stream_log)
    assert check(ms, ledger) == 0
    procs: list[subprocess.Popen[str]] = []
    try:
        procs.append(job("stream", metastore_url, wh, str(stream_log), str(stop), "8"))
        # worker 0 detects conflicts per table (Hive's way), the others per partition (branch); worker 2 reads
        # at a snapshot taken before its locks
        procs += [
            job("transfers", metastore_url, wh, str(log), str(w), "8", str(int(w > 0)), str(int(w == 2)))
            for w, log in enumerate(transfer_logs)
        ]
        seen, checks = 0, 0
        while any(p.poll() is None for p in procs[1:]):
            now = check(ms, ledger)
            assert now >= seen, "a later snapshot lost transfers"
            seen, checks = now, checks + 1
        stop.touch()
        outputs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
    done = [line.split() for out in outputs for line in out.splitlines() if line.startswith("DONE")]
    assert len(done) == 4
    assert check(ms, ledger) == sum(int(d[1]) for d in done[1:]) == 24
    assert checks >= 2  # the reader ran while transfers committed
    assert len(ledger.transfers) >= 24 and len(ledger.audit(ms.snapshot())) >= 8 * 3 * 4 // 5
