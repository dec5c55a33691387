"""The initiator, ported from Hive's TestInitiator: thresholds, per-table overrides, NO_AUTO_COMPACTION, aborted
txns, targets already queued, dynamic-partition table entries, failed-compaction back-off."""

from __future__ import annotations

import dataclasses
import time

import pytest

from acidstream import Metastore
from acidstream.compactor import Compactor, CompactorConfig, Initiator
from read.readhelpers import create, stream


def txns(n: int, commit: bool = True, start: int = 0) -> list[tuple[dict[str, list[object]], bool]]:
    return [({"id": [start + i], "msg": [f"m{start + i}"]}, commit) for i in range(n)]


def big_base(ms: Metastore, table: str, compactor: Compactor, rows: int = 20000, **kw: object) -> None:
    """A table whose major compaction left a base much larger than a small delta."""
    stream(
        ms, table, [({"id": list(range(rows)), "msg": [f"row {i} " * 4 for i in range(rows)]}, True)], **kw
    )
    stream(ms, table, txns(1), **kw)
    partition = {"ds": kw["static"][0]} if "static" in kw else None  # type: ignore[index]
    assert compactor.compact(f"db.{table}", partition, "major").info.state == "ready for cleaning"
    compactor.clean()


def requested(decisions: list) -> list[tuple[str | None, str | None]]:  # type: ignore[type-arg]
    return [(d.partition, d.kind) for d in decisions if d.kind is not None]


@pytest.fixture
def initiator(ms: Metastore) -> Initiator:
    return Initiator(ms, CompactorConfig(retention=0))


def test_nothing_to_compact(ms: Metastore, initiator: Initiator) -> None:
    create(ms, "t", "id int, msg string")
    assert initiator.run_once() == []
    stream(ms, "t", txns(3))
    [decision] = initiator.run_once()
    assert decision.kind is None and "3 deltas, threshold 10" in decision.reason
    assert ms.show_compactions() == []


def test_many_deltas_and_no_base_is_major(ms: Metastore, initiator: Initiator) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(11))
    assert requested(initiator.run_once()) == [(None, "major")]
    [info] = ms.show_compactions()
    assert info.kind == "major" and info.initiator_id == initiator.initiator_id


def test_many_deltas_after_a_base_is_minor(ms: Metastore, compactor: Compactor, initiator: Initiator) -> None:
    create(ms, "t", "id int, msg string")
    big_base(ms, "t", compactor)
    stream(ms, "t", txns(10))
    assert requested(initiator.run_once()) == []  # 10 deltas: not more than the threshold
    stream(ms, "t", txns(1))
    assert requested(initiator.run_once()) == [(None, "minor")]


def test_deltas_large_against_the_base_are_major(
    ms: Metastore, compactor: Compactor, initiator: Initiator
) -> None:
    create(ms, "t", "id int, msg string")
    big_base(ms, "t", compactor, rows=50)
    stream(ms, "t", txns(2))
    [decision] = initiator.run_once()
    assert decision.kind == "major" and "more than 0.1 of base size" in decision.reason


def test_small_deltas_against_a_big_base_wait(
    ms: Metastore, compactor: Compactor, initiator: Initiator
) -> None:
    create(ms, "t", "id int, msg string")
    big_base(ms, "t", compactor)
    stream(ms, "t", txns(1))
    assert requested(initiator.run_once()) == []


def test_per_table_threshold_overrides(ms: Metastore, initiator: Initiator) -> None:
    ms.execute(
        "CREATE TABLE db.t (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true', "
        "'compactorthreshold.hive.compactor.delta.num.threshold'='2')"
    )
    stream(ms, "t", txns(3))
    assert requested(initiator.run_once()) == [(None, "major")]


def test_pct_override(ms: Metastore, compactor: Compactor, initiator: Initiator) -> None:
    create(ms, "t", "id int, msg string")
    big_base(ms, "t", compactor, rows=50)
    ms.alter_table_properties("db.t", {"compactorthreshold.hive.compactor.delta.pct.threshold": "100"})
    stream(ms, "t", txns(2))
    assert requested(initiator.run_once()) == []


@pytest.mark.parametrize("key", ["NO_AUTO_COMPACTION", "no_auto_compaction"])
def test_no_auto_compaction(ms: Metastore, initiator: Initiator, key: str) -> None:
    ms.execute(
        f"CREATE TABLE db.t (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true', '{key}'='true')"
    )
    stream(ms, "t", txns(11))
    [decision] = initiator.run_once()
    assert decision.kind is None and "NO_AUTO_COMPACTION" in decision.reason


