"""Merge, update and delete by key, checked against the same operations done in pandas."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest

from acidstream import faults
from acidstream.catalog import Metastore
from acidstream.errors import (
    BucketIdException,
    InvalidObjectException,
    SerializationError,
)
from acidstream.metastore import TxnStatus as MsState
from acidstream.mutate.merge import TableMutation
from acidstream.read.delegating import DelegatingHandler
from support.accounts import ACCOUNTS_DDL, frame, table_frame


@pytest.fixture
def accounts(ms: Metastore) -> str:
    ms.execute(ACCOUNTS_DDL.format("testing.acc"))
    return "testing.acc"


def reference_upsert(
    before: pd.DataFrame, source: pd.DataFrame, delete_missing: bool = False
) -> pd.DataFrame:
    kept = before[~before.id.isin(source.id)]
    if delete_missing:
        kept = kept.iloc[0:0]
    return pd.concat([kept, source]).sort_values("id").reset_index(drop=True)


def test_merge_upsert_equals_pandas(ms: Metastore, accounts: str) -> None:
    table = ms.table(accounts)
    assert table.merge(frame(list(range(100)), "a"), on=["id"]) == {
        "inserted": 100,
        "updated": 0,
        "deleted": 0,
    }
    before = table_frame(ms, accounts)
    rng = np.random.default_rng(7)
    changed = sorted(rng.choice(100, 20, replace=False).tolist())
    source = frame(changed, "b", [f"p{i % 3}" for i in changed])
    source = pd.concat([source, frame(list(range(100, 110)), "new")])
    counts = table.merge(source, on=["id"])
    assert counts == {"inserted": 10, "updated": 20, "deleted": 0}
    pd.testing.assert_frame_equal(table_frame(ms, accounts), reference_upsert(before, source))
    rows = table.scan(columns=["id"], with_row_id=True).to_arrow().to_pylist()
    untouched = {r["id"]: r["ROW__ID"]["writeid"] for r in rows if r["id"] < 100 and r["id"] not in changed}
    assert set(untouched.values()) == {1}  # rows not in the change set keep their ROW__IDs


def test_merge_delete_missing_and_when_matched_delete(ms: Metastore, accounts: str) -> None:
    table = ms.table(accounts)
    table.merge(frame(list(range(30)), "a"), on=["id"])
    source = frame(list(range(20, 40)), "b")
    counts = table.merge(source, on=["id"], when_not_matched_by_source="delete")
    assert counts == {"inserted": 10, "updated": 10, "deleted": 20}
    pd.testing.assert_frame_equal(table_frame(ms, accounts), source.reset_index(drop=True))
    counts = table.merge(
        frame([20, 21, 99], "x")[["id"]], on=["id"], when_matched="delete", when_not_matched=None
    )
    assert counts == {"inserted": 0, "updated": 0, "deleted": 2}
    assert table_frame(ms, accounts).id.tolist() == list(range(22, 40))


def test_merge_keeps_columns_the_source_lacks(ms: Metastore, accounts: str) -> None:
    table = ms.table(accounts)
    table.merge(frame([1, 2], "a"), on=["id"])
    table.merge(pd.DataFrame({"id": [1], "score": [99.0]}), on=["id"], when_not_matched=None)
    df = table_frame(ms, accounts)
    assert df.loc[0, ["name", "score", "p"]].tolist() == ["a1", 99.0, "p1"]


def test_duplicate_source_keys_are_refused_and_nothing_commits(ms: Metastore, accounts: str) -> None:
    table = ms.table(accounts)
    table.merge(frame([1, 2], "a"), on=["id"])
    with pytest.raises(InvalidObjectException, match=r"source rows 0 and 1 both match .*'id': 2"):
        table.merge(frame([2, 2, 3], "b"), on=["id"])
    assert table_frame(ms, accounts).name.tolist() == ["a1", "a2"]
    assert all(t.state is not MsState.OPEN for t in ms.show_txns())


@pytest.mark.parametrize("on", [["id"], ["id", "name"]])
def test_duplicate_unmatched_source_keys_are_refused_too(ms: Metastore, accounts: str, on: list[str]) -> None:
    """One rule for a source's keys, matched or not: each at most once (Hive's MERGE would insert both)."""
    table = ms.table(accounts)
    table.merge(frame([1, 2], "a"), on=["id"])
    source = frame([2, 6, 7, 6], "b")
    with pytest.raises(InvalidObjectException, match=r"source rows 1 and 3 both hold the key \{'id': 6"):
        table.merge(source, on=on)
    with pytest.raises(InvalidObjectException, match="source rows 1 and 3 both hold the key"):
        table.merge(source, on=on, when_matched=None, when_not_matched=None)
    assert table_frame(ms, accounts).name.tolist() == ["a1", "a2"]
    assert all(t.state is not MsState.OPEN for t in ms.show_txns())


def test_rows_never_move(ms: Metastore, accounts: str) -> None:
    table = ms.table(accounts)
    table.merge(frame([1], "a", ["p1"]), on=["id"])
    with pytest.raises(InvalidObjectException, match="move a row from p=p1 to p9"):
        table.merge(frame([1], "b", ["p9"]), on=["id"])
    with pytest.raises(InvalidObjectException, match="bucketed column"):
        table.update(None, {"id": 5})
    with pytest.raises(InvalidObjectException, match="partition key"):
        table.update(None, {"p": "x"})
    ms.execute(
        "CREATE TABLE testing.byname (id bigint, name string) CLUSTERED BY (name) INTO 8 BUCKETS "
        "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    named = ms.table("testing.byname")
    named.merge(pd.DataFrame({"id": list(range(20)), "name": [f"n{i}" for i in range(20)]}), on=["id"])
    with pytest.raises(BucketIdException, match="rows never move between buckets"):
        named.merge(pd.DataFrame({"id": list(range(20)), "name": [f"m{i}" for i in range(20)]}), on=["id"])


def test_update_and_delete_by_filter(ms: Metastore, accounts: str) -> None:
    table = ms.table(accounts)
    table.merge(frame(list(range(10)), "a"), on=["id"])
    counts = table.update(pc.field("id") < 3, {"score": pc.field("score") * 2, "name": "cut"})
    assert counts == {"inserted": 0, "updated": 3, "deleted": 0}
    df = table_frame(ms, accounts)
    assert df.loc[:3, "score"].tolist() == [0.0, 3.0, 6.0, 4.5]
    assert df.loc[:3, "name"].tolist() == ["cut", "cut", "cut", "a3"]
    assert table.delete(pc.field("p") == "p1") == {"inserted": 0, "updated": 0, "deleted": 3}
    assert table_frame(ms, accounts).id.tolist() == [0, 2, 3, 5, 6, 8, 9]
    assert table.delete() == {"inserted": 0, "updated": 0, "deleted": 7}
    assert table_frame(ms, accounts).empty


def test_bad_source_values_name_the_field(ms: Metastore, accounts: str) -> None:
    table = ms.table(accounts)
    with pytest.raises(SerializationError, match="bogus"):
        table.merge(pd.DataFrame({"id": [1], "bogus": [1]}), on=["id"])
    with pytest.raises(SerializationError, match="field 'score'"):
        table.merge(pa.table({"id": [1], "score": ["not a number"], "p": ["x"]}), on=["id"])


def test_a_frame_mixing_types_in_a_column_names_the_value_and_commits_nothing(
    ms: Metastore, accounts: str, warehouse: Path
) -> None:
    table = ms.table(accounts)
    table.merge(frame([1, 2], "a"), on=["id"])
    files = sorted(warehouse.rglob("*"))
    mixed = frame([3, 4, 5], "b").astype({"score": object})
    mixed.loc[2, "score"] = "n/a"
    with pytest.raises(SerializationError, match=r"record 2, field 'score': 'n/a' \(str\) does not fit"):
        table.merge(mixed, on=["id"])
    assert table_frame(ms, accounts).name.tolist() == ["a1", "a2"]
    assert sorted(warehouse.rglob("*")) == files
    assert [t.state for t in ms.show_txns()][-1] is MsState.ABORTED


def test_unbucketed_and_unpartitioned_tables_merge(ms: Metastore) -> None:
    ms.execute(
        "CREATE TABLE testing.plain (id int, v string) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    table = ms.table("testing.plain")
    table.merge(pd.DataFrame({"id": [1, 2, 3], "v": ["a", "b", "c"]}), on=["id"])
    table.merge(pd.DataFrame({"id": [2, 4], "v": ["B", "d"]}), on=["id"], when_not_matched_by_source="delete")
    assert sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 2, "v": "B"},
        {"id": 4, "v": "d"},
    ]


def test_inserts_into_a_new_partition_create_it(ms: Metastore, accounts: str) -> None:
    ms.table(accounts).merge(frame([1, 2], "a", ["x y", None]), on=["id"])
    names = sorted(p.name for p in ms.list_partitions(accounts))
    assert names == ["p=__HIVE_DEFAULT_PARTITION__", "p=x y"]
    assert [None if pd.isna(v) else v for v in table_frame(ms, accounts).p] == ["x y", None]  # pandas 3: NaN


def test_a_commit_adds_only_the_partitions_the_metastore_lacked(
    ms: Metastore, accounts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partitions the txn read from or listed exist: adding them again would only cost a round trip each."""
    ms.table(accounts).merge(frame([1, 2], "a", ["x", "y"]), on=["id"])
    added: list[list[str | None]] = []
    real = ms.add_partition

    def counting(table: str, values: list[str | None], **kwargs: bool) -> object:
        added.append(list(values))
        return real(table, values, **kwargs)

    monkeypatch.setattr(ms, "add_partition", counting)
    # updates in x and y, an insert into the new z
    ms.table(accounts).merge(frame([1, 2, 3], "b", ["x", "y", "z"]), on=["id"])
    assert added == [["z"]]
    assert table_frame(ms, accounts).sort_values("id").p.tolist() == ["x", "y", "z"]


