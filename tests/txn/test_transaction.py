"""``MetastoreTxn`` and ``TxnHeartbeat`` against the real metastore on each backend."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from acidstream.errors import (
    HeartBeatFailure,
    NoSuchObjectException,
    TransactionError,
    WriteConflictException,
)
from acidstream.metastore import (
    LockComponent,
    LockLevel,
    LockType,
    MetastoreFacade,
    OperationType,
    TableWrite,
    TxnStatus,
)
from acidstream.txn import MetastoreTxn, TxnHeartbeat, TxnState


@pytest.fixture
def ms(metastore_url: str, warehouse: str) -> Iterator[MetastoreFacade]:
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse) as m:
        m.execute("CREATE DATABASE db")
        for t in ("t", "u"):
            m.execute(
                f"CREATE TABLE db.{t} (id int) PARTITIONED BY (p string) CLUSTERED BY (id) INTO 2 BUCKETS "
                "TBLPROPERTIES ('transactional'='true')"
            )
        yield m


def test_open_allocates_a_write_id_per_table_and_commit_records_writes(ms: MetastoreFacade) -> None:
    txn = MetastoreTxn.open(ms, ["db.t", "DB.U"], agent_info="test")
    assert dict(txn.write_ids) == {"db.t": 1, "db.u": 1}
    assert txn.state is TxnState.INACTIVE
    txn.lock(
        [LockComponent(LockType.SHARED_WRITE, LockLevel.TABLE, "db", "t", operation=OperationType.UPDATE)]
    )
    txn.begin()
    txn.commit(writes=[TableWrite("db.u", txn.write_id("db.u"), components={"p=a": OperationType.DELETE})])
    assert txn.state is TxnState.COMMITTED
    assert ms.get_txn_state(txn.txn_id) is TxnStatus.COMMITTED
    assert [(c.partition, c.update_delete) for c in ms.backend.completed_components("db.u")] == [
        ("p=a", True)
    ]
    assert ms.show_locks() == []
    with pytest.raises(TransactionError, match="cannot commit: it is COMMITTED"):
        txn.commit()


def test_a_failed_allocation_leaves_nothing_open(ms: MetastoreFacade) -> None:
    with pytest.raises(NoSuchObjectException, match=r"db\.missing"):
        MetastoreTxn.open(ms, ["db.t", "db.missing"])
    assert [t.state for t in ms.show_txns()] == [TxnStatus.ABORTED]


def test_one_table_opens_with_its_write_id_in_one_step(ms: MetastoreFacade) -> None:
    """The open and the allocation are one metastore transaction: a missing table opens no txn at all."""
    with pytest.raises(NoSuchObjectException, match=r"db\.missing"):
        MetastoreTxn.open(ms, ["db.missing"])
    assert ms.show_txns() == []
    txn = MetastoreTxn.open(ms, ["DB.T"])
    assert dict(txn.write_ids) == {"db.t": 1}
    assert [t.txn_id for t in ms.show_txns()] == [txn.txn_id]


def test_snapshot_excludes_own_and_later_commits(ms: MetastoreFacade) -> None:
    txn = MetastoreTxn.open(ms, ["db.t"])
    other = MetastoreTxn.open(ms, ["db.t"])
    snap = txn.snapshot()
    other.begin()
    other.commit()
    assert txn.snapshot() is snap
    write_ids = txn.valid_write_ids("db.t")
    assert not write_ids.is_write_id_valid(txn.write_id("db.t"))
    assert not write_ids.is_write_id_valid(other.write_id("db.t"))


def test_second_committer_of_an_update_to_the_same_partition_loses(ms: MetastoreFacade) -> None:
    a, b = MetastoreTxn.open(ms, ["db.t"]), MetastoreTxn.open(ms, ["db.t"])
    for txn in (a, b):
        txn.begin()
    a.commit(writes=[TableWrite("db.t", a.write_id("db.t"), components={"p=x": OperationType.UPDATE})])
    with pytest.raises(WriteConflictException, match=f"txnid:{a.txn_id}") as exc:
        b.commit(writes=[TableWrite("db.t", b.write_id("db.t"), components={"p=x": OperationType.DELETE})])
    assert not exc.value.retryable  # the same commit can never succeed: the txn is aborted
    assert b.state is TxnState.ABORTED
    assert ms.get_txn_state(b.txn_id) is TxnStatus.ABORTED


def test_updates_to_different_partitions_both_commit(ms: MetastoreFacade) -> None:
    a, b = MetastoreTxn.open(ms, ["db.t"]), MetastoreTxn.open(ms, ["db.t"])
    for txn in (a, b):
        txn.begin()
    a.commit(writes=[TableWrite("db.t", a.write_id("db.t"), components={"p=x": OperationType.UPDATE})])
    b.commit(writes=[TableWrite("db.t", b.write_id("db.t"), components={"p=y": OperationType.UPDATE})])
    assert b.state is TxnState.COMMITTED


def test_heartbeat_reports_a_txn_aborted_under_it_once(ms: MetastoreFacade) -> None:
    txn = MetastoreTxn.open(ms, ["db.t"])
    txn.begin()
    failures: list[tuple[int, BaseException]] = []
    beat = TxnHeartbeat(ms, lambda: [txn], interval=3600, on_failure=lambda t, e: failures.append((t, e)))
    beat.beat()
    assert failures == []
    ms.abort_txn(txn.txn_id)  # as the housekeeper's timeout would
    beat.beat()
    beat.beat()
    assert [t for t, _ in failures] == [txn.txn_id]
    assert isinstance(failures[0][1], HeartBeatFailure)
    with pytest.raises(TransactionError, match="is dead"):
        txn.commit()
    assert txn.state is TxnState.ABORTED  # as the metastore has it; an abort has nothing left to do
    txn.abort()


def test_heartbeat_keeps_an_idle_txn_alive(metastore_url: str, warehouse: str) -> None:
    """With a 2 s txn timeout, a txn idle for 4 s survives the housekeeper because the thread beats."""
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse, txn_timeout=2.0) as ms:
        txn = MetastoreTxn.open(ms)
        txn.begin()
        beat = TxnHeartbeat(ms, lambda: [txn], interval=0.3)
        beat.start()
        try:
            time.sleep(4)
            assert ms.perform_timeouts() == []
        finally:
            beat.stop()
        txn.commit()


def test_a_commit_racing_a_heartbeat_is_not_reported_dead(ms: MetastoreFacade) -> None:
    """The heartbeat sees 'no such open txn' for a txn whose commit just went through: not a failure."""
    txn = MetastoreTxn.open(ms)
    txn.begin()
    failures: list[int] = []
    beat = TxnHeartbeat(ms, lambda: [txn], interval=3600, on_failure=lambda t, e: failures.append(t))
    done = threading.Event()

    def beat_while_committing() -> None:
        while not done.is_set():
            beat.beat()

    thread = threading.Thread(target=beat_while_committing)
    thread.start()
    try:
        txn.commit()
    finally:
        done.set()
        thread.join()
    assert failures == []
    assert txn.state is TxnState.COMMITTED
