"""Transactions and write ids with Hive's semantics, on every backend (SQLite, PostgreSQL, Hive 4's metastore);
what reads acidstream's own tables or fault points is in ``TestSqlBackendOnly``."""

from __future__ import annotations

import getpass
from typing import Any

import pytest

from acidstream import Metastore, faults
from acidstream.acid.writeids import ValidWriteIdList
from acidstream.errors import (
    InvalidObjectException,
    MetaException,
    NoSuchObjectException,
    NoSuchTxnException,
    TxnAbortedException,
    UnsupportedCapability,
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
from acidstream.metastore.backend import Capability
from support.backends import is_hive

LONG_MAX = 9223372036854775807
NONE = 10**9  # a txn id no test opens


def test_txn_ids_are_consecutive(metastore: MetastoreFacade) -> None:
    first = metastore.open_txns(3)
    assert first == [first[0], first[0] + 1, first[0] + 2]
    assert metastore.open_txns() == [first[0] + 3]
    open_now = metastore.get_open_txns()
    assert not any(open_now.is_txn_valid(t) for t in [*first, first[0] + 3])


def test_write_ids_start_at_one_per_table_and_are_idempotent(metastore: MetastoreFacade, db: str) -> None:
    a, b, c = metastore.open_txns(3)
    assert metastore.allocate_table_write_ids([c, b, a], f"{db}.t") == [(a, 1), (b, 2), (c, 3)]
    assert metastore.allocate_table_write_ids([a, b, c], f"{db}.t") == [(a, 1), (b, 2), (c, 3)]
    assert metastore.allocate_table_write_ids([b], f"{db}.u") == [(b, 1)]


def test_valid_write_ids_string_forms(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    assert str(ms.get_valid_write_ids(f"{db}.t")) == f"{db}.t:0:{LONG_MAX}::"
    a, b, c, d = ms.open_txns(4)
    ms.allocate_table_write_ids([a, b, c, d], f"{db}.t")
    ms.commit_txn(a)
    ms.abort_txn(c)
    wl = ms.get_valid_write_ids(f"{db}.t")
    assert str(wl) == f"{db}.t:4:2:2,4:3"
    assert wl.is_write_id_valid(1) and not wl.is_write_id_valid(2) and wl.is_write_id_aborted(3)
    assert ValidWriteIdList.parse(str(wl)) == wl
    ms.commit_txn(b)
    ms.commit_txn(d)
    assert str(ms.get_valid_write_ids(f"{db}.t")) == f"{db}.t:4:{LONG_MAX}::3"


def test_own_txn_is_open_in_its_list(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    (txn,) = ms.open_txns()
    ms.allocate_table_write_ids([txn], f"{db}.t")
    wl = ms.get_valid_write_ids(f"{db}.t", txn)
    assert wl.open_ids == (1,)
    ms.commit_txn(txn)
    with pytest.raises(NoSuchTxnException):
        ms.get_valid_write_ids(f"{db}.t", txn)


def test_commit_and_abort_states(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    a, b = ms.open_txns(2)
    ms.commit_txn(a)
    ms.commit_txn(a)  # idempotent
    ms.abort_txn(b)
    ms.abort_txn(b)  # idempotent
    assert ms.get_txn_state(a) is TxnStatus.COMMITTED
    assert ms.get_txn_state(b) is TxnStatus.ABORTED
    assert ms.get_txn_state(NONE) is TxnStatus.UNKNOWN
    with pytest.raises(TxnAbortedException, match=f"Transaction txnid:{b} already aborted"):
        ms.commit_txn(b)
    with pytest.raises(NoSuchTxnException, match=f"No such transaction txnid:{NONE}"):
        ms.commit_txn(NONE)
    with pytest.raises(NoSuchTxnException, match="already committed"):
        ms.abort_txn(a)
    # Hive's metastore fails on a txn it has no record of or has aborted with an internal error
    with pytest.raises(MetaException if is_hive(ms) else NoSuchTxnException):
        ms.allocate_table_write_ids([NONE], f"{db}.t")
    with pytest.raises(MetaException if is_hive(ms) else TxnAbortedException):
        ms.allocate_table_write_ids([b], f"{db}.t")
    assert [t.txn_id for t in ms.show_txns() if t.txn_id in (a, b)] == [b]


def test_write_ids_need_a_transactional_table(metastore: MetastoreFacade, db: str) -> None:
    metastore.execute(f"CREATE TABLE {db}.plain (id int)")
    (txn,) = metastore.open_txns()
    if is_hive(metastore):  # Hive's metastore allocates write ids on any name (its Driver checks the table)
        assert metastore.allocate_table_write_ids([txn], f"{db}.plain") == [(txn, 1)]
        assert metastore.allocate_table_write_ids([txn], f"{db}.nope") == [(txn, 1)]
        return
    with pytest.raises(InvalidObjectException, match="not transactional"):
        metastore.allocate_table_write_ids([txn], f"{db}.plain")
    with pytest.raises(NoSuchObjectException):
        metastore.allocate_table_write_ids([txn], f"{db}.nope")


def test_commit_key_value_is_stored_atomically(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    ms.alter_table_properties(f"{db}.t", {"_meta.sink.offset": "0"})  # Hive updates only a key the table has
    (txn,) = ms.open_txns()
    ms.allocate_table_write_ids([txn], f"{db}.t")
    refused = f"{db}.t has no 'offset'" if is_hive(ms) else "_meta"  # Hive: no such key; SQL: not a _meta key
    with pytest.raises(InvalidObjectException, match=refused):
        ms.commit_txn(txn, key="offset", value="1")
    assert ms.get_txn_state(txn) is TxnStatus.OPEN
    ms.commit_txn(txn, key="_meta.sink.offset", value="42")
    assert ms.table(f"{db}.t").properties["_meta.sink.offset"] == "42"
    (other,) = ms.open_txns()
    ms.allocate_table_write_ids([other], f"{db}.t")
    ms.commit_txn(other, key="_meta.sink.offset", value="43")
    assert ms.table(f"{db}.t").properties["_meta.sink.offset"] == "43"


def test_heartbeat_range_reports_aborted_and_missing(metastore: MetastoreFacade) -> None:
    ms = metastore
    a, b, c = ms.open_txns(3)
    ms.abort_txn(b)
    ms.commit_txn(c)
    resp = ms.heartbeat_txn_range(a, c + 2)
    assert resp.aborted == [b]
    assert resp.nosuch == [c, c + 1, c + 2]
    ms.heartbeat(a)
    with pytest.raises(TxnAbortedException):
        ms.heartbeat(b)
    with pytest.raises(NoSuchTxnException):
        ms.heartbeat(NONE)


def _write(ms: MetastoreFacade, db: str, txn: int, op: OperationType, partition: str) -> None:
    ms.allocate_table_write_ids([txn], f"{db}.t")
    ms.lock(
        [LockComponent(LockType.SHARED_WRITE, LockLevel.PARTITION, db, "t", partition, operation=op)],
        txn_id=txn,
    )


def test_first_committer_wins_on_update_delete(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    a, b, c = ms.open_txns(3)
    _write(ms, db, a, OperationType.UPDATE, "ds=1")
    ms.commit_txn(a)
    _write(ms, db, b, OperationType.DELETE, "ds=1")
    _write(ms, db, c, OperationType.UPDATE, "ds=2")
    with pytest.raises(
        WriteConflictException, match=rf"write conflict on {db}[./]t/ds=1 committed by \[?txnid:{a}\b"
    ):
        ms.commit_txn(b)
    assert ms.get_txn_state(b) is TxnStatus.ABORTED
    ms.commit_txn(c)  # another partition: no conflict
    (d,) = ms.open_txns()  # started after a committed: no conflict
    _write(ms, db, d, OperationType.UPDATE, "ds=1")
    ms.commit_txn(d)


def test_inserts_never_conflict(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    a, b = ms.open_txns(2)
    _write(ms, db, a, OperationType.INSERT, "ds=1")
    ms.commit_txn(a)
    ms.lock(
        [LockComponent(LockType.SHARED_READ, LockLevel.PARTITION, db, "t", "ds=1", OperationType.INSERT)],
        txn_id=b,
    )
    ms.allocate_table_write_ids([b], f"{db}.t")
    ms.commit_txn(b)


def _child_commit(ms: MetastoreFacade, txn: int) -> None:
    ms.commit_txn(txn)


def test_metastore_survives_fork(metastore: MetastoreFacade) -> None:
    """A forked child (Spark's Python workers, multiprocessing) uses the inherited handle on fresh connections."""
    import multiprocessing

    ms = metastore
    a, b = ms.open_txns(2)
    child = multiprocessing.get_context("fork").Process(target=_child_commit, args=(ms, a))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    ms.commit_txn(b)
    assert (ms.get_txn_state(a), ms.get_txn_state(b)) == (TxnStatus.COMMITTED, TxnStatus.COMMITTED)


def _child_asks(ms: MetastoreFacade, txn: int) -> None:
    for _ in range(400):
        assert ms.get_txn_state(txn) is TxnStatus.OPEN


def test_a_forked_child_calls_beside_its_parent(metastore: MetastoreFacade) -> None:
    """A forked child calling while its parent calls: each on connections of its own, the child authenticated
    with the settings it inherited (on a kerberized metastore, a SASL socket shared with the parent loses its
    security context's sequence and hangs)."""
    import multiprocessing

    ms = metastore
    a, b = ms.open_txns(2)  # the parent keeps an idle connection the child inherits
    child = multiprocessing.get_context("fork").Process(target=_child_asks, args=(ms, a))
    child.start()
    for _ in range(400):
        assert ms.get_txn_state(b) is TxnStatus.OPEN
    child.join(120)
    assert child.exitcode == 0
    ms.commit_txn(b)
    assert ms.get_txn_state(b) is TxnStatus.COMMITTED


def test_open_txns_with_write_ids_is_open_plus_allocate(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    (first,) = ms.open_txns()  # the batch's write ids still start at 1
    pairs = ms.open_txns_with_write_ids(3, f"{db}.t", user="me", agent_info="a")
    assert pairs == [(first + 1, 1), (first + 2, 2), (first + 3, 3)]
    # an unnamed txn gets this client's login and host name, as Hive's client fills them in
    ours = range(first, first + 4)
    # Hive 4's SHOW TRANSACTIONS reports every txn's agent as "Unknown" (its locks keep theirs)
    unnamed, named = ("Unknown", "Unknown") if is_hive(ms) else (None, "a")
    assert [(t.txn_id, t.user, t.agent_info) for t in ms.show_txns() if t.txn_id in ours] == [
        (first, getpass.getuser(), unnamed),
        (first + 1, "me", named),
        (first + 2, "me", named),
        (first + 3, "me", named),
    ]
    valid = ms.get_valid_write_ids(f"{db}.t")
    assert not any(valid.is_write_id_valid(w) for w in (1, 2, 3))


def test_open_txns_with_write_ids_opens_nothing_on_error(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    ms.execute(f"CREATE TABLE {db}.plain (id int)")
    if not is_hive(ms):  # Hive's metastore allocates write ids on any name
        with pytest.raises(InvalidObjectException, match="not transactional"):
            ms.open_txns_with_write_ids(2, f"{db}.plain")
        with pytest.raises(NoSuchObjectException):
            ms.open_txns_with_write_ids(2, f"{db}.nope")
    open_before = {t.txn_id for t in ms.show_txns() if t.state is TxnStatus.OPEN}
    with pytest.raises(InvalidObjectException, match=r"1\.\.1000"):
        ms.open_txns_with_write_ids(0, f"{db}.t")
    assert {t.txn_id for t in ms.show_txns() if t.state is TxnStatus.OPEN} == open_before


def test_open_with_first_lock_is_open_plus_a_no_wait_lock_for_the_first_txn(
    metastore: MetastoreFacade, db: str
) -> None:
    ms = metastore
    ms.add_partition(f"{db}.t", ["1"])
    insert = LockComponent(LockType.SHARED_READ, LockLevel.PARTITION, db, "t", "ds=1", OperationType.INSERT)
    pairs, lock = ms.open_txns_with_write_ids_and_lock(2, f"{db}.t", [insert], agent_info="agent-7")
    first = pairs[0][0]
    assert pairs == [(first, 1), (first + 1, 2)]
    assert lock.state is LockState.ACQUIRED
    [held] = ms.show_locks(f"{db}.t")
    assert (held.lock_id, held.txn_id, held.partition, held.agent_info) == (
        lock.lock_id,
        first,
        "ds=1",
        "agent-7",
    )
    ms.commit_txn(first)
    # an incompatible lock held elsewhere: the batch opens and its first lock waits (the caller decides)
    ms.lock([LockComponent(LockType.EXCLUSIVE, LockLevel.TABLE, db, "u")])
    u_insert = LockComponent(LockType.SHARED_READ, LockLevel.TABLE, db, "u", operation=OperationType.INSERT)
    [(txn, _)], waiting = ms.open_txns_with_write_ids_and_lock(1, f"{db}.u", [u_insert])
    assert waiting.state is LockState.WAITING and ms.get_txn_state(txn) is TxnStatus.OPEN


def test_open_with_first_lock_leaves_no_open_txn_when_the_lock_request_fails(
    metastore: MetastoreFacade, db: str
) -> None:
    ms = metastore
    missing = LockComponent(LockType.SHARED_READ, LockLevel.TABLE, db, "nope", operation=OperationType.INSERT)
    if is_hive(ms):
        # Hive's metastore grants a lock on any name: no failure to undo (see test_metastore_locks)
        [(txn, _)], lock = ms.open_txns_with_write_ids_and_lock(1, f"{db}.t", [missing])
        assert lock.state is LockState.ACQUIRED and ms.get_txn_state(txn) is TxnStatus.OPEN
        return
    with pytest.raises(NoSuchObjectException, match=rf"{db}\.nope"):
        ms.open_txns_with_write_ids_and_lock(3, f"{db}.t", [missing])
    assert [t.txn_id for t in ms.show_txns() if t.state is TxnStatus.OPEN] == []
    assert ms.show_locks() == []


def test_commit_with_writes_fails_as_a_whole(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    a, b = ms.open_txns(2)
    ms.allocate_table_write_ids([a], f"{db}.t")
    ms.allocate_table_write_ids([a], f"{db}.u")
    ms.allocate_table_write_ids([b], f"{db}.t")
    ms.abort_txn(b)
    with pytest.raises(TxnAbortedException):
        ms.commit_txn(b)
    ms.commit_txn(a)
    assert ms.get_partition(f"{db}.t", ["x"]) is None  # the failed commits added no dynamic partition


def test_a_commit_s_writes_carry_the_write_ids_of_its_txn(
    metastore: MetastoreFacade, metastore_settings: dict[str, Any], db: str
) -> None:
    """A write under another txn's write id would become visible with that txn: every backend refuses it before
    anything is recorded, whichever client allocated the write ids (a Spark sink's executors allocate, its
    driver commits)."""
    ms = metastore
    t = f"{db}.t"
    a, b, c = ms.open_txns(3)
    insert = {"ds=x": OperationType.INSERT}
    with pytest.raises(InvalidObjectException, match=rf"txnid:{a} has write id None on {db}\.t, not 1"):
        ms.commit_txn(a, writes=[TableWrite(t, 1, files={None: ["f"]})])  # no write id anywhere
    [(_, wa)] = ms.allocate_table_write_ids([a], t)
    [(_, wb)] = ms.allocate_table_write_ids([b], t)
    with pytest.raises(InvalidObjectException, match=rf"txnid:{a} has write id {wa} on {db}\.t, not {wb}"):
        ms.commit_txn(a, writes=[TableWrite(t, wb, components=insert)])
    with pytest.raises(
        InvalidObjectException, match=rf"txnid:{a} has write id {wa} on {db}\.t, not {wa + 5}"
    ):
        ms.add_dynamic_partitions(a, wa + 5, t, ["ds=x"])
    # a client that allocated nothing
    with Metastore.connect(ms.url, warehouse=ms.warehouse, **metastore_settings) as other:
        with pytest.raises(
            InvalidObjectException, match=rf"txnid:{a} has write id {wa} on {db}\.t, not {wb}"
        ):
            other.commit_txn(a, writes=[TableWrite(t, wb, components=insert)])
        with pytest.raises(
            InvalidObjectException, match=rf"txnid:{a} has write id {wa} on {db}\.t, not {wb}"
        ):
            other.add_write_notification(a, wb, t, "ds=x", ["f"])
        # a txn with no write id on the table claiming another's (Hive's metastore allocates it one as it is
        # asked: never the one claimed)
        with pytest.raises(
            InvalidObjectException, match=rf"txnid:{c} has write id (None|\d+) on {db}\.t, not {wb}"
        ):
            other.commit_txn(c, writes=[TableWrite(t, wb, components=insert)])
        assert ms.get_txn_state(a) is TxnStatus.OPEN and ms.get_txn_state(c) is TxnStatus.OPEN
        other.commit_txn(a, writes=[TableWrite(t, wa, components=insert)])
    ms.commit_txn(b, writes=[TableWrite(t, wb, components=insert)])
    valid = ms.get_valid_write_ids(t)
    assert valid.is_write_id_valid(wa) and valid.is_write_id_valid(wb)


def test_open_batch_is_capped(metastore: MetastoreFacade) -> None:
    """Refused before the metastore is asked (Hive's opens fewer than asked above its cap, and fails on 0)."""
    open_before = {t.txn_id for t in metastore.show_txns() if t.state is TxnStatus.OPEN}
    with pytest.raises(InvalidObjectException, match=r"can open 1\.\.1000 transactions at once, not 1001"):
        metastore.open_txns(1001)
    with pytest.raises(InvalidObjectException, match=r"1\.\.1000 transactions at once, not 0"):
        metastore.open_txns(0)
    assert {t.txn_id for t in metastore.show_txns() if t.state is TxnStatus.OPEN} == open_before


def test_notifications_are_declared(metastore: MetastoreFacade, db: str) -> None:
    """A commit's events are in the log where the backend has one; elsewhere the calls say it has none."""
    ms = metastore
    if ms.supports(Capability.NOTIFICATIONS):
        start = ms.current_notification_event_id()
        [(txn, _)] = ms.open_txns_with_write_ids(1, f"{db}.t")
        ms.commit_txn(txn)
        assert [e.event_type for e in ms.notifications(start)] == ["OPEN_TXN", "ALLOC_WRITE_ID", "COMMIT_TXN"]
        return
    with pytest.raises(UnsupportedCapability, match="a Hive Metastore has no notifications"):
        ms.current_notification_event_id()
    with pytest.raises(UnsupportedCapability, match="a Hive Metastore has no notifications"):
        ms.notifications(0)


class TestSqlBackendOnly:
    """acidstream's own metastore: its id counters from one, its completed-components table, its notification
    log's content, its fault points and its client-side housekeeping."""

    def test_txn_ids_are_consecutive_from_one(self, ms: MetastoreFacade) -> None:
        assert ms.open_txns(3) == [1, 2, 3]
        assert ms.open_txns() == [4]
        assert str(ms.get_open_txns()) == "4:1:1,2,3,4:"

    def test_components_move_to_completed_at_commit(self, ms: MetastoreFacade) -> None:
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

    def test_a_txn_opened_while_an_update_commits_sees_it_or_conflicts(self, ms: MetastoreFacade) -> None:
        """No lost update: B opens and takes its snapshot while A's commit is under way, then locks and updates the
        same partition; B's snapshot contains A or B's commit conflicts. A commit must not take its commit id while
        an open can still slip in before the commit is visible (PostgreSQL, READ COMMITTED, lost B's conflict)."""
        import threading
        import time

        (a,) = ms.open_txns()
        _write(ms, "db", a, OperationType.UPDATE, "ds=1")
        # A sleeps at the end of its commit, inside its DB transaction
        with faults.armed("metastore.commit", faults.sleep(2), times=1):
            committing = threading.Thread(target=ms.commit_txn, args=(a,))
            committing.start()
            time.sleep(
                0.5
            )  # A is in its commit by now (if not, the race is not exercised; nothing fails wrongly)
            (b,) = ms.open_txns()
            sees_a = ms.get_valid_write_ids("db.t", snapshot=ms.snapshot()).is_write_id_valid(1)
            _write(ms, "db", b, OperationType.UPDATE, "ds=1")
            committing.join(30)
        assert ms.get_txn_state(a) is TxnStatus.COMMITTED
        if sees_a:
            ms.commit_txn(b)
        else:
            with pytest.raises(WriteConflictException):
                ms.commit_txn(b)

    def test_timeouts_abort_silent_txns(self, metastore_url: str, warehouse: object) -> None:
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

    def test_commit_records_writes_and_dynamic_partitions_atomically(self, ms: MetastoreFacade) -> None:
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
        ms.commit_txn(
            txn, writes=[TableWrite("db.t", wid, files={None: ["x"]})]
        )  # a repeated commit is a no-op
        assert ms.notifications(start + 3) == []

    def test_commit_records_writes_to_several_tables(self, ms: MetastoreFacade) -> None:
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
            (c.table, c.partition, c.write_id, c.update_delete)
            for c in ms.backend.completed_components("db.t")
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

    def test_write_id_of_a_txn(self, ms: MetastoreFacade) -> None:
        a, b = ms.open_txns(2)
        ms.allocate_table_write_ids([b], "db.u")
        assert ms.backend.get_write_id(b, "db.u") == 1
        assert ms.backend.get_write_id(a, "db.u") is None

    def test_open_txns_with_write_ids_records_its_events(self, ms: MetastoreFacade) -> None:
        start = ms.current_notification_event_id()
        ms.open_txns()
        ms.open_txns_with_write_ids(3, "db.t")
        assert str(ms.get_valid_write_ids("db.t")) == "db.t:3:1:1,2,3:"
        events = ms.notifications(start)
        assert [e.event_type for e in events] == ["OPEN_TXN", "OPEN_TXN", "ALLOC_WRITE_ID"]
        assert events[1].message["txn_ids"] == [2, 3, 4]
        assert events[2].message == {"txn_to_write_id": [[2, 1], [3, 2], [4, 3]]}

    def test_failed_commits_record_no_component(self, ms: MetastoreFacade) -> None:
        a, b = ms.open_txns(2)
        with pytest.raises(InvalidObjectException, match=r"has write id None on db\.t"):
            ms.commit_txn(a, writes=[TableWrite("db.t", 1, files={None: ["f"]})])  # no write id anywhere
        [(_, wid)] = ms.allocate_table_write_ids([a], "db.t")
        with pytest.raises(InvalidObjectException):
            ms.commit_txn(a, writes=[TableWrite("db.t", wid + 5, components={"ds=x": OperationType.INSERT})])
        assert ms.get_txn_state(a) is TxnStatus.OPEN
        ms.allocate_table_write_ids([b], "db.t")
        ms.abort_txn(b)
        start = ms.current_notification_event_id()
        with pytest.raises(TxnAbortedException):
            ms.commit_txn(b, writes=[TableWrite("db.t", 2, components={"ds=x": OperationType.INSERT})])
        assert ms.notifications(start) == []
        ms.commit_txn(a)
        assert ms.backend.completed_components("db.t") == []
