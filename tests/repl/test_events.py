"""What the source's events tell a replica: each commit's files with their new range and checksums, chained
commit to commit; compactions' outputs and cleanings."""

from __future__ import annotations

import itertools
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from replhelpers import stream

from acidstream.acid.checksum import file_prefix
from acidstream.catalog import Metastore
from acidstream.compactor import Cleaner, CompactorConfig
from acidstream.metastore.models import WrittenFile

FS = pafs.LocalFileSystem()


def _written(ms: Metastore) -> list[tuple[int, WrittenFile]]:
    return [
        (e.txn_id or 0, WrittenFile.from_json(v))
        for e in ms.notifications(0, 100000)
        if e.event_type == "ACID_WRITE"
        for v in e.message.get("written", ())
    ]


def test_commits_chain_their_ranges(source: Metastore) -> None:
    source.execute(
        "CREATE TABLE t (id int, msg string) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    conn = stream(source, "default.t", 4)
    for txn in range(4):
        conn.begin_transaction()
        conn.write_batch(pa.table({"id": list(range(txn * 10, txn * 10 + 6)), "msg": ["m"] * 6}))
        if txn == 2:
            conn.abort_transaction()  # its rows reach the file at the next flush: inside txn 3's range
        else:
            conn.commit_transaction()
    conn.close()
    source.table("t").update(pc.field("id") == 1, {"msg": "u"})
    by_path: dict[str, list[WrittenFile]] = {}
    for _, w in _written(source):
        by_path.setdefault(w.path, []).append(w)
    batch = [p for p in by_path if "/delta_0000001_0000004/" in p]
    assert len(batch) == 2
    for path in batch:
        chain = by_path[path]
        assert [w.open for w in chain] == [True, True, False]  # the last txn's commit closed the batch
        assert chain[0].start == 0 and chain[0].start_crc32 == 0
        for before, after in itertools.pairwise(chain):
            assert (after.start, after.start_crc32) == (before.length, before.crc32)
        for w in chain:
            assert file_prefix(FS, path, w.length).crc32 == w.crc32
        assert chain[-1].length == Path(path).stat().st_size
    mutated = [p for p in by_path if "delete_delta_0000005" in p or "delta_0000005_0000005" in p]
    assert len(mutated) == 2
    for path in mutated:
        (w,) = by_path[path]
        assert not w.open and w.start == 0 and w.crc32 == file_prefix(FS, path).crc32


def test_compaction_and_cleaning_events(source: Metastore) -> None:
    source.execute("CREATE TABLE t (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
    for i in range(3):
        with stream(source, "default.t") as conn:
            conn.begin_transaction()
            conn.write(f"{i},m".encode())
            conn.commit_transaction()
    source.compact("t", kind="major", wait=True)
    Cleaner(source, CompactorConfig(retention=0)).run_once()
    events = {e.event_type: e for e in source.notifications(0, 1000)}
    compacted, cleaned = events["COMPACTED"], events["CLEANED"]
    assert compacted.message["outputs"] == ["base_0000003"]
    assert sorted(compacted.message["inputs"]) == [f"delta_000000{i}_000000{i}" for i in (1, 2, 3)]
    location = compacted.message["location"]
    for name, files in compacted.message["files"].items():
        assert {f["path"] for f in files} >= {"bucket_00000", "_metadata_acid", "_orc_acid_version"}
        for f in files:
            assert file_prefix(FS, f"{location}/{name}/{f['path']}").crc32 == f["crc32"]
    assert cleaned.message["removed"] == compacted.message["inputs"]
