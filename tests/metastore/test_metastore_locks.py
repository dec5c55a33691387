"""Locks: Hive 3's compatibility matrix over overlapping objects, all-or-nothing requests, timeouts, on every
backend (SQLite, PostgreSQL, Hive 4's metastore)."""

from __future__ import annotations

import dataclasses
import time

import pytest

from acidstream.errors import LockTimeoutException, MetaException, NoSuchLockException, NoSuchObjectException
from acidstream.metastore import (
    LockComponent,
    LockInfo,
    LockLevel,
    LockState,
    LockType,
    MetastoreFacade,
    OperationType,
)
from support.backends import check_lock, is_hive

R, W, X = LockType.SHARED_READ, LockType.SHARED_WRITE, LockType.EXCLUSIVE


def comp(t: LockType, level: LockLevel, table: str | None = None, part: str | None = None) -> LockComponent:
    """A component in the database ``db``: :func:`inside` moves it into the test's own."""
    return LockComponent(t, level, "db", table, part)


def inside(db: str, component: LockComponent) -> LockComponent:
    return dataclasses.replace(component, db=db) if component.db == "db" else component


def mine(ms: MetastoreFacade, db: str) -> list[LockInfo]:
    """The locks on the test's database (Hive's metastore holds the whole session's)."""
    return [li for li in ms.show_locks() if li.db == db]


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
def test_compatibility_matrix(
    metastore: MetastoreFacade, db: str, held: LockType, wanted: LockType, ok: bool
) -> None:
    metastore.lock([inside(db, comp(held, LockLevel.TABLE, "t"))])
    resp = metastore.lock([inside(db, comp(wanted, LockLevel.TABLE, "t"))], wait=False)
    if is_hive(metastore) and (held, wanted) == (W, W):
        ok = True  # Hive 4 grants concurrent shared writes: its commit's write-set check decides between them
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
    metastore: MetastoreFacade, db: str, held: LockComponent, wanted: LockComponent, overlap: bool
) -> None:
    metastore.lock([inside(db, held)])
    state = metastore.lock([inside(db, wanted)], wait=False).state
    assert state is (LockState.WAITING if overlap else LockState.ACQUIRED)


def test_multi_component_request_is_all_or_nothing(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    blocker = ms.lock([LockComponent(X, LockLevel.TABLE, db, "u")])
    resp = ms.lock(
        [LockComponent(W, LockLevel.TABLE, db, "t"), LockComponent(R, LockLevel.TABLE, db, "u")], wait=False
    )
    assert resp.state is LockState.WAITING
    assert {li.state for li in mine(ms, db) if li.lock_id == resp.lock_id} == {LockState.WAITING}
    # nothing of the waiting request is held: an exclusive lock on t is still only queued behind it
    ms.unlock(blocker.lock_id)
    assert check_lock(ms, resp.lock_id) is LockState.ACQUIRED


def test_a_request_spanning_databases_waits_for_a_lock_in_either(metastore: MetastoreFacade, db: str) -> None:
    ms, other = metastore, f"{db}other"
    ms.execute(f"CREATE DATABASE {other}")
    try:
        blocker = ms.lock([LockComponent(X, LockLevel.DB, other)])
        resp = ms.lock(
            [LockComponent(R, LockLevel.DB, db), LockComponent(R, LockLevel.DB, other)], wait=False
        )
        assert resp.state is LockState.WAITING
        assert (
            ms.lock([LockComponent(R, LockLevel.DB, db)], wait=False).state is LockState.ACQUIRED
        )  # db is free
        ms.unlock(blocker.lock_id)
        assert check_lock(ms, resp.lock_id) is LockState.ACQUIRED
    finally:
        ms.drop_database(other, cascade=True)


def test_waiting_lock_times_out_naming_the_blocker(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    (txn,) = ms.open_txns(agent_info="blocker-agent")
    held = ms.lock([LockComponent(X, LockLevel.TABLE, db, "t")], txn_id=txn, agent_info="blocker-agent")
    start = time.monotonic()
    blocker = rf": waiting for lock {held.lock_id} \(EXCLUSIVE on {db}\.t, txnid:{txn}, agent 'blocker-agent'"
    with pytest.raises(LockTimeoutException, match=r"not acquired within 0\.3s( at thrift://\S+)?" + blocker):
        ms.lock([LockComponent(R, LockLevel.PARTITION, db, "t", "ds=1")], timeout=0.3)
    assert time.monotonic() - start >= 0.3  # it waited its timeout (how much longer depends on the machine)
    assert [li.lock_id for li in mine(ms, db)] == [held.lock_id]  # the timed-out request was withdrawn


def test_waiter_acquires_when_txn_commits(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    (txn,) = ms.open_txns()
    held = ms.lock([LockComponent(X, LockLevel.TABLE, db, "t")], txn_id=txn)
    waiting = ms.lock([LockComponent(R, LockLevel.TABLE, db, "t")], wait=False)
    with pytest.raises(MetaException, match="not permitted"):
        ms.unlock(held.lock_id)
    ms.commit_txn(txn)
    assert check_lock(ms, waiting.lock_id) is LockState.ACQUIRED


def test_show_locks_and_unknown_lock(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    (txn,) = ms.open_txns()
    ms.lock(
        [LockComponent(R, LockLevel.PARTITION, db, "t", "ds=1")],
        txn_id=txn,
        agent_info="agent",
        user="me",
        host="h",
    )
    (info,) = ms.show_locks(f"{db}.t")
    assert (
        info.txn_id,
        info.db,
        info.table,
        info.partition,
        info.type,
        info.state,
        info.agent_info,
        info.user,
    ) == (txn, db, "t", "ds=1", R, LockState.ACQUIRED, "agent", "me")
    assert ms.show_locks(f"{db}.u") == []
    assert ms.execute(f"SHOW LOCKS {db}.t") is not None
    unknown = max([li.lock_id for li in ms.show_locks()] + [0]) + 10**6
    with pytest.raises(NoSuchLockException):
        check_lock(ms, unknown)
    if is_hive(ms):
        ms.unlock(unknown)  # Hive 4's unlock of a lock it has no record of is a no-op
    else:
        with pytest.raises(NoSuchLockException):
            ms.unlock(unknown)
    ms.abort_txn(txn)
    assert mine(ms, db) == []


def test_locks_on_missing_objects_name_them(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    txn = ms.open_txns()[0]
    missing = [
        (LockComponent(R, LockLevel.DB, f"{db}nodb"), None, f"Database {db}nodb does not exist"),
        (LockComponent(R, LockLevel.TABLE, db, "nope"), None, f"Table {db}.nope does not exist"),
        # a txn's insert also records where it writes: the same error from that path
        (
            LockComponent(W, LockLevel.TABLE, db, "nope", operation=OperationType.INSERT),
            txn,
            f"Table {db}.nope",
        ),
    ]
    if is_hive(ms):
        # Hive's metastore grants locks on any name (its Driver resolves the objects before it asks)
        for component, txn_id, _ in missing:
            assert ms.lock([component], txn_id=txn_id, wait=False).state is LockState.ACQUIRED
        return
    for component, txn_id, message in missing:
        with pytest.raises(NoSuchObjectException, match=message):
            ms.lock([component], txn_id=txn_id, wait=False)
    assert mine(ms, db) == []  # nothing was queued
