"""Transactions and write ids with Hive's semantics, on SQLite and PostgreSQL."""

from __future__ import annotations

import getpass

import pytest

from acidstream import faults
from acidstream.acid.writeids import ValidWriteIdList
from acidstream.errors import (
    InvalidObjectException,
    NoSuchObjectException,
    NoSuchTxnException,
    TxnAbortedException,
    WriteConflictException,
)
from acidstream.metastore import (
    LockComponent,
    LockLevel,
    LockState,
    LockType,
    MetastoreFacade,
    OperationType,
    TableWrite,
    TxnStatus,
)

LONG_MAX = 9223372036854775807


def test_txn_ids_are_consecutive_from_one(ms: MetastoreFacade) -> None:
    assert ms.open_txns(3) == [1, 2, 3]
    assert ms.open_txns() == [4]
    assert str(ms.get_open_txns()) == "4:1:1,2,3,4:"


def test_open_batch_is_capped(ms: MetastoreFacade) -> None:
    with pytest.raises(InvalidObjectException, match=r"1\.\.1000"):
        ms.open_txns(1001)


def test_write_ids_start_at_one_per_table_and_are_idempotent(ms: MetastoreFacade) -> None:
    txns = ms.open_txns(3)
    assert ms.allocate_table_write_ids(list(reversed(txns)), "db.t") == [(1, 1), (2, 2), (3, 3)]
    assert ms.allocate_table_write_ids(txns, "db.t") == [(1, 1), (2, 2), (3, 3)]
    assert ms.allocate_table_write_ids(txns[1:2], "db.u") == [(2, 1)]
    assert ms.backend.get_write_id(2, "db.u") == 1
    assert ms.backend.get_write_id(1, "db.u") is None


def test_valid_write_ids_string_forms(ms: MetastoreFacade) -> None:
    assert str(ms.get_valid_write_ids("db.t")) == f"db.t:0:{LONG_MAX}::"
    a, b, c, d = ms.open_txns(4)
    ms.allocate_table_write_ids([a, b, c, d], "db.t")
    ms.commit_txn(a)
    ms.abort_txn(c)
    wl = ms.get_valid_write_ids("db.t")
    assert str(wl) == "db.t:4:2:2,4:3"
    assert wl.is_write_id_valid(1) and not wl.is_write_id_valid(2) and wl.is_write_id_aborted(3)
    assert ValidWriteIdList.parse(str(wl)) == wl
    ms.commit_txn(b)
    ms.commit_txn(d)
    assert str(ms.get_valid_write_ids("db.t")) == "db.t:4:9223372036854775807::3"


def test_own_txn_is_open_in_its_list(ms: MetastoreFacade) -> None:
    (txn,) = ms.open_txns()
    ms.allocate_table_write_ids([txn], "db.t")
    wl = ms.get_valid_write_ids("db.t", txn)
    assert wl.open_ids == (1,)
    ms.commit_txn(txn)
    with pytest.raises(NoSuchTxnException):
        ms.get_valid_write_ids("db.t", txn)


def test_commit_and_abort_states(ms: MetastoreFacade) -> None:
    a, b = ms.open_txns(2)
    ms.commit_txn(a)
    ms.commit_txn(a)  # idempotent
    ms.abort_txn(b)
    ms.abort_txn(b)  # idempotent
    assert ms.get_txn_state(a) is TxnStatus.COMMITTED
    assert ms.get_txn_state(b) is TxnStatus.ABORTED
    assert ms.get_txn_state(99) is TxnStatus.UNKNOWN
    with pytest.raises(TxnAbortedException, match="Transaction txnid:2 already aborted"):
        ms.commit_txn(b)
    with pytest.raises(NoSuchTxnException, match="No such transaction txnid:99"):
        ms.commit_txn(99)
    with pytest.raises(NoSuchTxnException, match="already committed"):
        ms.abort_txn(a)
    with pytest.raises(NoSuchTxnException):
        ms.allocate_table_write_ids([99], "db.t")
    with pytest.raises(TxnAbortedException):
        ms.allocate_table_write_ids([b], "db.t")
    assert [t.txn_id for t in ms.show_txns()] == [b]


