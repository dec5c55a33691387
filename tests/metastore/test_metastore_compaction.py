"""The compaction queue's state machine, the initiator's queries and the reader registrations. Requests, claims,
refusals and ``SHOW COMPACTIONS`` run on every backend (SQLite, PostgreSQL, Hive 4's metastore); the initiator's
and cleaner's calls and publications run where the backend has them (``TestSqlBackendOnly``: a Hive Metastore
declares them missing: test_metastore_declared).

Ported from Hive's TestCompactionTxnHandler where the behaviour is Hive's (claims, history, failed-compaction
back-off); the publication/registration rules are acidstream's (see metastore/sql/compaction.py).
"""

from __future__ import annotations

import time

import pytest

from acidstream.errors import (
    CompactionDeclined,
    DdlSyntaxError,
    InvalidObjectException,
    InvalidPartition,
    NoSuchObjectException,
    TxnAbortedException,
)
from acidstream.metastore import LockComponent, LockLevel, LockType, MetastoreFacade, OperationType, TxnStatus
from acidstream.metastore.ddl import SHOW_COMPACTIONS_COLUMNS
from support.backends import is_hive
from support.readers import age_reader


def publish(ms: MetastoreFacade, cq_id: int, *, outputs: tuple[str, ...] = ("base_0000001",)) -> int:
    info = ms.get_compaction(cq_id)
    assert info.txn_id is not None
    ms.update_compaction(cq_id, info.txn_id, highest_write_id=1, meta={"tmp": "/x/_tmp_1"})
    return ms.begin_publish(
        cq_id, info.txn_id, {"outputs": list(outputs), "inputs": ["delta_0000001_0000001"]}
    )


def write(ms: MetastoreFacade, table: str, partition: str | None, *, commit: bool = True) -> int:
    """One txn writing to a table/partition under a lock (so the txn has components); returns its write id."""
    txn = ms.open_txns(1)[0]
    [(_, wid)] = ms.allocate_table_write_ids([txn], table)
    db, name = table.split(".")
    level = LockLevel.PARTITION if partition else LockLevel.TABLE
    ms.lock(
        [LockComponent(LockType.SHARED_READ, level, db, name, partition, OperationType.INSERT)], txn_id=txn
    )
    if commit:
        ms.commit_txn(txn)
    else:
        ms.abort_txn(txn)
    return wid


