"""Transaction batches larger than one on S3: each txn of the batch writes its own ``delta_w_w``, complete and
closed before its commit (docs/s3.md, Transaction batches).

Each commit is visible at once and only its own rows; an aborted txn's rows never are; a ``kill -9`` in the
middle of a batch leaves the committed txns readable; the compactor, its cleaner and replication take the
layout as they take batches of one.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter, repl
from acidstream.acid.writeids import ValidTxnList
from acidstream.compactor import Cleaner, CompactorConfig
from acidstream.errors import StreamingConnectionError
from support.streamcheck import Ledger, check_table, create_table, start_writer, stream

DDL = (
    "CREATE TABLE sales (id int, amount bigint) PARTITIONED BY (region string) "
    "CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
)
#: the writer's flushes: a kill finds rows of its open txn already sent (in uploads not completed)
KILL_CONFIG = {"max_buffered_bytes": 2 << 10, "parse_batch_records": 100}
REGIONS = ("eu", "us")
#: flush every insert: rows of the open txn are already in its files (on S3: in their unfinished uploads)
FLUSH_ALWAYS = {"max_buffered_bytes": 0}


@pytest.fixture
def ms(tmp_path: Path, s3_warehouse: str) -> Iterator[Metastore]:
    """SQLite only: the layout does not depend on the metastore, and S3 round trips are slow enough."""
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=s3_warehouse) as m:
        m.execute(DDL)
        yield m


def _connect(ms: Metastore, batch: int, config: dict[str, Any] | None = None) -> StreamingConnection:
    return (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("default")
        .with_table("sales")
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .with_transaction_batch_size(batch)
        .with_configuration(config or FLUSH_ALWAYS)
        .connect()
    )


def _write(conn: StreamingConnection, n: int) -> list[int]:
    """Rows of txn ``n`` in each region (dynamic partitions): their ids."""
    ids = [n * 10 + i for i in range(len(REGIONS))]
    for i in ids:
        conn.write(f"{i},{i * 100},{REGIONS[i % len(REGIONS)]}".encode())
    return ids


def _ids(ms: Metastore, snapshot: ValidTxnList | None = None) -> list[int]:
    ids = ms.table("sales").scan(snapshot=snapshot).to_arrow().column("id").to_pylist()
    assert len(ids) == len(set(ids)), "a row is visible twice"
    return sorted(ids)


def _listing(ms: Metastore) -> dict[str, list[str]]:
    """Per partition, its directories with their files (``delta_x/bucket_00000``) and its other entries."""
    fs, root = pafs.FileSystem.from_uri(ms.table("sales").location)
    out: dict[str, list[str]] = {}
    for region in REGIONS:
        where = f"{root}/region={region}"
        infos = fs.get_file_info(pafs.FileSelector(where, recursive=True, allow_not_found=True))
        out[region] = sorted(i.path[len(where) + 1 :] for i in infos if i.type == pafs.FileType.File)
    return out


def test_a_batch_of_ten_with_commits_and_aborts_interleaved(ms: Metastore) -> None:
    conn = _connect(ms, 10)
    committed: list[int] = []
    seen: list[tuple[ValidTxnList, list[int]]] = []  # each snapshot with what it showed then
    aborted = {2, 3, 7}
    for n in range(10):
        conn.begin_transaction()
        ids = _write(conn, n)
        if n % 3 == 0:  # its rows are in its files already (flushed), not in a snapshot
            assert _ids(ms) == sorted(committed), f"txn {n}: rows of an open txn are visible"
        if n in aborted:
            conn.abort_transaction()
        else:
            conn.commit_transaction()
            committed += ids
        snap = ms.snapshot()
        assert _ids(ms, snap) == sorted(committed), f"after txn {n}: not exactly the committed prefix"
        seen.append((snap, sorted(committed)))
    conn.begin_transaction()  # the next batch's first txn, left open with its rows written
    _write(conn, 10)
    try:
        assert conn.stats()["batches_opened"] == 2
        for snap, expected in seen[::4]:  # earlier snapshots still show what they showed
            assert _ids(ms, snap) == expected
        assert _ids(ms) == sorted(committed)
        listing = _listing(ms)
    finally:
        conn.close()
    assert _ids(ms) == sorted(committed)
    for region, files in listing.items():
        assert not [f for f in files if f.endswith("_flush_length")], region
        with_data = {f.split("/")[0] for f in files if "/bucket_" in f}
        # one complete delta per committed txn and partition; aborted txns left no data
        assert with_data == {f"delta_{w:07d}_{w:07d}" for w in range(1, 11) if w - 1 not in aborted}, region


def test_compaction_during_and_after_a_batch(ms: Metastore) -> None:
    """A committed txn's delta is compacted while its batch is still writing: the compactor stops below the
    batch's open write id, not below the whole batch."""
    conn = _connect(ms, 10)
    committed: list[int] = []
    try:
        for n in range(4):
            conn.begin_transaction()
            committed += _write(conn, n)
            conn.commit_transaction()
        conn.begin_transaction()
        _write(conn, 4)  # open, under the compactions
        major = ms.get_compaction(ms.compact("default.sales", "region=eu", kind="major", wait=True))
        minor = ms.get_compaction(ms.compact("default.sales", "region=us", kind="minor", wait=True))
        assert major.state == minor.state == "ready for cleaning"
        dirs = _listing(ms)
        assert f"base_0000004_v{major.txn_id:07d}" in {f.split("/")[0] for f in dirs["eu"]}
        assert f"delta_0000001_0000004_v{minor.txn_id:07d}" in {f.split("/")[0] for f in dirs["us"]}
        assert _ids(ms) == sorted(committed)
        conn.commit_transaction()
        committed += range(40, 40 + len(REGIONS))
        for n in range(5, 8):
            conn.begin_transaction()
            committed += _write(conn, n)
            conn.commit_transaction()
    finally:
        conn.close()  # the batch's two unused txns are aborted
    bases = {}
    for region in REGIONS:
        major = ms.get_compaction(ms.compact("default.sales", f"region={region}", kind="major", wait=True))
        bases[region] = {f"base_0000008_v{major.txn_id:07d}"}  # write ids 9 and 10 aborted
    Cleaner(ms, CompactorConfig(retention=0)).run_once()
    assert _ids(ms) == sorted(committed)
    for region, files in _listing(ms).items():
        assert {f.split("/")[0] for f in files if "/bucket_" in f} == bases[region], region


