"""One ``ValidTxnList`` gives every table's write-id list at the same point in time (``ms.snapshot()``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from acidstream.metastore import MetastoreFacade


@pytest.fixture
def ms(metastore_url: str, warehouse: str) -> Iterator[MetastoreFacade]:
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse) as m:
        m.execute("CREATE DATABASE db")
        for t in ("t", "u"):
            m.execute(f"CREATE TABLE db.{t} (id int) TBLPROPERTIES ('transactional'='true')")
        yield m


def test_a_later_txn_with_a_smaller_write_id_stays_invisible(ms: MetastoreFacade) -> None:
    """Txn A is open at the snapshot; txn C opens after it and takes write id 1; A then takes write id 2 and
    commits, C commits. At the snapshot both are invisible, though write id 1 is below the high-water mark."""
    [a] = ms.open_txns(1)
    snap = ms.snapshot()
    [c] = ms.open_txns(1)
    assert ms.allocate_table_write_ids([c], "db.t") == [(c, 1)]
    assert ms.allocate_table_write_ids([a], "db.t") == [(a, 2)]
    ms.commit_txn(a)
    ms.commit_txn(c)
    at = ms.get_valid_write_ids("db.t", snapshot=snap)
    assert not at.is_write_id_valid(1)
    assert not at.is_write_id_valid(2)
    now = ms.get_valid_write_ids("db.t", snapshot=ms.snapshot())
    assert now.is_write_id_valid(1) and now.is_write_id_valid(2)


def test_one_snapshot_covers_several_tables(ms: MetastoreFacade) -> None:
    """A txn writing two tables is visible in both or in neither, for any snapshot."""
    [before] = ms.open_txns(1)
    ms.allocate_table_write_ids([before], "db.t")
    ms.commit_txn(before)
    [txn] = ms.open_txns(1)
    [(_, wt)] = ms.allocate_table_write_ids([txn], "db.t")
    [(_, wu)] = ms.allocate_table_write_ids([txn], "db.u")
    open_snap = ms.snapshot()
    ms.commit_txn(txn)
    committed_snap = ms.snapshot()
    for table, wid in (("db.t", wt), ("db.u", wu)):
        assert not ms.get_valid_write_ids(table, snapshot=open_snap).is_write_id_valid(wid)
        assert ms.get_valid_write_ids(table, snapshot=committed_snap).is_write_id_valid(wid)
    assert ms.get_valid_write_ids("db.t", snapshot=open_snap).is_write_id_valid(1)


def test_aborted_write_ids_are_marked_aborted(ms: MetastoreFacade) -> None:
    [a, b] = ms.open_txns(2)
    ms.allocate_table_write_ids([a, b], "db.t")
    ms.abort_txn(a)
    at = ms.get_valid_write_ids("db.t", snapshot=ms.snapshot())
    assert at.aborted_ids == (1,) and at.open_ids == (2,)
    assert str(at) == str(ms.get_valid_write_ids("db.t"))


def test_a_table_never_written_has_an_empty_list(ms: MetastoreFacade) -> None:
    assert ms.get_valid_write_ids("db.u", snapshot=ms.snapshot()).high_watermark == 0
