"""One ``ValidTxnList`` gives every table's write-id list at the same point in time (``ms.snapshot()``), on every
backend (SQLite, PostgreSQL, Hive 4's metastore)."""

from __future__ import annotations

from acidstream.metastore import MetastoreFacade
from support.backends import is_hive


def test_a_later_txn_with_a_smaller_write_id_stays_invisible(metastore: MetastoreFacade, db: str) -> None:
    """Txn A is open at the snapshot; txn C opens after it and takes write id 1; A then takes write id 2 and
    commits, C commits. At the snapshot both are invisible, though write id 1 is below the high-water mark."""
    ms = metastore
    [a] = ms.open_txns(1)
    snap = ms.snapshot()
    [c] = ms.open_txns(1)
    assert ms.allocate_table_write_ids([c], f"{db}.t") == [(c, 1)]
    assert ms.allocate_table_write_ids([a], f"{db}.t") == [(a, 2)]
    ms.commit_txn(a)
    ms.commit_txn(c)
    at = ms.get_valid_write_ids(f"{db}.t", snapshot=snap)
    assert not at.is_write_id_valid(1)
    assert not at.is_write_id_valid(2)
    now = ms.get_valid_write_ids(f"{db}.t", snapshot=ms.snapshot())
    assert now.is_write_id_valid(1) and now.is_write_id_valid(2)


def test_one_snapshot_covers_several_tables(metastore: MetastoreFacade, db: str) -> None:
    """A txn writing two tables is visible in both or in neither, for any snapshot."""
    ms = metastore
    [before] = ms.open_txns(1)
    ms.allocate_table_write_ids([before], f"{db}.t")
    ms.commit_txn(before)
    [txn] = ms.open_txns(1)
    [(_, wt)] = ms.allocate_table_write_ids([txn], f"{db}.t")
    [(_, wu)] = ms.allocate_table_write_ids([txn], f"{db}.u")
    open_snap = ms.snapshot()
    ms.commit_txn(txn)
    committed_snap = ms.snapshot()
    for table, wid in ((f"{db}.t", wt), (f"{db}.u", wu)):
        assert not ms.get_valid_write_ids(table, snapshot=open_snap).is_write_id_valid(wid)
        assert ms.get_valid_write_ids(table, snapshot=committed_snap).is_write_id_valid(wid)
    assert ms.get_valid_write_ids(f"{db}.t", snapshot=open_snap).is_write_id_valid(1)


def test_aborted_write_ids_are_marked_aborted(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    [a, b] = ms.open_txns(2)
    ms.allocate_table_write_ids([a, b], f"{db}.t")
    ms.abort_txn(a)
    at = ms.get_valid_write_ids(f"{db}.t", snapshot=ms.snapshot())
    assert at.aborted_ids == (1,) and not at.is_write_id_valid(2)
    # open write id 2: listed open below the high-water mark, or (Hive's metastore, whose mark here is the last
    # committed or aborted write id) above it: invisible either way
    assert at.open_ids == (() if is_hive(ms) else (2,))
    assert str(at) == str(ms.get_valid_write_ids(f"{db}.t"))


def test_a_table_never_written_has_an_empty_list(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    assert ms.get_valid_write_ids(f"{db}.u", snapshot=ms.snapshot()).high_watermark == 0
