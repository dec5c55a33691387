"""Damaged inputs fail the scan with a typed error naming the file; they never yield wrong rows."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from readhelpers import connect, create, delete_rows, stream

from acidstream import Metastore, StreamingConnection
from acidstream.acid.codec import BucketCodec
from acidstream.errors import CorruptFileError, SideFileNotReadable


def bucket_files(ms: Metastore, table: str) -> list[Path]:
    return sorted(Path(ms.table(f"db.{table}").location).glob("delta_*/bucket_?????"))


@pytest.fixture
def open_batch(ms: Metastore) -> Iterator[tuple[StreamingConnection, Path]]:
    """A batch of 10 with two committed txns, the file still open: its side file decides what is readable."""
    create(ms, "open", "id int, msg string")
    conn = connect(ms, "open", batch=10)
    for i in range(2):
        conn.begin_transaction()
        conn.write_batch(pa.table({"id": [i], "msg": ["m"]}))
        conn.commit_transaction()
    [data] = bucket_files(ms, "open")
    side = Path(f"{data}_flush_length")
    assert side.stat().st_size == 8 * 3  # 0, then one footer offset per commit
    yield conn, side
    conn.close()


def test_truncated_data_file(ms: Metastore) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", [({"id": list(range(100)), "msg": ["x" * 30] * 100}, True)])
    [path] = bucket_files(ms, "t")
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    with pytest.raises(CorruptFileError, match="no valid ORC footer") as info:
        ms.table("db.t").scan().to_arrow()
    assert info.value.path == str(path)
    with pytest.raises(CorruptFileError):
        ms.table("db.t").scan().count()


def test_side_file_with_partial_long(ms: Metastore, open_batch: tuple[StreamingConnection, Path]) -> None:
    _, side = open_batch
    assert ms.table("db.open").scan().count() == 2
    with open(side, "ab") as f:
        f.write(b"\x00\x00\x01")
    with pytest.raises(SideFileNotReadable, match="partial long"):
        ms.table("db.open").scan().to_arrow()


def test_empty_side_file(ms: Metastore, open_batch: tuple[StreamingConnection, Path]) -> None:
    _, side = open_batch
    side.write_bytes(b"")
    with pytest.raises(SideFileNotReadable, match="not readable"):
        ms.table("db.open").scan().plan_files()


def test_side_file_length_off_a_footer_or_past_the_end(
    ms: Metastore, open_batch: tuple[StreamingConnection, Path]
) -> None:
    _, side = open_batch
    lengths = [v for (v,) in struct.iter_unpack(">q", side.read_bytes())]
    side.write_bytes(b"".join(struct.pack(">q", v) for v in [*lengths[:-1], lengths[-1] - 5]))
    with pytest.raises(CorruptFileError, match="no valid ORC footer ends at"):
        ms.table("db.open").scan().to_arrow()
    data = Path(str(side)[: -len("_flush_length")])
    side.write_bytes(struct.pack(">q", data.stat().st_size + 100))
    with pytest.raises(CorruptFileError, match="beyond the physical length"):
        ms.table("db.open").scan().to_arrow()


def test_delete_events_of_another_bucket_in_a_bucket_file(ms: Metastore) -> None:
    create(ms, "d", "id int, msg string")
    stream(ms, "d", [({"id": [1, 2], "msg": ["a", "b"]}, True)])
    bucket0_row = (1, BucketCodec.V1.encode(0), 0)
    # An event for bucket 0's row, filed under bucket_00001 (where no insert file lives either).
    delete_rows(ms, "d", [bucket0_row], file_bucket=1)
    assert ms.table("db.d").scan().count() == 2  # bucket 1 has no insert file: nothing reads that file
    delete_rows(ms, "d", [(1, BucketCodec.V1.encode(1), 0)], file_bucket=0)
    with pytest.raises(CorruptFileError, match="Corrupted records with different bucket ids") as info:
        ms.table("db.d").scan().to_arrow()
    assert "Expected bucket id 0, however found 1" in str(info.value)


def test_original_file_that_is_not_orc(ms: Metastore) -> None:
    create(ms, "o", "id int")
    location = Path(ms.table("db.o").location)
    location.mkdir(parents=True, exist_ok=True)
    (location / "000000_0").write_bytes(b"1\n2\n3\n")
    with pytest.raises(CorruptFileError, match="original file does not decode"):
        ms.table("db.o").scan().to_arrow()
