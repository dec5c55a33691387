"""A merge split by bucket over forked worker processes (``merge(..., workers=N)``): the same rows as the merge
in one process, and a worker's failure or death failing the whole merge with nothing committed."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mutatehelpers import each_split_action

from acidstream.acid.codec import BucketCodec
from acidstream.catalog import Metastore
from acidstream.errors import InvalidObjectException, StreamingIOFailure, TxnAbortedException, WorkerException
from acidstream.faults import FAULTS_ENV
from acidstream.metastore import TxnStatus
from acidstream.mutate import forked, forkserver
from acidstream.mutate.bucket_merge import BucketMerge
from acidstream.mutate.changes import MergeActions
from acidstream.mutate.forkserver import fork_server
from acidstream.mutate.merge import TableMutation, merge
from support.accounts import ACCOUNTS_DDL, frame, table_frame


def statements(ms: Metastore, table: str, write_id: int = 2) -> set[int]:
    """Statement ids of the ROW__IDs of the table's rows written by the merge of ``write_id``."""
    ids = ms.table(table).scan(columns=[], with_row_id=True).to_arrow().column("ROW__ID").to_pylist()
    return {BucketCodec.V1.decode_statement_id(r["bucketid"]) for r in ids if r["writeid"] == write_id}


def loaded(ms: Metastore, name: str) -> str:
    table = f"testing.{name}"
    ms.execute(ACCOUNTS_DDL.format(table))
    ms.table(table).merge(frame(list(range(200)), "a"), on=["id"], workers=1)
    return table


def changes() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    updated = sorted(rng.choice(200, 60, replace=False).tolist())
    return pd.concat([frame(updated, "b"), frame(list(range(200, 230)), "n"), frame([300], "n", ["p_new"])])


@each_split_action
def test_a_merge_in_forked_workers_equals_the_merge_in_one_process(
    ms: Metastore, actions: MergeActions
) -> None:
    forked_table, whole = loaded(ms, "forked"), loaded(ms, "whole")
    kwargs = {"when_matched": actions.when_matched, "when_not_matched": actions.when_not_matched}
    counts = merge(ms, forked_table, changes(), ["id"], workers=3, **kwargs)  # type: ignore[arg-type]
    expected = merge(ms, whole, changes(), ["id"], workers=1, **kwargs)  # type: ignore[arg-type]
    assert counts == expected and sum(counts.values()) > 0
    pd.testing.assert_frame_equal(table_frame(ms, forked_table), table_frame(ms, whole))
    if actions.when_matched != "delete":
        assert statements(ms, forked_table) == {0, 1, 2}  # this process and two forked workers wrote rows
        assert statements(ms, whole) == {0}
    assert sorted(p.values for p in ms.list_partitions(forked_table)) == sorted(
        p.values for p in ms.list_partitions(whole)
    )


@pytest.mark.parametrize(
    ("fault", "raised", "words"),
    [
        ("oserror:EIO", StreamingIOFailure, r"Input/output error \(injected\)"),
        ("kill", WorkerException, "killed by signal 9"),
    ],
    ids=["raises", "killed"],
)
def test_a_worker_that_fails_or_dies_fails_the_merge_and_nothing_commits(
    ms: Metastore, monkeypatch: pytest.MonkeyPatch, fault: str, raised: type[Exception], words: str
) -> None:
    """The fault fires in the workers only: they take their faults from the merging process's environment at
    each merge, and this process read its own at import."""
    table = loaded(ms, "failing")
    before = table_frame(ms, table)
    monkeypatch.setenv(FAULTS_ENV, f"orc.flush.tail={fault}")
    with pytest.raises(raised, match=words):
        merge(ms, table, changes(), ["id"], workers=2)
    pd.testing.assert_frame_equal(table_frame(ms, table), before)
    assert not [t for t in ms.show_txns() if t.state is TxnStatus.OPEN]
    monkeypatch.undo()
    assert sum(merge(ms, table, changes(), ["id"], workers=2).values()) > 0  # the table takes merges after


def test_duplicate_source_keys_in_a_workers_buckets_are_the_same_typed_error(ms: Metastore) -> None:
    table = loaded(ms, "dup")
    source = frame([3, 5, 7, 11, 3, 5, 7, 11], "b")  # one duplicate in each of several buckets
    with pytest.raises(InvalidObjectException, match="both match the target row"):
        merge(ms, table, source, ["id"], workers=4)
    assert table_frame(ms, table).name.tolist() == [f"a{i}" for i in range(200)]


