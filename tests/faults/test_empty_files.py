"""A committed bucket file emptied or cut short, as a crash before its bytes reached the disk leaves it.

A writer never leaves a committed base/delta/delete_delta bucket file empty (acidstream's writers, like Hive's
``OrcRecordUpdater``, close an ORC file with a footer, or delete the file), so an empty one lost its data: scans
and compactions fail with a ``CorruptFileError`` naming it, never read it as "no rows". A failed compaction
publishes nothing, and the cleaner deletes nothing, so the evidence (and the other files) stays.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from acidstream import Metastore
from acidstream.compactor import Compactor, CompactorConfig
from acidstream.errors import CorruptFileError
from read.readhelpers import connect, create, delete_rows, row_id, stream

ROWS = 40


@pytest.fixture
def ms(tmp_path: Path, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE db")
        yield m


def _table(ms: Metastore, batch: int) -> Path:
    """Three txns of ``ROWS`` rows over 2 buckets, then a delete of every tenth row; the table's directory."""
    create(ms, "t", "id int, msg string", "CLUSTERED BY (id) INTO 2 BUCKETS")
    txns = [({"id": list(range(t * ROWS, (t + 1) * ROWS)), "msg": ["m"] * ROWS}, True) for t in range(3)]
    stream(ms, "t", txns, batch=batch)
    rows = ms.table("db.t").scan(with_row_id=True).to_arrow().to_pylist()
    delete_rows(ms, "t", [row_id(r) for r in rows if r["id"] % 10 == 0])
    return Path(ms.table("db.t").location)


def _children(location: Path) -> list[str]:
    return sorted(p.name for p in location.iterdir())


def _emptied(location: Path, pattern: str) -> tuple[Path, bytes]:
    """Empty the first bucket file matching ``pattern``; returns it and its bytes."""
    victim = sorted(location.glob(pattern))[0]
    data = victim.read_bytes()
    assert data
    victim.write_bytes(b"")
    return victim, data


@pytest.mark.parametrize(
    "kind", ["delta_*/bucket_00000", "delete_delta_*/bucket_*"], ids=["insert", "delete"]
)
@pytest.mark.parametrize("batch", [1, 3])
def test_an_emptied_committed_bucket_file_fails_the_scan_naming_it(
    ms: Metastore, batch: int, kind: str
) -> None:
    location = _table(ms, batch)
    before = ms.table("db.t").scan().count()
    victim, data = _emptied(location, kind)
    for read in (lambda: ms.table("db.t").scan().to_arrow(), lambda: ms.table("db.t").scan().count()):
        with pytest.raises(CorruptFileError, match="0 bytes") as info:
            read()
        assert info.value.path == str(victim)
    victim.write_bytes(data)
    assert ms.table("db.t").scan().count() == before


def test_an_emptied_base_bucket_file_fails_the_scan(ms: Metastore) -> None:
    location = _table(ms, 1)
    compactor = Compactor(ms, CompactorConfig(retention=0.0))
    assert compactor.compact("db.t", kind="major").info.state == "ready for cleaning"
    compactor.clean()
    victim, _ = _emptied(location, "base_*/bucket_00001")
    with pytest.raises(CorruptFileError, match="0 bytes") as info:
        ms.table("db.t").scan().to_arrow()
    assert info.value.path == str(victim)


@pytest.mark.parametrize(
    "kind", ["delta_*/bucket_00000", "delete_delta_*/bucket_*"], ids=["insert", "delete"]
)
@pytest.mark.parametrize("compaction", ["major", "minor"])
def test_a_compaction_over_an_emptied_file_fails_and_nothing_is_cleaned(
    ms: Metastore, compaction: str, kind: str
) -> None:
    location = _table(ms, 1)
    rows = sorted(ms.table("db.t").scan().to_arrow().to_pylist(), key=repr)
    children = _children(location)
    victim, data = _emptied(location, kind)
    compactor = Compactor(ms, CompactorConfig(retention=0.0))
    info = compactor.compact("db.t", kind=compaction).info
    assert info.state == "failed", info
    assert "CorruptFileError" in (info.error_message or "") and str(victim) in (info.error_message or "")
    compactor.clean()
    assert _children(location) == children  # no output published, no input deleted, no _tmp left
    assert victim.stat().st_size == 0
    victim.write_bytes(data)
    assert sorted(ms.table("db.t").scan().to_arrow().to_pylist(), key=repr) == rows


@pytest.mark.parametrize("partitioned", [False, True], ids=["table", "partition"])
@pytest.mark.parametrize("compaction", ["major", "minor"])
def test_a_batch_file_cut_back_to_an_earlier_footer_fails_the_compaction(
    ms: Metastore, compaction: str, partitioned: bool
) -> None:
    """Cut at a footer of an earlier commit, the file is valid ORC with fewer rows: only the length its last
    commit recorded (in the metastore) tells. The compactor checks it; a scan, which does not ask the
    metastore for it, reads the rows that are left."""
    create(ms, "t", "id int, msg string", "PARTITIONED BY (p string)" if partitioned else "")
    where = {"static": ["a"]} if partitioned else {}
    location = Path(ms.table("db.t").location) / ("p=a" if partitioned else "")
    with connect(ms, "t", batch=3, **where) as conn:
        for t in range(3):
            conn.begin_transaction()
            conn.write_batch(pa.table({"id": [t * 10 + i for i in range(10)], "msg": ["m"] * 10}))
            conn.commit_transaction()
            if t == 0:
                [victim] = location.glob("delta_*/bucket_00000")
                [_, first_footer] = struct.unpack(">qq", Path(f"{victim}_flush_length").read_bytes())
    stream(ms, "t", [({"id": [100], "msg": ["n"]}, True)], **where)
    children = _children(location)
    data = victim.read_bytes()
    victim.write_bytes(data[:first_footer])
    assert ms.table("db.t").scan().count() == 11  # the first txn's rows and the other delta's
    compactor = Compactor(ms, CompactorConfig(retention=0.0))
    partition = "p=a" if partitioned else None
    info = compactor.compact("db.t", partition, kind=compaction).info
    assert info.state == "failed", info
    message = info.error_message or ""
    assert f"{victim}: {first_footer} bytes, but its commit recorded {len(data)}" in message
    compactor.clean()
    assert _children(location) == children
    victim.unlink()  # gone altogether: the same
    info = compactor.compact("db.t", partition, kind=compaction).info
    assert info.state == "failed" and f"{victim}: no readable bytes" in (info.error_message or "")
    victim.write_bytes(data)
    assert compactor.compact("db.t", partition, kind=compaction).info.state == "ready for cleaning"
    assert ms.table("db.t").scan().count() == 31
