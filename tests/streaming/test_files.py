"""BatchFiles: one event file per (partition, bucket), directories made once, local and remote-style stores."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from acidstream.acid.names import ORC_ACID_VERSION_FILE
from acidstream.acid.orc import WriterOptions, read_events
from acidstream.acid.types import parse_columns
from acidstream.errors import StreamingIOFailure
from acidstream.runtime import encode_pool
from acidstream.streaming.files import BatchFiles, Destination

COLS = parse_columns("id int, msg string")


def rows(*ids: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array(ids, pa.int32()), pa.array([f"m{i}" for i in ids])], names=["id", "msg"])


def one_txn_files(fs: pafs.FileSystem) -> BatchFiles:
    """The files of a batch of one txn (write id 1), as a streaming connection makes them."""
    return BatchFiles(
        fs,
        COLS,
        min_write_id=1,
        max_write_id=1,
        statement_id=None,
        options=WriterOptions(),
        max_buffered_bytes=1 << 30,
    )


@pytest.mark.parametrize("store", ["local", "subtree"])
def test_files_of_a_batch_share_one_prepared_directory_on_any_store(tmp_path: Path, store: str) -> None:
    # a SubTreeFileSystem is not a LocalFileSystem: its files are created in the file pool, as on S3 or HDFS
    fs: pafs.FileSystem = pafs.LocalFileSystem()
    location = str(tmp_path / "t" / "continent=Asia")
    if store == "subtree":
        fs, location = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()), "t/continent=Asia"
    files = one_txn_files(fs)
    dest = Destination(("Asia",), "continent=Asia", location)
    files.insert(dest, 0, 1, rows(1, 2))
    files.insert(dest, 3, 1, rows(3))
    files.insert(dest, 0, 1, rows(4))
    files.flush()
    files.close()
    delta = tmp_path / "t" / "continent=Asia" / "delta_0000001_0000001"
    assert sorted(p.name for p in delta.iterdir()) == [ORC_ACID_VERSION_FILE, "bucket_00000", "bucket_00003"]
    local = pafs.LocalFileSystem()
    got = {
        b: read_events(local, str(delta / f"bucket_0000{b}"))
        .column("row")
        .combine_chunks()
        .field("id")
        .to_pylist()
        for b in (0, 3)
    }
    assert got == {0: [1, 2, 4], 3: [3]}


def test_a_directory_that_cannot_be_made_is_a_streaming_io_failure(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("a file where the partition directory should be")
    files = one_txn_files(pafs.LocalFileSystem())
    with pytest.raises(StreamingIOFailure, match="cannot create"):
        files.insert(Destination((), "", str(tmp_path / "t")), 0, 1, rows(1))


def test_flush_encodes_on_its_own_thread_what_no_worker_started(tmp_path: Path) -> None:
    """With every encode worker busy, the flushing thread runs the queued shards itself instead of waiting."""
    pool = encode_pool()
    release = threading.Event()
    blockers = [pool.submit(release.wait, 30) for _ in range(pool._max_workers)]
    try:
        files = one_txn_files(pafs.LocalFileSystem())
        dest = Destination((), "", str(tmp_path / "t"))
        for bucket in range(3):
            files.insert(dest, bucket, 1, rows(10 + bucket, 20 + bucket))
        files.flush()  # its shards queue behind the blockers
        assert not any(b.done() for b in blockers)  # the flush did not wait for a worker
    finally:
        release.set()
    files.close()
    delta = tmp_path / "t" / "delta_0000001_0000001"
    got = {
        b: read_events(pafs.LocalFileSystem(), str(delta / f"bucket_0000{b}"))
        .column("row")
        .combine_chunks()
        .field("id")
        .to_pylist()
        for b in range(3)
    }
    assert got == {0: [10, 20], 1: [11, 21], 2: [12, 22]}
