"""The cleaner, ported from Hive's TestCleaner (obsolete and aborted directories, dropped tables and partitions)
plus acidstream's reader registrations: a scan that listed the old files keeps them until it ends."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
from compactorhelpers import dirs, hidden, rows_with_ids

from acidstream import Metastore
from acidstream.compactor import Compactor, CompactorConfig
from read.readhelpers import connect, create, stream
from support.readers import age_reader


def txns(*ids: int, commit: bool = True) -> list[tuple[dict[str, list[object]], bool]]:
    return [({"id": [i], "msg": [f"m{i}"]}, commit) for i in ids]


def test_cleans_after_major_and_minor(ms: Metastore, compactor: Compactor) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2))
    compactor.compact("db.t", kind="major")
    stream(ms, "t", txns(3, 4))
    compactor.compact("db.t", kind="minor")
    assert dirs(ms, "db.t") == [
        "base_0000002",
        "delta_0000001_0000001",
        "delta_0000002_0000002",
        "delta_0000003_0000003",
        "delta_0000003_0000004",
        "delta_0000004_0000004",
    ]
    outcomes = compactor.clean()
    assert [(c.state, c.removed) for c in outcomes] == [
        ("succeeded", ("delta_0000001_0000001", "delta_0000002_0000002")),
        ("succeeded", ("delta_0000003_0000003", "delta_0000004_0000004")),
    ]
    assert dirs(ms, "db.t") == ["base_0000002", "delta_0000003_0000004"]
    assert [c.state for c in ms.show_compactions()] == ["succeeded", "succeeded"]


def test_a_scan_that_listed_the_old_files_holds_them(ms: Metastore, compactor: Compactor) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2, 3))
    expected = rows_with_ids(ms, "db.t")
    early = ms.table("db.t").scan(with_row_id=True)
    plan = early.plan_files()  # lists delta_1_1 .. delta_3_3
    assert all("delta_" in f.path for t in plan.tasks for f in t.insert_files)
    compactor.compact("db.t", kind="major")
    assert compactor.clean() == []  # the early scan's registration predates the publication
    late = rows_with_ids(ms, "db.t")  # registered after it: reads the base, blocks nothing
    assert late == expected
    assert compactor.clean() == []
    rows = early.to_arrow()  # every file it listed is still there
    assert sorted(r["id"] for r in rows.to_pylist()) == [1, 2, 3]
    [outcome] = compactor.clean()  # its read ended: released
    assert outcome.state == "succeeded" and dirs(ms, "db.t") == ["base_0000003"]
    again = early.to_arrow()  # a second read of the same scan registers and lists again
    assert sorted(r["id"] for r in again.to_pylist()) == [1, 2, 3]


def test_retention_covers_unregistered_readers(ms: Metastore) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2))
    waiting = Compactor(ms, CompactorConfig(retention=3600))
    waiting.compact("db.t", kind="major")
    assert waiting.clean() == []
    assert Compactor(ms, CompactorConfig(retention=0)).clean()[0].state == "succeeded"


def test_detached_registrations_expire(ms: Metastore, compactor: Compactor) -> None:
    """A Spark scan's registration lives as long as its tasks heartbeat it."""
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2))
    scan = ms.table("db.t").scan()
    plan = scan.detach_registration()
    assert plan.reader_id is not None and scan.reader_id is None
    compactor.compact("db.t", kind="major")
    del scan  # garbage collection does not end a detached registration
    assert compactor.clean() == []
    assert ms.heartbeat_readers([plan.reader_id]) == []
    assert compactor.clean() == []
    age_reader(ms, plan.reader_id, ms.txn_timeout + 1)
    assert compactor.clean()[0].state == "succeeded"


def test_aborted_directories_and_write_ids(ms: Metastore, compactor: Compactor) -> None:
    """Directories of aborted writes up to the compaction go; an aborted write id is forgotten only once no
    remaining directory can hold its rows (an open batch's delta keeps its aborted txn's id)."""
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1))
    stream(ms, "t", txns(2, commit=False))
    conn = connect(ms, "t", batch=3)
    try:
        for i, commit in ((3, True), (4, False)):
            conn.begin_transaction()
            conn.write_batch(pa.table({"id": [i], "msg": ["batch"]}))
            conn.commit_transaction() if commit else conn.abort_transaction()
        stream(ms, "t", txns(6))  # write id 6, after the batch's open 5
        conn.begin_transaction()  # write id 5: open, holds the batch's delta back
        assert ms.get_valid_write_ids("db.t").aborted_ids == (2, 4)
        compactor.compact("db.t", kind="major")  # of what lies below the open write id 5: delta 1
        compactor.clean()
        assert dirs(ms, "db.t") == ["base_0000001", "delta_0000003_0000005", "delta_0000006_0000006"]
        assert ms.get_valid_write_ids("db.t").aborted_ids == (4,)  # 2's directory is gone; 4 is in the batch
        conn.commit_transaction()
    finally:
        conn.close()
    assert sorted(r[1][0] for r in rows_with_ids(ms, "db.t")) == [1, 3, 6]


def test_dropped_table_and_partition_are_marked_cleaned(ms: Metastore, compactor: Compactor) -> None:
    create(ms, "p", "id int, msg string", "PARTITIONED BY (ds string)")
    for ds in "ab":
        stream(ms, "p", txns(1, 2), static=[ds])
    compactor.compact("db.p", "ds=a", "major")
    compactor.compact("db.p", "ds=b", "major")
    ms.drop_partition("db.p", ["a"])
    shutil.rmtree(Path(ms.table("db.p").location) / "ds=a")
    assert [c.state for c in compactor.clean()] == ["succeeded", "succeeded"]
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2))
    cq = compactor.compact("db.t", kind="major").info.id
    ms.drop_table("db.t")  # takes its queue entries along (Hive's cleanupRecords)
    assert compactor.clean() == []
    assert cq not in [c.id for c in ms.show_compactions()]


def test_never_deletes_what_the_current_snapshot_reads(ms: Metastore, compactor: Compactor) -> None:
    """If the compaction's output vanished (an operator's mistake), its inputs are current again: the cleaner
    refuses, records the failure and deletes nothing."""
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2))
    before = rows_with_ids(ms, "db.t")
    compactor.compact("db.t", kind="major")
    shutil.rmtree(Path(ms.table("db.t").location) / "base_0000002")
    [outcome] = compactor.clean()
    assert outcome.state == "failed" and "refusing to delete" in (outcome.error or "")
    assert dirs(ms, "db.t") == ["delta_0000001_0000001", "delta_0000002_0000002"]
    assert rows_with_ids(ms, "db.t") == before


def test_leftover_tmp_directory_is_removed(ms: Metastore, compactor: Compactor) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2))
    info = compactor.compact("db.t", kind="major").info
    Path(info.meta["tmp"]).mkdir()  # as if the worker died after marking compacted
    compactor.clean()
    assert hidden(ms, "db.t") == []