def test_write_ids_need_a_transactional_table(ms: MetastoreFacade) -> None:
    ms.execute("CREATE TABLE db.plain (id int)")
    (txn,) = ms.open_txns()
    with pytest.raises(InvalidObjectException, match="not transactional"):
        ms.allocate_table_write_ids([txn], "db.plain")
    with pytest.raises(NoSuchObjectException):
        ms.allocate_table_write_ids([txn], "db.nope")


def test_commit_key_value_is_stored_atomically(ms: MetastoreFacade) -> None:
    (txn,) = ms.open_txns()
    ms.allocate_table_write_ids([txn], "db.t")
    with pytest.raises(InvalidObjectException, match="_meta"):
        ms.commit_txn(txn, key="offset", value="1")
    assert ms.get_txn_state(txn) is TxnStatus.OPEN
    ms.commit_txn(txn, key="_meta.sink.offset", value="42")
    assert ms.table("db.t").properties["_meta.sink.offset"] == "42"
    (other,) = ms.open_txns()
    ms.allocate_table_write_ids([other], "db.t")
    ms.commit_txn(other, key="_meta.sink.offset", value="43")
    assert ms.table("db.t").properties["_meta.sink.offset"] == "43"


def test_heartbeat_range_reports_aborted_and_missing(ms: MetastoreFacade) -> None:
    a, b, c = ms.open_txns(3)
    ms.abort_txn(b)
    ms.commit_txn(c)
    resp = ms.heartbeat_txn_range(a, 5)
    assert resp.aborted == [b]
    assert resp.nosuch == [c, 4, 5]
    ms.heartbeat(a)
    with pytest.raises(TxnAbortedException):
        ms.heartbeat(b)
    with pytest.raises(NoSuchTxnException):
        ms.heartbeat(42)


def _write(ms: MetastoreFacade, txn: int, op: OperationType, partition: str) -> None:
    ms.allocate_table_write_ids([txn], "db.t")
    ms.lock(
        [LockComponent(LockType.SHARED_WRITE, LockLevel.PARTITION, "db", "t", partition, operation=op)],
        txn_id=txn,
    )


def test_components_move_to_completed_at_commit(ms: MetastoreFacade) -> None:
    (txn,) = ms.open_txns()
    ms.allocate_table_write_ids([txn], "db.t")
    ms.lock(
        [
            LockComponent(
                LockType.SHARED_READ,
                LockLevel.TABLE,
                "db",
                "t",
                operation=OperationType.INSERT,
                is_dynamic_partition_write=True,
            )
        ],
        txn_id=txn,
    )
    ms.add_dynamic_partitions(txn, 1, "db.t", ["ds=a", "ds=b"])
    with pytest.raises(InvalidObjectException):
        ms.add_dynamic_partitions(txn, 7, "db.t", ["ds=c"])
    assert ms.backend.completed_components("db.t") == []
    assert len(ms.show_locks("db.t")) == 1
    ms.commit_txn(txn)
    done = ms.backend.completed_components("db.t")
    assert [(c.partition, c.write_id, c.update_delete) for c in done] == [
        ("ds=a", 1, False),
        ("ds=b", 1, False),
    ]
    assert ms.show_locks() == []


def test_first_committer_wins_on_update_delete(ms: MetastoreFacade) -> None:
    a, b, c = ms.open_txns(3)
    _write(ms, a, OperationType.UPDATE, "ds=1")
    ms.commit_txn(a)
    _write(ms, b, OperationType.DELETE, "ds=1")
    _write(ms, c, OperationType.UPDATE, "ds=2")
    with pytest.raises(WriteConflictException, match=r"write conflict on db\.t/ds=1 committed by txnid:1"):
        ms.commit_txn(b)
    assert ms.get_txn_state(b) is TxnStatus.ABORTED
    ms.commit_txn(c)  # another partition: no conflict
    (d,) = ms.open_txns()  # started after a committed: no conflict
    _write(ms, d, OperationType.UPDATE, "ds=1")
    ms.commit_txn(d)