def test_enqueue_checks_the_target(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    ms.add_partition(f"{db}.t", ["1"])
    with pytest.raises(InvalidObjectException, match="must specify a partition"):
        ms.compact(f"{db}.t")
    with pytest.raises(NoSuchObjectException, match=r"ds=2|values=\[2\]"):
        ms.compact(f"{db}.t", "ds=2")
    with pytest.raises(InvalidPartition, match="not partitioned"):
        ms.compact(f"{db}.u", "ds=1")
    with pytest.raises(InvalidPartition, match="partitioned by"):
        ms.compact(f"{db}.t", "x=1")
    with pytest.raises(InvalidObjectException, match="'major' or 'minor'"):
        ms.compact(f"{db}.u", kind="medium")
    ms.execute(f"CREATE TABLE {db}.plain (a int)")
    if is_hive(ms):  # Hive's metastore queues a request on any table (its Driver checks the table)
        ms.compact(f"{db}.plain")
    else:
        with pytest.raises(InvalidObjectException, match="not transactional"):
            ms.compact(f"{db}.plain")
    first = ms.compact(f"{db}.t", {"DS": "1"}, "minor")
    assert ms.compact(f"{db}.t", "ds=1", "minor") == first  # one open request per target
    with pytest.raises(CompactionDeclined, match=f"minor compaction {first} of it is initiated"):
        ms.compact(f"{db}.t", "ds=1", "major")
    [info] = [c for c in ms.show_compactions() if (c.db, c.table) == (db, "t")]
    assert (info.partition, info.kind, info.state, info.type) == ("ds=1", "minor", "initiated", "MINOR")
    assert info.initiator_id is not None and info.initiator_id.endswith("-manual")


def test_claims_are_exclusive_and_open_a_compactor_txn(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    a, b = ms.compact(f"{db}.u"), ms.compact(f"{db}.u", kind="major")
    assert a == b
    ms.add_partition(f"{db}.t", ["1"])
    c = ms.compact(f"{db}.t", "ds=1")
    first = ms.find_next_compaction("h-1-1")
    attempts = 0 if is_hive(ms) else 1  # Hive's queue keeps no attempt count
    assert first is not None and first.id == a and first.state == "working" and first.attempts == attempts
    assert first.txn_id is not None and ms.get_txn_state(first.txn_id) is TxnStatus.OPEN
    assert ms.find_next_compaction("h-1-2", compaction_id=a) is None  # taken
    second = ms.find_next_compaction("h-1-2")
    assert second is not None and second.id == c and second.worker_host == "h"
    assert ms.find_next_compaction("h-1-3") is None


def test_ddl_compact_and_show_compactions(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    ms.add_partition(f"{db}.t", ["2024-01-01"])
    [(cq, state)] = ms.execute(f"ALTER TABLE {db}.t PARTITION (ds='2024-01-01') COMPACT 'MINOR'")  # type: ignore[misc]
    assert state == "initiated"
    [(cq2, _)] = ms.execute(f"alter table {db}.u compact 'major';")  # type: ignore[misc]
    rows = [r for r in ms.execute("SHOW COMPACTIONS") or () if r[1] == db]
    assert [r[0] for r in rows] == [cq, cq2]
    row = dict(zip(SHOW_COMPACTIONS_COLUMNS, rows[0], strict=True))
    assert (row["Database"], row["Table"], row["Partition"], row["Type"], row["State"]) == (
        db,
        "t",
        "ds=2024-01-01",
        "MINOR",
        "initiated",
    )
    with pytest.raises(DdlSyntaxError, match="'major' or 'minor'"):
        ms.execute(f"ALTER TABLE {db}.u COMPACT 'full'")
    with pytest.raises(DdlSyntaxError, match="expected COMPACT"):
        ms.execute(f"ALTER TABLE {db}.t PARTITION (ds='1') SET TBLPROPERTIES ('a'='b')")


def test_wait_polls_until_a_worker_finishes(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    import threading

    cq = ms.compact(f"{db}.u")

    errors: list[BaseException] = []

    def worker() -> None:
        time.sleep(0.2)
        try:
            claimed = ms.find_next_compaction("w-1-1", compaction_id=cq)
            if claimed is not None:  # Hive's metastore runs a worker of its own, which may take it first
                ms.mark_refused(cq, "nothing to do")
        except BaseException as exc:  # asserted below: a worker's failure fails the test
            errors.append(exc)

    t = threading.Thread(target=worker)
    t.start()
    assert ms.wait_for_compaction(cq, timeout=30).state == "refused"
    t.join()
    assert errors == []


class TestSqlBackendOnly:
    """The initiator's and cleaner's calls, publications and reader-held cleaning: acidstream's own metastore
    (a Hive Metastore's initiator and cleaner are its own)."""

    def test_compacted_only_after_publication(self, ms: MetastoreFacade) -> None:
        """An entry can no longer reach "succeeded" without its worker having published files."""
        cq = ms.compact("db.u")
        ms.find_next_compaction("w-1-1")
        with pytest.raises(InvalidObjectException, match="published no output"):
            ms.mark_compacted(cq)
        with pytest.raises(InvalidObjectException, match="working, not ready for cleaning"):
            ms.mark_cleaned(cq)
        ms.mark_refused(cq, "None of the compaction thresholds met")
        [info] = ms.show_compactions()
        assert (info.state, info.error_message) == ("refused", "None of the compaction thresholds met")
        assert info.txn_id is not None and ms.get_txn_state(info.txn_id) is TxnStatus.COMMITTED

    def test_full_life_cycle_consumes_the_initiator_input(self, ms: MetastoreFacade) -> None:
        w1 = write(ms, "db.u", None)
        assert [(p.table, p.partition) for p in ms.find_potential_compactions(1000)] == [("u", None)]
        cq = ms.compact("db.u")
        info = ms.find_next_compaction("w-1-1")
        assert info is not None and info.txn_id is not None
        ms.update_compaction(cq, info.txn_id, highest_write_id=w1, meta={"tmp": "/x/_tmp_1"})
        later = write(ms, "db.u", None)  # committed after the compactor's snapshot
        ms.begin_publish(cq, info.txn_id, {"outputs": ["base_0000001"], "inputs": ["delta_0000001_0000001"]})
        with pytest.raises(InvalidObjectException, match="must be completed, not failed"):
            ms.mark_failed(cq, "too late")
        ms.mark_compacted(cq)
        info = ms.get_compaction(cq)
        assert info.state == "ready for cleaning" and info.commit_time is not None
        assert ms.get_txn_state(info.txn_id) is TxnStatus.COMMITTED  # type: ignore[arg-type]
        assert info.meta["inputs"] == ["delta_0000001_0000001"]
        assert [c.id for c in ms.find_ready_to_clean(retention=0)] == [cq]
        assert ms.find_ready_to_clean(retention=3600) == []
        assert ms.claim_cleaning(cq) and not ms.claim_cleaning(cq)  # one cleaner at a time
        assert ms.find_ready_to_clean(retention=0) == []
        ms.mark_cleaned(cq)
        assert ms.get_compaction(cq).state == "succeeded"
        assert [c.write_id for c in ms.backend.completed_components("db.u")] == [later]
        assert [p.table for p in ms.find_potential_compactions(1000)] == ["u"]

    def test_readers_registered_before_publication_hold_the_cleaner(self, ms: MetastoreFacade) -> None:
        before = ms.register_reader("db.u")
        assert before.write_ids.table == "db.u"
        cq = ms.compact("db.u")
        ms.find_next_compaction("w-1-1")
        publish(ms, cq)
        during = ms.register_reader("db.u")  # lists while the output moves: ignores it, reads the inputs
        assert [p.outputs for p in ms.unfinished_publications("db.u", during.baseline)] == [("base_0000001",)]
        ms.mark_compacted(cq)
        after = ms.register_reader("db.u")
        other = ms.register_reader("db.t")
        assert ms.unfinished_publications("db.u", after.baseline) == []
        assert [p.outputs for p in ms.unfinished_publications("db.u", during.baseline)] == [("base_0000001",)]
        assert ms.blocking_readers(cq) == [before.reader_id, during.reader_id]
        assert ms.find_ready_to_clean(retention=0) == []
        ms.unregister_reader(before.reader_id)
        assert ms.find_ready_to_clean(retention=0) == []
        ms.unregister_reader(during.reader_id)
        assert [c.id for c in ms.find_ready_to_clean(retention=0)] == [cq]
        assert {r[0] for r in ms.active_readers()} == {after.reader_id, other.reader_id}

    def test_silent_readers_stop_holding_the_cleaner(self, ms: MetastoreFacade) -> None:
        reader = ms.register_reader("db.u")
        cq = ms.compact("db.u")
        ms.find_next_compaction("w-1-1")
        publish(ms, cq)
        ms.mark_compacted(cq)
        assert ms.find_ready_to_clean(retention=0) == []
        age_reader(ms, reader.reader_id, ms.txn_timeout + 1)
        assert [c.id for c in ms.find_ready_to_clean(retention=0)] == [cq]
        assert ms.heartbeat_readers([reader.reader_id]) == []  # alive again: waited for again
        assert ms.find_ready_to_clean(retention=0) == []
        age_reader(ms, reader.reader_id, ms.txn_timeout + 1)
        ms.perform_timeouts()
        assert ms.heartbeat_readers([reader.reader_id]) == [reader.reader_id]
        assert ms.active_readers() == []

    def test_dead_worker_is_found_and_reverted_then_fails(self, ms: MetastoreFacade) -> None:
        cq = ms.compact("db.u")
        first = ms.find_next_compaction("w-1-1")
        assert first is not None and first.txn_id is not None
        assert ms.find_abandoned_compactions() == []
        ms.abort_txn(first.txn_id)  # what the housekeeper does to a worker that stopped heartbeating
        [dead] = ms.find_abandoned_compactions()
        assert dead.id == cq
        with pytest.raises(TxnAbortedException):
            ms.update_compaction(cq, first.txn_id, highest_write_id=0, meta={})
        assert ms.revert_compaction(cq, "worker died", max_attempts=2) == "initiated"
        second = ms.find_next_compaction("w-1-2")
        assert second is not None and second.attempts == 2 and second.txn_id != first.txn_id
        with pytest.raises(InvalidObjectException, match="no longer worked on"):
            ms.update_compaction(cq, first.txn_id, highest_write_id=0, meta={})
        ms.abort_txn(second.txn_id)  # type: ignore[arg-type]
        assert ms.revert_compaction(cq, "worker died", max_attempts=2) == "failed"
        info = ms.get_compaction(cq)
        assert info.state == "failed" and "gave up after 2 attempts" in (info.error_message or "")

    def test_published_entries_are_rolled_forward_not_reverted(self, ms: MetastoreFacade) -> None:
        cq = ms.compact("db.u")
        info = ms.find_next_compaction("w-1-1")
        publish(ms, cq)
        ms.abort_txn(info.txn_id)  # type: ignore[union-attr, arg-type]
        [dead] = ms.find_abandoned_compactions()
        assert dead.publish_id is not None
        with pytest.raises(InvalidObjectException, match="rolled forward"):
            ms.revert_compaction(cq, "worker died", max_attempts=2)
        ms.mark_compacted(cq)  # the compactor txn is already aborted: nothing to commit
        assert ms.get_compaction(cq).state == "ready for cleaning"

    def test_failed_compactions_back_off(self, ms: MetastoreFacade) -> None:
        """``checkFailedCompactions``: after ``threshold`` consecutive failures the initiator stops (until the
        retry time has passed); a success in between resets the count."""
        for _ in range(2):
            cq = ms.compact("db.u")
            ms.find_next_compaction("w-1-1")
            ms.mark_failed(cq, "boom")
        assert ms.too_many_failed_compactions("db.u", None, 2, retry_after=3600)
        assert not ms.too_many_failed_compactions("db.u", None, 3, retry_after=3600)
        time.sleep(0.01)
        assert not ms.too_many_failed_compactions("db.u", None, 2, retry_after=0.001)
        ms.record_compaction_not_initiated("db.u", None, "too many failures")  # does not count
        assert ms.too_many_failed_compactions("db.u", None, 2, retry_after=3600)
        cq = ms.compact("db.u")
        ms.find_next_compaction("w-1-1")
        publish(ms, cq)
        ms.mark_compacted(cq)
        ms.mark_cleaned(cq)
        assert not ms.too_many_failed_compactions("db.u", None, 2, retry_after=3600)
        states = [c.state for c in ms.show_compactions()]
        assert states == ["failed", "failed", "did not initiate", "succeeded"]

    def test_history_is_purged_per_target_and_state(self, ms: MetastoreFacade) -> None:
        for _ in range(5):
            cq = ms.compact("db.u")
            ms.find_next_compaction("w-1-1")
            ms.mark_failed(cq, "boom")
        for _ in range(3):
            ms.record_compaction_not_initiated("db.u", None, "skipped")
        assert ms.purge_compaction_history() == 3
        kept = [(c.id, c.state) for c in ms.show_compactions()]
        assert [s for _, s in kept] == ["failed"] * 3 + ["did not initiate"] * 2
        assert [i for i, _ in kept] == [3, 4, 5, 7, 8]

    def test_aborted_write_ids_are_forgotten_per_partition(self, ms: MetastoreFacade) -> None:
        for ds in ("1", "2"):
            ms.add_partition("db.t", [ds])
        both = ms.open_txns(1)[0]
        [(_, w_both)] = ms.allocate_table_write_ids([both], "db.t")
        ms.lock(
            [
                LockComponent(
                    LockType.SHARED_READ, LockLevel.PARTITION, "db", "t", f"ds={ds}", OperationType.INSERT
                )
                for ds in ("1", "2")
            ],
            txn_id=both,
        )
        ms.abort_txn(both)
        dynamic = ms.open_txns(1)[0]  # a dynamic-partition write records no component until commit
        [(_, w_dynamic)] = ms.allocate_table_write_ids([dynamic], "db.t")
        ms.abort_txn(dynamic)
        assert ms.get_valid_write_ids("db.t").aborted_ids == (w_both, w_dynamic)
        for ds, expected in (("1", (w_both, w_dynamic)), ("2", (w_dynamic,))):
            cq = ms.compact("db.t", f"ds={ds}")
            ms.find_next_compaction("w-1-1")
            publish(ms, cq)
            ms.mark_compacted(cq)
            ms.mark_cleaned(cq, forget_write_ids=[w_both, w_dynamic])
            assert ms.get_valid_write_ids("db.t").aborted_ids == expected

    def test_potential_compactions_and_aborted_threshold(self, ms: MetastoreFacade) -> None:
        ms.add_partition("db.t", ["1"])
        write(ms, "db.t", "ds=1")
        for _ in range(3):
            write(ms, "db.u", None, commit=False)
        found = {(p.table, p.partition, p.too_many_aborts) for p in ms.find_potential_compactions(2)}
        assert found == {("t", "ds=1", False), ("u", None, True)}
        assert {(p.table, p.too_many_aborts) for p in ms.find_potential_compactions(3)} == {("t", False)}