def test_replication_to_a_local_warehouse(ms: Metastore, tmp_path: Path) -> None:
    conn = _connect(ms, 5)
    with conn:
        for n in range(5):
            conn.begin_transaction()
            _write(conn, n)
            if n == 1:
                conn.abort_transaction()
            else:
                conn.commit_transaction()
    with Metastore.connect(f"sqlite:///{tmp_path / 'replica.db'}", warehouse=tmp_path / "replica") as replica:
        repl.sync(ms, replica)
        assert _ids(replica) == _ids(ms) == sorted(i for n in (0, 2, 3, 4) for i in range(n * 10, n * 10 + 2))
        local = Path(replica.table("sales").location) / "region=eu"
        assert "delta_0000003_0000003" in {p.name for p in local.iterdir()}


@pytest.mark.timeout(120)
def test_kill_9_in_the_middle_of_a_batch(tmp_path: Path, s3_warehouse: str) -> None:
    """Killed while a txn's rows are being flushed, and between a txn's complete delta and its commit:
    every committed txn stays readable, exactly once; nothing else is; new batches commit afterwards."""
    url = f"sqlite:///{tmp_path / 'ms.db'}"
    ledger = Ledger()
    with Metastore.connect(url, warehouse=s3_warehouse) as ms:
        create_table(ms, "t")
        for n, point in enumerate(["orc.flush.published=kill@5", "metastore.commit=kill@3"]):
            writer = start_writer(
                url, s3_warehouse, "t", batch=10, txns=10, per_txn=300,  # type: ignore[arg-type]
                first_seq=n * 100, config=KILL_CONFIG, faults=point, txn_timeout=1.0,
            )  # fmt: skip
            out, err = writer.communicate(timeout=60)
            assert writer.returncode == -signal.SIGKILL, f"{point}: {err}"
            ledger.read(out.splitlines())
            assert ledger.committed, f"{point}: nothing committed before the kill"
            check_table(ms, "t", ledger, 300)
        time.sleep(1.1)  # the dead writers' txns time out
        ms.perform_timeouts()
        stream(ms, "t", [1000, 1001], 300, ledger, batch=10)
        assert check_table(ms, "t", ledger, 300)[1001] == 300


def test_hives_shared_delta_is_refused_on_s3_for_more_than_one_txn(ms: Metastore) -> None:
    """Asked for Hive's layout (one delta for the batch, side files), S3 gets Hive's refusal."""
    with pytest.raises(StreamingConnectionError, match="only supports transaction batch sizes of 1, but 10"):
        _connect(ms, 10, {"delta_per_transaction": False})
    assert not [t for t in ms.show_txns() if t.state.name == "OPEN"]
    with _connect(ms, 1, {"delta_per_transaction": False}) as conn:  # a batch of one has no side file
        conn.begin_transaction()
        _write(conn, 0)
        conn.commit_transaction()
    assert _ids(ms) == [0, 1]
