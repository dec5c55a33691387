"""Clients with different txn timeouts on one metastore: a txn, a txn-less lock or a reader registration is
only ever timed out for missing its own heartbeats, whoever runs the housekeeping (SQLite and PostgreSQL)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from acidstream import Metastore
from acidstream.metastore import LockComponent, LockLevel, LockType, OperationType, TxnStatus

SHORT = 0.5


@pytest.fixture
def table(metastore_url: str, warehouse: Path) -> str:
    with Metastore.connect(metastore_url, warehouse=warehouse) as ms:
        ms.execute("CREATE TABLE t (id int) TBLPROPERTIES ('transactional'='true')")
        ms.table("t").merge(pd.DataFrame({"id": [1]}), on=["id"])
    return "default.t"


@pytest.fixture
def clients(metastore_url: str, warehouse: Path, table: str) -> Iterator[tuple[Metastore, Metastore]]:
    """(a client with the default 300 s txn timeout, one with a timeout of ``SHORT`` seconds)."""
    with (
        Metastore.connect(metastore_url, warehouse=warehouse) as patient,
        Metastore.connect(metastore_url, warehouse=warehouse, txn_timeout=SHORT) as hasty,
    ):
        yield patient, hasty


def test_a_short_timeout_client_aborts_nobody_elses_txns(
    clients: tuple[Metastore, Metastore], table: str
) -> None:
    patient, hasty = clients
    (long_txn,) = patient.open_txns(1)
    patient.allocate_table_write_ids([long_txn], table)
    patient.lock(
        [
            LockComponent(
                LockType.SHARED_READ, LockLevel.TABLE, "default", "t", operation=OperationType.INSERT
            )
        ],
        txn_id=long_txn,
    )
    (short_txn,) = hasty.open_txns(1)
    time.sleep(SHORT + 0.2)
    # the scanner with the short timeout reads and housekeeps: only its own silent txn goes
    assert hasty.table(table).scan().to_arrow().num_rows == 1
    hasty.perform_timeouts()
    assert patient.perform_timeouts() == []
    # aborted, or already forgotten: an empty aborted txn goes one more timeout after its last heartbeat, which a
    # loaded machine may reach within this pass
    assert hasty.get_txn_state(short_txn) in (TxnStatus.ABORTED, TxnStatus.UNKNOWN)
    assert hasty.get_txn_state(long_txn) is TxnStatus.OPEN
    patient.commit_txn(long_txn)
    assert patient.get_txn_state(long_txn) is TxnStatus.COMMITTED


def test_a_long_timeout_housekeeper_still_aborts_a_short_timeout_txn(
    clients: tuple[Metastore, Metastore], table: str
) -> None:
    patient, hasty = clients
    (txn,) = hasty.open_txns(1)
    assert patient.perform_timeouts() == []
    time.sleep(SHORT + 0.2)
    assert patient.perform_timeouts() == [txn]  # its own timeout passed: the patient client reaps it


def test_txn_less_locks_and_readers_live_by_their_own_lease(
    clients: tuple[Metastore, Metastore], table: str
) -> None:
    patient, hasty = clients
    lock = patient.lock([LockComponent(LockType.SHARED_READ, LockLevel.TABLE, "default", "t")])
    short_lock = hasty.lock([LockComponent(LockType.SHARED_READ, LockLevel.TABLE, "default", "t")])
    reader = patient.register_reader(table)
    short_reader = hasty.register_reader(table)
    time.sleep(SHORT + 0.2)
    hasty.perform_timeouts()
    assert [lk.lock_id for lk in patient.show_locks(table)] == [lock.lock_id]
    assert short_lock.lock_id != lock.lock_id
    assert [r[0] for r in hasty.active_readers(table)] == [reader.reader_id]
    assert short_reader.reader_id != reader.reader_id