def test_how_many_workers(ms: Metastore, monkeypatch: pytest.MonkeyPatch) -> None:
    table = loaded(ms, "count")
    with TableMutation(ms, table) as m:
        with m.scan(["id"]) as scan:
            plan = scan.plan_files()
            split = BucketMerge(
                m.changes, MergeActions(), ("id",), ("id",), plan.write_ids, plan.tasks, m.known_partitions()
            )
        location = m.table.location
        assert forked.merge_workers(None, split, location) == 1  # a small table stays in one process
        assert forked.merge_workers(3, split, location) == 3
        assert forked.merge_workers(16, split, location) == 4  # never more workers than buckets
        monkeypatch.setattr(forked, "FORK_MIN_BYTES", 0)
        fork_server().ready(wait=True)  # a merge asking for no number uses workers once the server is up
        assert forked.merge_workers(None, split, location) == min(os.cpu_count() or 1, 4)
        assert forked.merge_workers(1, split, location) == 1
        with pytest.raises(ValueError, match="at least 1"):
            forked.merge_workers(0, split, location)


def _statement_dirs(ms: Metastore, table: str, statement: int) -> list[str]:
    """Delta and delete-delta directories of ``statement`` in the table's partitions."""
    root = Path(ms.table(table).location)
    return sorted(str(d.relative_to(root)) for d in root.glob(f"*/*delta_*_{statement:04d}"))


def test_a_worker_whose_txn_is_aborted_stops_and_deletes_what_it_wrote(
    ms: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Aborted while the worker closes its files (an operator, or a txn timeout): the cleaner may have removed
    the txn's directories already, so the worker removes its own instead of leaving them to be read."""
    table = loaded(ms, "aborted")
    before = table_frame(ms, table)
    monkeypatch.setenv(FAULTS_ENV, "orc.flush.tail=sleep:2@1")  # the worker's first file, then the rest
    failure: list[BaseException] = []

    def merging() -> None:
        try:
            merge(ms, table, changes(), ["id"], workers=2)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=merging)
    thread.start()
    deadline = time.monotonic() + 30
    while not _statement_dirs(ms, table, 1) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _statement_dirs(ms, table, 1), "the worker wrote nothing"
    ms.abort_txns([t.txn_id for t in ms.show_txns() if t.state is TxnStatus.OPEN])
    thread.join(30)
    assert len(failure) == 1 and isinstance(failure[0], TxnAbortedException), failure
    assert "its merge worker stopped" in str(failure[0])
    assert _statement_dirs(ms, table, 1) == []
    pd.testing.assert_frame_equal(table_frame(ms, table), before)
    monkeypatch.undo()
    assert sum(merge(ms, table, changes(), ["id"], workers=2).values()) > 0


def test_workers_are_never_forks_of_this_threaded_process(
    ms: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers' parent is the fork server, which runs no thread: a lock held by another thread of this
    process (the heartbeat, the pools) at a fork would stay held in the worker forever."""
    table = loaded(ms, "server")
    server = fork_server()
    server.ready(wait=True)
    assert os.listdir(f"/proc/{server.pid}/task") == [str(server.pid)]

    def refuse() -> int:
        raise AssertionError("os.fork of the merging process")

    monkeypatch.setattr(os, "fork", refuse)
    assert sum(merge(ms, table, changes(), ["id"], workers=2).values()) > 0
    assert statements(ms, table) == {0, 1}
    assert fork_server() is server


def test_a_server_that_cannot_start_fails_a_merge_that_asked_for_workers_only(
    ms: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = loaded(ms, "broken")
    monkeypatch.setattr(forkserver, "_server", None)
    monkeypatch.setattr(sys, "executable", "/bin/false")  # the server's interpreter: it exits at once
    monkeypatch.setattr(forked, "FORK_MIN_BYTES", 0)
    with pytest.raises(WorkerException, match="server failed to start \\(exit status 1\\)"):
        merge(ms, table, changes(), ["id"], workers=2)
    assert sum(merge(ms, table, changes(), ["id"]).values()) > 0  # asked for no number: one process
    assert statements(ms, table, write_id=3) == {0}  # write id 2: the failed merge