def concurrent_updates(ms: Metastore, name: str, b_id: int) -> BaseException | dict[str, int]:
    """A (id 1) holds the lock when B (``b_id``) opens; A commits an update first, then B runs."""
    table = ms.table(name)
    a = TableMutation(ms, name).__enter__()
    outcome: list[BaseException | dict[str, int]] = []

    def run_b() -> None:
        try:
            outcome.append(table.update(pc.field("id") == b_id, {"name": "B"}))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run_b)
    thread.start()
    try:
        target, parts = a.read_target(["id", "name", "score", "p"], pc.field("id") == 1)
        a.write([a.with_op(_new_name(target, "A"), 1)], parts)
        a.commit()
    finally:
        a.__exit__(None, None, None)
        thread.join(timeout=60)
    return outcome[0]


def test_a_writer_that_waited_for_the_lock_starts_over_and_commits(ms: Metastore, accounts: str) -> None:
    """B waits for A's lock; A commits an update of B's partition meanwhile, so B's txn (opened before A's
    commit) would lose its commit. B starts over in a new txn instead, reads after A, and commits (as Hive 4
    re-plans a statement whose snapshot went stale while it waited)."""
    ms.table(accounts).merge(frame([1, 2], "a", ["p0", "p0"]), on=["id"])
    assert concurrent_updates(ms, accounts, 2) == {"inserted": 0, "updated": 1, "deleted": 0}
    assert table_frame(ms, accounts).name.tolist() == ["A", "B"]
    assert not any(t.state.name == "OPEN" for t in ms.show_txns())