def test_a_txn_opened_while_an_update_commits_sees_it_or_conflicts(ms: MetastoreFacade) -> None:
    """No lost update: B opens and takes its snapshot while A's commit is under way, then locks and updates the
    same partition; B's snapshot contains A or B's commit conflicts. A commit must not take its commit id while
    an open can still slip in before the commit is visible (PostgreSQL, READ COMMITTED, lost B's conflict)."""
    import threading
    import time

    (a,) = ms.open_txns()
    _write(ms, a, OperationType.UPDATE, "ds=1")
    # A sleeps at the end of its commit, inside its DB transaction
    with faults.armed("metastore.commit", faults.sleep(2), times=1):
        committing = threading.Thread(target=ms.commit_txn, args=(a,))
        committing.start()
        time.sleep(
            0.5
        )  # A is in its commit by now (if not, the race is not exercised; nothing fails wrongly)
        (b,) = ms.open_txns()
        sees_a = ms.get_valid_write_ids("db.t", snapshot=ms.snapshot()).is_write_id_valid(1)
        _write(ms, b, OperationType.UPDATE, "ds=1")
        committing.join(30)
    assert ms.get_txn_state(a) is TxnStatus.COMMITTED
    if sees_a:
        ms.commit_txn(b)
    else:
        with pytest.raises(WriteConflictException):
            ms.commit_txn(b)


def test_inserts_never_conflict(ms: MetastoreFacade) -> None:
    a, b = ms.open_txns(2)
    _write(ms, a, OperationType.INSERT, "ds=1")
    ms.commit_txn(a)
    ms.lock(
        [LockComponent(LockType.SHARED_READ, LockLevel.PARTITION, "db", "t", "ds=1", OperationType.INSERT)],
        txn_id=b,
    )
    ms.allocate_table_write_ids([b], "db.t")
    ms.commit_txn(b)


def test_timeouts_abort_silent_txns(metastore_url: str, warehouse: object) -> None:
    import time

    with MetastoreFacade.connect(metastore_url, warehouse=str(warehouse), txn_timeout=1.0) as m:
        m.execute("CREATE TABLE t (id int) TBLPROPERTIES ('transactional'='true')")
        alive, silent = m.open_txns(2)
        m.allocate_table_write_ids([alive, silent], "t")
        for _ in range(6):
            time.sleep(0.25)
            m.heartbeat(alive)
        m.get_valid_write_ids("t")  # housekeeping piggy-backs on normal use
        assert m.get_txn_state(silent) is TxnStatus.ABORTED
        assert m.get_txn_state(alive) is TxnStatus.OPEN
        with pytest.raises(TxnAbortedException, match="already aborted"):
            m.commit_txn(silent)
        m.commit_txn(alive)
        assert str(m.get_valid_write_ids("t")) == "default.t:2:9223372036854775807::2"
        assert m.perform_timeouts() == []


def _child_commit(ms: MetastoreFacade, txn: int) -> None:
    ms.commit_txn(txn)


def test_metastore_survives_fork(ms: MetastoreFacade) -> None:
    """A forked child (Spark's Python workers, multiprocessing) uses the inherited handle on fresh connections."""
    import multiprocessing

    a, b = ms.open_txns(2)
    child = multiprocessing.get_context("fork").Process(target=_child_commit, args=(ms, a))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    ms.commit_txn(b)
    assert (ms.get_txn_state(a), ms.get_txn_state(b)) == (TxnStatus.COMMITTED, TxnStatus.COMMITTED)