def test_too_many_aborts_is_major(ms: Metastore) -> None:
    create(ms, "t", "id int, msg string", "PARTITIONED BY (ds string)")
    stream(ms, "t", txns(3, commit=False), static=["a"])
    stream(ms, "t", txns(2, commit=False), static=["b"])
    stream(ms, "t", txns(1), static=["b"])
    decisions = Initiator(ms, CompactorConfig(aborted_txn_threshold=2)).run_once()
    assert requested(decisions) == [("ds=a", "major")]
    [a] = [d for d in decisions if d.partition == "ds=a"]
    assert "more than 2 aborted txns" in a.reason


def test_aborts_spread_over_partitions_do_not_add_up(ms: Metastore) -> None:
    create(ms, "t", "id int, msg string", "PARTITIONED BY (ds string)")
    for ds in "abc":
        stream(ms, "t", txns(2, commit=False), static=[ds])
    assert requested(Initiator(ms, CompactorConfig(aborted_txn_threshold=2)).run_once()) == []


def test_one_request_per_target(ms: Metastore, initiator: Initiator) -> None:
    """Two txns on one partition make one request; a target already queued or being worked on is skipped."""
    create(ms, "t", "id int, msg string", "PARTITIONED BY (ds string)")
    stream(ms, "t", txns(11), static=["a"])
    assert requested(initiator.run_once()) == [("ds=a", "major")]
    [again] = initiator.run_once()
    assert again.kind is None and "already initiated or working" in again.reason
    ms.find_next_compaction("w-1-1")
    [again] = initiator.run_once()
    assert again.kind is None and "already initiated or working" in again.reason
    assert len(ms.show_compactions()) == 1


def test_dynamic_partitioning_table_entries_are_skipped(ms: Metastore, initiator: Initiator) -> None:
    """A component without a partition on a partitioned table (Hive: a dynamic-partition write) is no target."""
    from acidstream.metastore import LockComponent, LockLevel, LockType, OperationType

    create(ms, "t", "id int, msg string", "PARTITIONED BY (ds string)")
    txn = ms.open_txns(1)[0]
    ms.allocate_table_write_ids([txn], "db.t")
    ms.lock(
        [LockComponent(LockType.SHARED_READ, LockLevel.TABLE, "db", "t", None, OperationType.INSERT)],
        txn_id=txn,
    )
    ms.commit_txn(txn)
    [decision] = initiator.run_once()
    assert decision.partition is None and "dynamic partitioning" in decision.reason


def test_dropped_tables_are_skipped(ms: Metastore, initiator: Initiator) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(11))
    ms.drop_table("db.t")
    assert [d.reason for d in initiator.run_once()] in ([], ["table no longer exists"])


def test_failed_compactions_stop_the_initiator_until_the_retry_time(ms: Metastore) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(11))
    config = CompactorConfig(retention=0, failed_compacts_threshold=2)
    for _ in range(2):
        cq = ms.compact("db.t")
        ms.find_next_compaction("w-1-1")
        ms.mark_failed(cq, "disk full")
    [decision] = Initiator(ms, config).run_once()
    assert decision.kind is None and "2 consecutive compactions failed" in decision.reason
    assert ms.show_compactions()[-1].state == "did not initiate"
    retry = dataclasses.replace(config, failed_retry_time=0.001)
    time.sleep(0.01)
    assert requested(Initiator(ms, retry).run_once()) == [(None, "major")]


def test_compaction_then_cleaning_consumes_the_candidates(ms: Metastore, compactor: Compactor) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(11))
    summary = compactor.run_once()
    assert summary.counts()["requested"] == 1 and summary.counts()["compacted"] == 1
    assert summary.counts()["cleaned"] == 1
    assert ms.find_potential_compactions(1000) == []
    assert compactor.run_once().counts()["requested"] == 0


def test_a_compaction_waiting_for_its_cleaner_is_not_requested_again(
    ms: Metastore, compactor: Compactor, initiator: Initiator
) -> None:
    """Until its cleaner runs, a compacted target is a candidate again and its replaced base is still there:
    a request then would compact nothing (0 rows written) and leave the cleaning to the same cleaner."""
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(11))
    assert compactor.run_once().counts()["cleaned"] == 1  # base_0000011
    stream(ms, "t", txns(11, start=11))
    assert (
        compactor.compact("db.t", kind="major").info.state == "ready for cleaning"
    )  # base_0000022, not cleaned
    [decision] = initiator.run_once()
    assert (
        decision.kind is None and decision.reason == "nothing to compact; compaction 2 is ready for cleaning"
    )
    assert len(ms.show_compactions()) == 2
    compactor.clean()
    assert initiator.run_once() == []