def test_concurrent_updates_of_different_partitions_both_commit(ms: Metastore, accounts: str) -> None:
    ms.table(accounts).merge(frame([1, 2], "a", ["p0", "p1"]), on=["id"])
    assert concurrent_updates(ms, accounts, 2) == {"inserted": 0, "updated": 1, "deleted": 0}
    assert table_frame(ms, accounts).name.tolist() == ["A", "B"]


def _new_name(target: pa.Table, name: str) -> pa.Table:
    idx = target.schema.get_field_index("name")
    return target.set_column(idx, "name", pa.array([name] * target.num_rows))


class _Rendezvous(DelegatingHandler):
    """A store that is not a local disk (as HDFS and S3 are not) whose data files, when closed, wait (up to a
    minute) until another data file is being closed too: ``together`` is set if two ever were."""

    def __init__(self, base: pafs.FileSystem) -> None:
        super().__init__(base)
        self.together = threading.Event()
        self._closing = 0
        self._lock = threading.Lock()

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        stream = self._base.open_output_stream(path)
        return stream if "/bucket_" not in path else pa.PythonFile(_Closing(stream, self), mode="w")

    def closing(self, stream: pa.NativeFile) -> None:
        with self._lock:
            self._closing += 1
            if self._closing > 1:
                self.together.set()
        self.together.wait(60)
        try:
            stream.close()
        finally:
            with self._lock:
                self._closing -= 1


class _Closing(io.RawIOBase):
    """A data file of a :class:`_Rendezvous` store."""

    def __init__(self, stream: pa.NativeFile, store: _Rendezvous) -> None:
        super().__init__()
        self.stream, self.store = stream, store

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return int(self.stream.write(data))

    def close(self) -> None:
        if not self.closed:
            self.store.closing(self.stream)
            super().close()


def test_a_merge_on_a_remote_store_closes_its_files_side_by_side(ms: Metastore, accounts: str) -> None:
    """On a store where closing a file sends it (HDFS, S3: a round trip or two each), the files a merge
    writes are closed side by side, not one after another; the merge is as exact."""
    ms.table(accounts).merge(frame(list(range(40)), "a"), on=["id"])
    before = table_frame(ms, accounts)
    source = frame(list(range(0, 40, 3)), "b")
    store: list[_Rendezvous] = []

    def remote(fs: pafs.FileSystem) -> pafs.FileSystem:
        store.append(_Rendezvous(fs))
        return pafs.PyFileSystem(store[-1])

    with faults.armed("storage.filesystem", remote):
        assert ms.table(accounts).merge(source, on=["id"]) == {"inserted": 0, "updated": 14, "deleted": 0}
    assert any(s.together.is_set() for s in store)
    pd.testing.assert_frame_equal(table_frame(ms, accounts), reference_upsert(before, source))