def test_open_txns_with_write_ids_is_open_plus_allocate(ms: MetastoreFacade) -> None:
    start = ms.current_notification_event_id()
    ms.open_txns()  # txn 1: the batch's write ids still start at 1
    assert ms.open_txns_with_write_ids(3, "db.t", user="me", agent_info="a") == [(2, 1), (3, 2), (4, 3)]
    # an unnamed txn gets this client's login and host name, as Hive's client fills them in
    assert [(t.txn_id, t.user, t.agent_info) for t in ms.show_txns()] == [
        (1, getpass.getuser(), None),
        (2, "me", "a"),
        (3, "me", "a"),
        (4, "me", "a"),
    ]
    events = ms.notifications(start)
    assert [e.event_type for e in events] == ["OPEN_TXN", "OPEN_TXN", "ALLOC_WRITE_ID"]
    assert events[1].message["txn_ids"] == [2, 3, 4]
    assert events[2].message == {"txn_to_write_id": [[2, 1], [3, 2], [4, 3]]}
    assert str(ms.get_valid_write_ids("db.t")) == "db.t:3:1:1,2,3:"


def test_open_txns_with_write_ids_opens_nothing_on_error(ms: MetastoreFacade) -> None:
    ms.execute("CREATE TABLE db.plain (id int)")
    with pytest.raises(InvalidObjectException, match="not transactional"):
        ms.open_txns_with_write_ids(2, "db.plain")
    with pytest.raises(NoSuchObjectException):
        ms.open_txns_with_write_ids(2, "db.nope")
    with pytest.raises(InvalidObjectException, match=r"1\.\.1000"):
        ms.open_txns_with_write_ids(0, "db.t")
    assert ms.open_txns() == [1]


def test_open_with_first_lock_is_open_plus_a_no_wait_lock_for_the_first_txn(ms: MetastoreFacade) -> None:
    ms.add_partition("db.t", ["1"])
    insert = LockComponent(LockType.SHARED_READ, LockLevel.PARTITION, "db", "t", "ds=1", OperationType.INSERT)
    pairs, lock = ms.open_txns_with_write_ids_and_lock(2, "db.t", [insert], agent_info="agent-7")
    assert pairs == [(1, 1), (2, 2)]
    assert lock.state is LockState.ACQUIRED
    [held] = ms.show_locks()
    assert (held.lock_id, held.txn_id, held.partition, held.agent_info) == (
        lock.lock_id,
        1,
        "ds=1",
        "agent-7",
    )
    ms.commit_txn(1)
    assert [(c.partition, c.write_id) for c in ms.backend.completed_components("db.t")] == [("ds=1", 1)]
    # an incompatible lock held elsewhere: the batch opens and its first lock waits (the caller decides)
    ms.lock([LockComponent(LockType.EXCLUSIVE, LockLevel.TABLE, "db", "u")])
    u_insert = LockComponent(LockType.SHARED_READ, LockLevel.TABLE, "db", "u", operation=OperationType.INSERT)
    [(txn, _)], waiting = ms.open_txns_with_write_ids_and_lock(1, "db.u", [u_insert])
    assert waiting.state is LockState.WAITING and ms.get_txn_state(txn) is TxnStatus.OPEN


def test_open_with_first_lock_leaves_no_open_txn_when_the_lock_request_fails(ms: MetastoreFacade) -> None:
    missing = LockComponent(
        LockType.SHARED_READ, LockLevel.TABLE, "db", "nope", operation=OperationType.INSERT
    )
    with pytest.raises(NoSuchObjectException, match=r"db\.nope"):
        ms.open_txns_with_write_ids_and_lock(3, "db.t", [missing])
    assert [t.txn_id for t in ms.show_txns() if t.state is TxnStatus.OPEN] == []
    assert ms.show_locks() == []


