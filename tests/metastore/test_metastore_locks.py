"""Locks: Hive 3's compatibility matrix over overlapping objects, all-or-nothing requests, timeouts."""

from __future__ import annotations

import time

import pytest

from acidstream.errors import LockTimeoutException, MetaException, NoSuchLockException, NoSuchObjectException
from acidstream.metastore import LockComponent, LockLevel, LockState, LockType, MetastoreFacade, OperationType

R, W, X = LockType.SHARED_READ, LockType.SHARED_WRITE, LockType.EXCLUSIVE
DB = LockComponent(R, LockLevel.DB, "db")


def comp(t: LockType, level: LockLevel, table: str | None = None, part: str | None = None) -> LockComponent:
    return LockComponent(t, level, "db", table, part)


@pytest.mark.parametrize(
    ("held", "wanted", "ok"),
    [
        (R, R, True),
        (R, W, True),
        (W, R, True),
        (W, W, False),
        (R, X, False),
        (X, R, False),
        (W, X, False),
        (X, W, False),
        (X, X, False),
    ],
)
def test_compatibility_matrix(ms: MetastoreFacade, held: LockType, wanted: LockType, ok: bool) -> None:
    ms.lock([comp(held, LockLevel.TABLE, "t")])
    resp = ms.lock([comp(wanted, LockLevel.TABLE, "t")], wait=False)
    assert resp.state is (LockState.ACQUIRED if ok else LockState.WAITING)


@pytest.mark.parametrize(
    ("held", "wanted", "overlap"),
    [
        (comp(X, LockLevel.DB), comp(X, LockLevel.PARTITION, "t", "ds=1"), True),
        (comp(X, LockLevel.TABLE, "t"), comp(X, LockLevel.PARTITION, "t", "ds=1"), True),
        (comp(X, LockLevel.TABLE, "t"), comp(X, LockLevel.TABLE, "u"), False),
        (comp(X, LockLevel.PARTITION, "t", "ds=1"), comp(X, LockLevel.PARTITION, "t", "ds=2"), False),
        (comp(X, LockLevel.PARTITION, "t", "ds=1"), comp(X, LockLevel.PARTITION, "t", "ds=1"), True),
        (comp(X, LockLevel.DB), LockComponent(X, LockLevel.DB, "default"), False),
    ],
)
def test_overlapping_objects(
    ms: MetastoreFacade, held: LockComponent, wanted: LockComponent, overlap: bool
) -> None:
    ms.lock([held])
    assert ms.lock([wanted], wait=False).state is (LockState.WAITING if overlap else LockState.ACQUIRED)


def test_multi_component_request_is_all_or_nothing(ms: MetastoreFacade) -> None:
    blocker = ms.lock([comp(X, LockLevel.TABLE, "u")])
    resp = ms.lock([comp(W, LockLevel.TABLE, "t"), comp(R, LockLevel.TABLE, "u")], wait=False)
    assert resp.state is LockState.WAITING
    assert {li.state for li in ms.show_locks() if li.lock_id == resp.lock_id} == {LockState.WAITING}
    # nothing of the waiting request is held: an exclusive lock on t is still only queued behind it
    ms.unlock(blocker.lock_id)
    assert ms.backend.check_lock(resp.lock_id) is LockState.ACQUIRED


def test_a_request_spanning_databases_waits_for_a_lock_in_either(ms: MetastoreFacade) -> None:
    ms.execute("CREATE DATABASE other")
    blocker = ms.lock([LockComponent(X, LockLevel.DB, "other")])
    resp = ms.lock([DB, LockComponent(R, LockLevel.DB, "other")], wait=False)
    assert resp.state is LockState.WAITING
    assert ms.lock([DB], wait=False).state is LockState.ACQUIRED  # db itself is free
    ms.unlock(blocker.lock_id)
    assert ms.backend.check_lock(resp.lock_id) is LockState.ACQUIRED


def test_waiting_lock_times_out_naming_the_blocker(ms: MetastoreFacade) -> None:
    (txn,) = ms.open_txns(agent_info="blocker-agent")
    ms.lock([comp(X, LockLevel.TABLE, "t")], txn_id=txn, agent_info="blocker-agent")
    start = time.monotonic()
    with pytest.raises(
        LockTimeoutException,
        match=r"not acquired within 0\.3s: waiting for lock 1 \(EXCLUSIVE on db\.t, txnid:1, agent 'blocker-agent'",
    ):
        ms.lock([comp(R, LockLevel.PARTITION, "t", "ds=1")], timeout=0.3)
    assert time.monotonic() - start >= 0.3  # it waited its timeout (how much longer depends on the machine)
    assert [li.lock_id for li in ms.show_locks()] == [1]  # the timed-out request was withdrawn


def test_waiter_acquires_when_txn_commits(ms: MetastoreFacade) -> None:
    (txn,) = ms.open_txns()
    ms.lock([comp(X, LockLevel.TABLE, "t")], txn_id=txn)
    waiting = ms.lock([comp(R, LockLevel.TABLE, "t")], wait=False)
    with pytest.raises(MetaException, match="not permitted"):
        ms.unlock(1)
    ms.commit_txn(txn)
    assert ms.backend.check_lock(waiting.lock_id) is LockState.ACQUIRED


def test_show_locks_and_unknown_lock(ms: MetastoreFacade) -> None:
    (txn,) = ms.open_txns()
    ms.lock([comp(R, LockLevel.PARTITION, "t", "ds=1")], txn_id=txn, agent_info="agent", user="me", host="h")
    (info,) = ms.show_locks("db.t")
    assert (
        info.txn_id,
        info.db,
        info.table,
        info.partition,
        info.type,
        info.state,
        info.agent_info,
        info.user,
    ) == (txn, "db", "t", "ds=1", R, LockState.ACQUIRED, "agent", "me")
    assert ms.show_locks("db.u") == []
    assert ms.execute("SHOW LOCKS db.t") is not None
    with pytest.raises(NoSuchLockException):
        ms.backend.check_lock(999)
    with pytest.raises(NoSuchLockException):
        ms.unlock(999)
    ms.abort_txn(txn)
    assert ms.show_locks() == []


def test_locks_on_missing_objects_name_them(ms: MetastoreFacade) -> None:
    txn = ms.open_txns()[0]
    missing = [
        (LockComponent(R, LockLevel.DB, "nodb"), None, "Database nodb does not exist"),
        (comp(R, LockLevel.TABLE, "nope"), None, "Table db.nope does not exist"),
        # a txn's insert also records where it writes: the same error from that path
        (
            LockComponent(W, LockLevel.TABLE, "db", "nope", operation=OperationType.INSERT),
            txn,
            "Table db.nope",
        ),
    ]
    for component, txn_id, message in missing:
        with pytest.raises(NoSuchObjectException, match=message):
            ms.lock([component], txn_id=txn_id, wait=False)
    assert ms.show_locks() == []  # nothing was queued
