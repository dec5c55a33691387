"""The source's cleaner and its followers: a compaction's inputs stay until every live follower has applied the
compaction; a follower that was away longer than its lease finds files gone and copies the partition again."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pyarrow as pa
import pytest
from replhelpers import stream, view

from acidstream import repl
from acidstream.catalog import Metastore
from acidstream.compactor import Cleaner, CompactorConfig
from acidstream.repl.sync import follower_name

TABLE = "default.t"


def _stream(ms: Metastore, first: int, txns: int) -> None:
    with stream(ms, "default.t") as conn:
        for i in range(txns):
            conn.begin_transaction()
            conn.write_batch(pa.table({"id": [first + i], "msg": [f"m{first + i}"]}))
            conn.commit_transaction()


@pytest.fixture
def table(source: Metastore) -> str:
    source.execute(
        f"CREATE TABLE {TABLE} (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    return TABLE


def _clean(ms: Metastore) -> list[str]:
    return [name for o in Cleaner(ms, CompactorConfig(retention=0)).run_once() for name in o.removed]


def test_cleaner_waits_for_followers(source: Metastore, replica: Metastore, table: str) -> None:
    repl.sync(source, replica)
    _stream(source, 0, 3)
    source.compact(table, kind="major", wait=True)
    assert _clean(source) == []  # the follower has not applied the compaction: its inputs stay
    applied = repl.sync(source, replica, cleaner_retention=0)  # no replica reader: its inputs go there
    removed = _clean(source)
    assert removed and all(name.startswith("delta_") for name in removed)
    assert sorted(applied.cleaned) == sorted(f"{table}/{name}" for name in removed)
    repl.sync(source, replica, cleaner_retention=0)
    assert view(replica, [table]) == view(source, [table])
    assert not set(removed) & set(os.listdir(replica.table(table).location))


def test_replica_readers_keep_replaced_inputs(source: Metastore, replica: Metastore, table: str) -> None:
    """A scan registered on the replica before a replicated compaction keeps its inputs there."""
    repl.sync(source, replica)
    _stream(source, 0, 3)
    repl.sync(source, replica)
    reader = replica.register_reader(table)
    source.compact(table, kind="major", wait=True)
    result = repl.sync(source, replica, cleaner_retention=0)
    assert result.cleaned == []  # the reader might still list the deltas
    replica.unregister_reader(reader.reader_id)
    result = repl.sync(source, replica, cleaner_retention=0)
    assert len(result.cleaned) == 3
    assert view(replica, [table]) == view(source, [table])


def test_follower_gone_too_long_bootstraps_the_partition_again(
    source: Metastore, replica: Metastore, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    repl.sync(source, replica)
    _stream(source, 0, 3)
    source.repl_follower_progress(follower_name(replica, "default"), 0, lease=0)  # its lease runs out
    source.compact(table, kind="major", wait=True)
    assert _clean(source)  # nobody holds the cleaner back: the deltas the follower never copied are gone
    with caplog.at_level(logging.WARNING, logger="acidstream.repl"):
        result = repl.sync(source, replica)
    assert result.rebootstrapped == [table]
    assert any("bootstrapping default.t again" in r.getMessage() for r in caplog.records)
    assert view(replica, [table]) == view(source, [table])
    _stream(source, 10, 2)
    repl.sync(source, replica)
    assert view(replica, [table]) == view(source, [table])


def test_cleaner_waits_for_dump_followers(
    source: Metastore, replica: Metastore, table: str, tmp_path: Path
) -> None:
    """A replica fed by dumps holds the source's cleaner back as a sync replica does: what the next dump copies
    stays until a dump holds it."""
    dumps = str(tmp_path / "dumps")
    last = repl.dump(source, dumps).last_event_id
    repl.load(replica, dumps)
    _stream(source, 0, 12)
    source.compact(table, kind="major", wait=True)
    assert _clean(source) == []  # the dump follower has not dumped the deltas yet
    last = repl.dump(source, dumps, from_event=last).last_event_id
    assert _clean(source)  # the dump holds them now
    repl.load(replica, dumps)
    assert view(replica, [table]) == view(source, [table])
    _stream(source, 100, 2)
    repl.dump(source, dumps, from_event=last)
    repl.load(replica, dumps)
    assert view(replica, [table]) == view(source, [table])


def test_dump_of_cleaned_files_dumps_the_partition_whole(
    source: Metastore, replica: Metastore, table: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Files cleaned before a dump follower existed (or after its lease ran out) are no dead end: the dump takes
    their partition's current files, and the load bootstraps that partition again from them."""
    dumps = str(tmp_path / "dumps")
    last = repl.dump(source, dumps).last_event_id
    repl.load(replica, dumps)
    _stream(source, 0, 12)
    source.repl_follower_progress(repl.dump_follower_name(dumps), 0, lease=0)  # its lease runs out
    source.compact(table, kind="major", wait=True)
    assert _clean(source)  # the deltas the dumps never copied are gone
    with caplog.at_level(logging.WARNING, logger="acidstream.repl"):
        last = repl.dump(source, dumps, from_event=last).last_event_id
        result = repl.load(replica, dumps)
    assert any("is gone" in r.getMessage() for r in caplog.records)
    assert result.rebootstrapped == [table]
    assert view(replica, [table]) == view(source, [table])
    _stream(source, 100, 2)
    repl.dump(source, dumps, from_event=last)
    repl.load(replica, dumps)
    assert view(replica, [table]) == view(source, [table])


def test_a_newer_bootstrap_dump_is_not_loaded_silently(
    source: Metastore, replica: Metastore, table: str, tmp_path: Path
) -> None:
    dumps = str(tmp_path / "dumps")
    repl.dump(source, dumps)
    repl.load(replica, dumps)
    _stream(source, 0, 2)
    newer = repl.dump(source, dumps)
    result = repl.load(replica, dumps)
    assert result.skipped == [newer.path]