def test_commit_records_writes_and_dynamic_partitions_atomically(ms: MetastoreFacade) -> None:
    [(txn, wid)] = ms.open_txns_with_write_ids(1, "db.t")
    start = ms.current_notification_event_id()
    ms.commit_txn(
        txn,
        key="_meta.offset",
        value="7",
        writes=[
            TableWrite(
                "db.t",
                wid,
                components={"ds=a": OperationType.INSERT, "ds=b": OperationType.INSERT},
                files={"ds=a": ["delta_1/bucket_00000"], "ds=b": ["delta_1/bucket_00001"]},
            )
        ],
    )
    done = ms.backend.completed_components("db.t")
    assert [(c.txn_id, c.partition, c.write_id) for c in done] == [(txn, "ds=a", wid), (txn, "ds=b", wid)]
    events = ms.notifications(start)
    assert [(e.event_type, e.partition, e.write_id) for e in events] == [
        ("ACID_WRITE", "ds=a", wid),
        ("ACID_WRITE", "ds=b", wid),
        ("COMMIT_TXN", None, None),
    ]
    assert events[0].message == {"files": ["delta_1/bucket_00000"]}
    assert events[2].message["partitions"] == ["db.t/ds=a", "db.t/ds=b"]
    ms.commit_txn(txn, writes=[TableWrite("db.t", wid, files={None: ["x"]})])  # a repeated commit is a no-op
    assert ms.notifications(start + 3) == []


def test_commit_records_writes_to_several_tables(ms: MetastoreFacade) -> None:
    """A mutation txn writes several tables: each gets its components (with their operation) and events."""
    [txn] = ms.open_txns(1)
    [(_, wt)] = ms.allocate_table_write_ids([txn], "db.t")
    [(_, wu)] = ms.allocate_table_write_ids([txn], "db.u")
    start = ms.current_notification_event_id()
    ms.commit_txn(
        txn,
        writes=[
            TableWrite("db.t", wt, components={"ds=a": OperationType.UPDATE}, files={"ds=a": ["f1"]}),
            TableWrite("db.u", wu, components={None: OperationType.DELETE}, files={None: ["f2"]}),
        ],
    )
    assert [
        (c.table, c.partition, c.write_id, c.update_delete) for c in ms.backend.completed_components("db.t")
    ] == [("t", "ds=a", wt, True)]
    assert [(c.table, c.partition, c.write_id) for c in ms.backend.completed_components("db.u")] == [
        ("u", None, wu)
    ]
    events = ms.notifications(start)
    assert [(e.event_type, e.table, e.write_id) for e in events] == [
        ("ACID_WRITE", "t", wt),
        ("ACID_WRITE", "u", wu),
        ("COMMIT_TXN", None, None),
    ]
    assert events[2].message["write_ids"] == {"db.t": wt, "db.u": wu}


def test_commit_with_writes_fails_as_a_whole(ms: MetastoreFacade) -> None:
    a, b = ms.open_txns(2)
    with pytest.raises(InvalidObjectException, match=r"has write id None on db\.t"):
        ms.commit_txn(a, writes=[TableWrite("db.t", 1, files={None: ["f"]})])  # no write id anywhere
    [(_, wid)] = ms.allocate_table_write_ids([a], "db.t")
    ms.allocate_table_write_ids([a], "db.u")
    with pytest.raises(InvalidObjectException, match=rf"has write id {wid} on db\.t, not {wid + 5}"):
        ms.commit_txn(a, writes=[TableWrite("db.t", wid + 5, components={"ds=x": OperationType.INSERT})])
    assert ms.get_txn_state(a) is TxnStatus.OPEN
    [(_, bwid)] = ms.allocate_table_write_ids([b], "db.t")
    ms.abort_txn(b)
    start = ms.current_notification_event_id()
    with pytest.raises(TxnAbortedException):
        ms.commit_txn(
            b,
            writes=[
                TableWrite("db.t", bwid, components={"ds=x": OperationType.INSERT}, files={"ds=x": ["f"]})
            ],
        )
    with pytest.raises(NoSuchTxnException):
        ms.commit_txn(99, writes=[TableWrite("db.t", 1, files={None: ["f"]})])
    assert ms.notifications(start) == []
    ms.commit_txn(a)
    assert ms.backend.completed_components("db.t") == []  # the failed commits recorded no dynamic partition
