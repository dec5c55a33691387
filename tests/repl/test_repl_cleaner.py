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
from acidstream.errors import ReplicationError
from acidstream.metastore.replops import POLICY_PROPERTY
from acidstream.repl.sync import follower_name

TABLE = "default.t"


def _stream(ms: Metastore, first: int, txns: int, table: str = TABLE) -> None:
    with stream(ms, table) as conn:
        for i in range(txns):
            conn.begin_transaction()
            conn.write_batch(pa.table({"id": [first + i], "msg": [f"m{first + i}"]}))
            conn.commit_transaction()


def _create(ms: Metastore, name: str, properties: str = "") -> None:
    ms.execute(
        f"CREATE TABLE {name} (id int, msg string) STORED AS ORC "
        f"TBLPROPERTIES ('transactional'='true'{properties})"
    )


@pytest.fixture
def table(source: Metastore) -> str:
    _create(source, TABLE)
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


def test_a_newer_bootstrap_dump_replaces_what_the_replica_holds(
    source: Metastore, replica: Metastore, table: str, tmp_path: Path
) -> None:
    """The user story: a replica fed by dumps falls behind a source whose cleaner went on without it; a new
    bootstrap dump loaded into it replaces its tables, drops those the source no longer has, and the incremental
    dumps from the new bootstrap's event apply on top."""
    source.execute("CREATE TABLE gone (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
    source.execute("CREATE DATABASE old")
    source.execute("CREATE TABLE old.t (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
    dumps = str(tmp_path / "dumps")
    last = repl.dump(source, dumps).last_event_id
    repl.load(replica, dumps)
    _stream(source, 0, 3)
    last = repl.dump(source, dumps, from_event=last).last_event_id
    repl.load(replica, dumps)
    old_location = replica.table(table).location
    old_files = [str(p) for p in Path(old_location).rglob("bucket_*")]
    assert old_files and all(replica.repl_file_state(p) for p in old_files)
    _stream(source, 10, 3)
    source.repl_follower_progress(repl.dump_follower_name(dumps), 0, lease=0)  # its lease runs out
    source.compact(table, kind="major", wait=True)
    assert _clean(source)  # the deltas the dumps never copied are gone
    source.execute("DROP TABLE gone")
    source.execute("DROP DATABASE old CASCADE")
    source.execute("CREATE TABLE fresh (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
    newer = repl.dump(source, dumps)  # a new bootstrap
    at_dump = view(source, [table, "default.fresh"])
    _stream(source, 20, 2)  # after the dump's snapshot: not in it
    result = repl.load(replica, dumps, cleaner_retention=0)
    assert result.bootstrapped and result.skipped == []
    assert result.replaced == ["default.fresh", table] and result.dropped == ["default.gone", "old.t"]
    assert replica.repl_state("default").last_event_id == newer.last_event_id
    assert view(replica, [table, "default.fresh"]) == at_dump
    assert replica.list_tables("default") == ["fresh", "t"] and replica.list_databases() == ["default"]
    assert replica.get_valid_write_ids(table).high_watermark == 6  # the source's write ids, none left over
    assert not os.path.exists(old_location)  # no replica reader: the old copy went at the load's cleaning
    assert not any(replica.repl_file_state(p) for p in old_files)
    repl.dump(source, dumps, from_event=newer.last_event_id)
    repl.load(replica, dumps)
    assert view(replica, [table]) == view(source, [table])
    assert repl.load(replica, dumps).skipped == []  # the replica's own bootstrap dumps pass quietly


def test_a_newer_bootstrap_aborts_the_replicated_txns_it_does_not_carry(
    source: Metastore, replica: Metastore, table: str, tmp_path: Path
) -> None:
    """Replicated txns never time out on a replica: those the source ended while the replica was away must end
    there too; those still open on the source stay open, mapped to the same replica txns."""
    ended, still = source.open_txns(2)
    source.allocate_table_write_ids([ended, still], table)
    dumps = str(tmp_path / "dumps")
    repl.dump(source, dumps, open_txn_timeout=0)  # both carried as open
    repl.load(replica, dumps)
    mapped = replica.repl_target_txns("default", [ended, still])
    assert set(replica.get_open_txns().open_ids) >= set(mapped.values())
    source.abort_txns([ended])
    _stream(source, 0, 2)
    newer = repl.dump(source, dumps, open_txn_timeout=0)
    repl.load(replica, dumps)
    open_ids = set(replica.get_open_txns().open_ids)
    assert mapped[ended] not in open_ids and mapped[still] in open_ids
    assert replica.repl_target_txns("default", [still]) == {still: mapped[still]}
    assert view(replica, [table]) == view(source, [table])
    source.commit_txn(still)
    _stream(source, 10, 1)
    repl.dump(source, dumps, from_event=newer.last_event_id)
    repl.load(replica, dumps)
    assert mapped[still] not in set(replica.get_open_txns().open_ids)
    assert view(replica, [table]) == view(source, [table])


def test_replica_readers_keep_the_replaced_copy(
    source: Metastore, replica: Metastore, table: str, tmp_path: Path
) -> None:
    """A scan registered on the replica before a newer bootstrap keeps the old copy's files until it ends."""
    dumps = str(tmp_path / "dumps")
    last = repl.dump(source, dumps).last_event_id
    repl.load(replica, dumps)
    _stream(source, 0, 2)
    repl.dump(source, dumps, from_event=last)
    repl.load(replica, dumps)
    old_location = replica.table(table).location
    reader = replica.register_reader(table)
    _stream(source, 10, 2)
    repl.dump(source, dumps)
    repl.load(replica, dumps, cleaner_retention=0)
    assert os.path.isdir(old_location)
    assert view(replica, [table]) == view(source, [table])
    replica.unregister_reader(reader.reader_id)
    repl.load(replica, dumps, cleaner_retention=0)
    assert not os.path.exists(old_location)


def test_an_older_bootstrap_dump_is_skipped(
    source: Metastore, replica: Metastore, table: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A bootstrap dump behind the replica's last event would take it back: it is skipped, with a warning."""
    dumps, other = str(tmp_path / "dumps"), str(tmp_path / "other")
    last = repl.dump(source, dumps).last_event_id
    repl.load(replica, dumps)
    _stream(source, 0, 2)
    older = repl.dump(source, other)
    _stream(source, 10, 2)
    repl.dump(source, dumps, from_event=last)
    repl.load(replica, dumps)
    want = view(source, [table])
    with caplog.at_level(logging.WARNING, logger="acidstream.repl"):
        result = repl.load(replica, other)
    assert result.skipped == [older.path] and not result.bootstrapped
    assert any("skipping bootstrap dump" in r.getMessage() for r in caplog.records)
    assert view(replica, [table]) == want


def test_a_replaced_table_dropped_later_takes_its_old_copy_along(
    source: Metastore, replica: Metastore, table: str, tmp_path: Path
) -> None:
    """The old copy a replica reader held back goes with the table when the source drops it: a table created
    again under its name never finds the old copy's directories."""
    dumps = str(tmp_path / "dumps")
    last = repl.dump(source, dumps).last_event_id
    repl.load(replica, dumps)
    _stream(source, 0, 2)
    repl.dump(source, dumps, from_event=last)
    repl.load(replica, dumps)
    old_location = replica.table(table).location
    replica.register_reader(table)  # never ends: only the drop deletes the old copy
    _stream(source, 10, 1)
    newer = repl.dump(source, dumps).last_event_id
    repl.load(replica, dumps, cleaner_retention=0)
    new_location = replica.table(table).location
    assert new_location != old_location and os.path.isdir(old_location) and os.path.isdir(new_location)
    source.execute(f"DROP TABLE {table}")
    repl.dump(source, dumps, from_event=newer)
    repl.load(replica, dumps, cleaner_retention=0)
    assert replica.list_tables("default") == []
    assert not os.path.exists(old_location) and not os.path.exists(new_location)


def test_a_newer_bootstrap_keeps_the_replicas_own_tables(
    source: Metastore, replica: Metastore, table: str, tmp_path: Path
) -> None:
    """Only what this policy replicated is replaced: tables made on the replica itself, in a replicated database
    or in one of its own, keep their rows; a source that is itself a replica does not lend its mark."""
    upstream = f", '{POLICY_PROPERTY}'='upstream'"
    _create(source, "default.relayed", upstream)
    dumps = str(tmp_path / "dumps")
    last = repl.dump(source, dumps).last_event_id
    repl.load(replica, dumps)
    _create(source, "default.evented", upstream)
    source.execute(f"ALTER TABLE default.relayed SET TBLPROPERTIES ('{POLICY_PROPERTY}'='upstream')")
    repl.dump(source, dumps, from_event=last)
    repl.load(replica, dumps)
    for name in (table, "default.relayed", "default.evented"):
        assert replica.table(name).properties[POLICY_PROPERTY] == "default"
    replica.execute("CREATE DATABASE mine")
    own = ["default.local", "mine.local"]
    for i, name in enumerate(own):
        _create(replica, name)
        _stream(replica, 10 * i, 2, name)
    kept = view(replica, own)
    _stream(source, 0, 2)
    result = repl.load(replica, repl.dump(source, dumps).path)  # a newer bootstrap
    assert result.bootstrapped
    assert result.replaced == ["default.evented", "default.relayed", table] and result.dropped == []
    assert view(replica, own) == kept and view(replica, [table]) == view(source, [table])
    assert replica.list_databases() == ["default", "mine"]
    assert replica.list_tables("default") == ["evented", "local", "relayed", "t"]


def test_a_newer_bootstrap_refuses_to_replace_a_local_table(
    source: Metastore, replica: Metastore, table: str, tmp_path: Path
) -> None:
    """A table made on the replica under a name the newer bootstrap carries is not this policy's to replace:
    the load is refused, naming it, before anything changes."""
    dumps = str(tmp_path / "dumps")
    repl.dump(source, dumps)
    repl.load(replica, dumps)
    _create(replica, "default.clash")
    _stream(replica, 0, 2, "default.clash")
    before = view(replica, [table, "default.clash"])
    last = replica.repl_state("default").last_event_id
    _create(source, "default.clash")
    _stream(source, 10, 2)
    newer = repl.dump(source, dumps)
    with pytest.raises(
        ReplicationError, match=r"carries default\.clash, which the replica .* did not create"
    ):
        repl.load(replica, newer.path)
    assert view(replica, [table, "default.clash"]) == before
    assert replica.repl_state("default").last_event_id == last
    assert POLICY_PROPERTY not in replica.table("default.clash").properties
    assert not list(Path(replica.table(table).location).parent.glob(f"*-{newer.last_event_id:012d}"))
