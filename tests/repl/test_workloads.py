"""Random workloads replicated event by event (sync) and through dumps (dump/load): streaming batches with
commits and aborts, updates and deletes, major and minor compactions with their cleaning."""

from __future__ import annotations

from pathlib import Path

import pytest
from replhelpers import Timeline, stream, view
from workload import TABLES, create_tables, run_workload

from acidstream import repl
from acidstream.catalog import Metastore


@pytest.mark.parametrize("seed", [1, 2])
def test_random_workload_event_by_event(source: Metastore, replica: Metastore, seed: int) -> None:
    create_tables(source)
    repl.sync(source, replica)
    timeline = Timeline(source, TABLES)
    timeline.record()
    run_workload(source, seed, 14, timeline.record)
    assert timeline.replay_checking(replica) > 0
    assert view(replica, TABLES) == view(source, TABLES)


def test_dump_and_load(source: Metastore, replica: Metastore, tmp_path: Path) -> None:
    """Bootstrap dump in the middle of the workload (a batch open), then incremental dumps after it."""
    create_tables(source)
    run_workload(source, 3, 6, lambda: None)
    dumps = tmp_path / "dumps"
    info = repl.dump(source, str(dumps))
    assert info.kind == "bootstrap"
    assert repl.load(replica, str(dumps)).bootstrapped
    assert view(replica, TABLES) == view(source, TABLES)
    last = info.last_event_id
    for round_seed in (4, 5):
        run_workload(source, round_seed, 6, lambda: None)
        info = repl.dump(source, str(dumps), from_event=last)
        assert info.kind == "incremental" and info.first_event_id == last + 1
        result = repl.load(replica, str(dumps))
        assert result.last_event_id == info.last_event_id == source.current_notification_event_id()
        last = info.last_event_id
        assert view(replica, TABLES) == view(source, TABLES)
    status = repl.status(replica, source)
    assert status is not None and status.lag_events == 0 and status.last_event_id == last
    assert repl.load(replica, str(dumps)).events_applied == 0  # loaded already: nothing again


def test_byte_ranges_not_whole_files(source: Metastore, replica: Metastore) -> None:
    """A batch of 10 commits copies each commit's new range: about the bytes written, not 10 growing files."""

    create_tables(source)
    repl.sync(source, replica)
    conn = stream(source, "db.flat", 10)
    copied = 0
    for txn in range(10):
        conn.begin_transaction()
        for i in range(500):
            conn.write(f"{txn * 1000 + i},row {i} of txn {txn}".encode())
        conn.commit_transaction()
        copied += repl.sync(source, replica).stats.bytes_copied
    conn.close()
    written = sum(p.stat().st_size for p in Path(source.table("db.flat").location).rglob("bucket_0000?"))
    assert written <= copied <= written * 1.05
    assert view(replica, TABLES) == view(source, TABLES)


def test_files_named_without_description(source: Metastore, replica: Metastore, tmp_path: Path) -> None:
    """An ACID_WRITE naming files by path only (a writer that does not describe them) still replicates, live
    and through a dump: the file is copied whole as it is."""

    create_tables(source)
    repl.sync(source, replica)
    second = Metastore.connect(f"sqlite:///{tmp_path / 'second.db'}", warehouse=tmp_path / "second-wh")
    dumps = str(tmp_path / "dumps")
    last = repl.dump(source, dumps).last_event_id
    repl.load(second, dumps)
    with stream(source, "db.flat", write_notifications=False) as conn:
        conn.begin_transaction()
        conn.write(b"1,one")
        conn.commit_transaction()
    txn = source.open_txns()[0]
    wid = source.allocate_table_write_ids([txn], "db.flat")[0][1]
    files = [str(p) for p in Path(source.table("db.flat").location).rglob("bucket_0000?")]
    source.add_write_notification(txn, wid, "db.flat", None, files)  # by path only
    source.commit_txn(txn)
    repl.sync(source, replica)
    assert view(replica, TABLES) == view(source, TABLES)
    repl.dump(source, dumps, from_event=last)
    repl.load(second, dumps)
    assert view(second, TABLES) == view(source, TABLES)
    second.close()
