"""The snapshot reader against Hive 2.3.10's own classes (tests/support/hivejvm.py).

(a) Tables written by Hive's ``OrcRecordUpdater`` (V0 bucket fields, ACID version 0, statement ids, split
    update delete_delta dirs, multi-write-id deltas with flushes) read by acidstream, deletes applied, equal to
    an expectation computed here from the operations alone.
(b) Tables acidstream streams (deltas with aborted and open ids, multi-statement deltas, a base, an open
    batch with a side file) read by Hive's ``OrcInputFormat`` at several snapshots: exactly our rows, with
    the same ROW__IDs. Hive 2.3 reads file-name ids as txn ids, so these tables live alone in a fresh
    metastore where write id == txn id (asserted).
(c) Every Hive type through StrictDelimitedInputWriter, read back by both readers.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from readhelpers import connect, create

from acidstream import Metastore, StrictDelimitedInputWriter
from acidstream.acid.names import base_dir, bucket_file
from acidstream.acid.orc import AcidWriter, WriterOptions
from acidstream.acid.writeids import ValidWriteIdList
from support.hivejvm import HiveJvm, hive_txns

COLS = [("id", "int"), ("msg", "string")]
RowId = tuple[int, int, int]


@pytest.fixture(scope="module")
def hive(spark: Any) -> HiveJvm:
    return HiveJvm(spark)


def ours_with_ids(
    ms: Metastore, table: str, snapshot: ValidWriteIdList | str
) -> list[tuple[RowId, tuple[Any, ...]]]:
    rows = ms.table(table).scan(with_row_id=True, snapshot=snapshot).to_arrow().to_pylist()
    out = []
    for r in rows:
        rid = r.pop("ROW__ID")
        out.append(((rid["writeid"], rid["bucketid"], rid["rowid"]), tuple(r.values())))
    return sorted(out)


# --- (a) Hive writes, we read ----------------------------------------------------------------------------


class Expectation:
    """Hive's rules, applied to the operations we hand the updater: rowIds count per (file, write id) from 0;
    V0 bucket fields are the plain bucket number; a delete removes the row with exactly its key."""

    def __init__(self) -> None:
        self.rows: dict[RowId, tuple[Any, ...]] = {}
        self.valid_from: dict[RowId, int] = {}
        self.deleted_by: dict[RowId, int] = {}

    def insert(self, write_id: int, bucket: int, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        ops = []
        for i, row in enumerate(rows):
            key = (write_id, bucket, i)
            self.rows[key], self.valid_from[key] = row, write_id
            ops.append(("insert", write_id, row))
        return ops

    def delete(self, write_id: int, key: RowId) -> tuple[Any, ...]:
        self.deleted_by[key] = write_id
        return ("delete", write_id, key)

    def visible(self, valid: set[int]) -> list[tuple[RowId, tuple[Any, ...]]]:
        return sorted(
            (k, v)
            for k, v in self.rows.items()
            if self.valid_from[k] in valid and self.deleted_by.get(k) not in valid
        )


def test_hive_written_table_read_with_deletes_applied(ms: Metastore, hive: HiveJvm) -> None:
    create(ms, "h", "id int, msg string", "CLUSTERED BY (id) INTO 2 BUCKETS")
    t = ms.table("db.h").location
    exp = Expectation()
    # write id 1: two buckets
    hive.write_with_record_updater(
        t, COLS, exp.insert(1, 0, [(i, f"a{i}") for i in range(5)]), bucket=0, min_write_id=1, max_write_id=1
    )
    hive.write_with_record_updater(
        t, COLS, exp.insert(1, 1, [(i, f"b{i}") for i in range(3)]), bucket=1, min_write_id=1, max_write_id=1
    )
    # write id 2: split-update delete and update in bucket 0 (delete_delta_2_2_0000 + delta_2_2_0000)
    ops = [exp.delete(2, (1, 0, 1)), exp.delete(2, (1, 0, 3)), *exp.insert(2, 0, [(3, "a3-updated")])]
    hive.write_with_record_updater(t, COLS, ops, bucket=0, min_write_id=2, max_write_id=2)
    # write id 3, two statements: stmt 0 inserts in bucket 0, stmt 1 deletes a bucket-1 row and inserts there
    hive.write_with_record_updater(
        t, COLS, exp.insert(3, 0, [(7, "c7")]), bucket=0, min_write_id=3, max_write_id=3, statement_id=0
    )
    ops = [exp.delete(3, (1, 1, 0)), *exp.insert(3, 1, [(8, "c8"), (9, "c9")])]
    hive.write_with_record_updater(t, COLS, ops, bucket=1, min_write_id=3, max_write_id=3, statement_id=1)
    # write ids 4..6 in one multi-txn delta with a flush per id (side file while open, gone after close)
    ops = [*exp.insert(4, 0, [(40, "d40"), (41, "d41")]), *exp.insert(5, 0, [(50, "d50")])]
    ops += exp.insert(6, 0, [(60, "d60")])
    hive.write_with_record_updater(
        t, COLS, ops, bucket=0, min_write_id=4, max_write_id=6, flush_after_each_write_id=True
    )
    # write id 7 (aborted below) deletes a row of write id 4
    hive.write_with_record_updater(
        t, COLS, [exp.delete(7, (4, 0, 1))], bucket=0, min_write_id=7, max_write_id=7
    )
    names = sorted(p.name for p in Path(t).iterdir())
    assert "delete_delta_0000002_0000002_0000" in names and "delete_delta_0000003_0000003_0001" in names
    assert (Path(t) / "_orc_acid_version").read_bytes() == b"\0\0\0\0"  # ACID version 0 files

    snapshots = {
        "db.h:7:9223372036854775807::7": {1, 2, 3, 4, 5, 6},
        "db.h:7:5:5:7": {1, 2, 3, 4, 6},
        "db.h:2:9223372036854775807::": {1, 2},
        "db.h:1:9223372036854775807::": {1},
        "db.h:7:9223372036854775807::": {1, 2, 3, 4, 5, 6, 7},
    }
    for snapshot, valid in snapshots.items():
        expected = exp.visible(valid)
        assert ours_with_ids(ms, "db.h", snapshot) == expected, snapshot
        # Hive 2.3's legacy reader ignores delete_delta dirs: its rows are ours plus the deleted ones.
        parsed = ValidWriteIdList.parse(snapshot)
        theirs = sorted(hive.read_acid_table_with_row_ids(t, COLS, hive_txns(parsed)))
        deleted = {k for k, w in exp.deleted_by.items() if w in valid}
        assert [r for r in theirs if r[0] not in deleted] == expected, snapshot


# --- (b) we write, Hive reads ----------------------------------------------------------------------------


def write_compacted_base(ms: Metastore, table: str, write_id: int) -> None:
    """What a major compaction leaves: ``base_w`` with the rows visible now (aborted ones dropped), ROW__IDs
    kept, marked compacted."""
    handle = ms.table(table)
    snapshot = ms.get_valid_write_ids(handle.full_name)
    assert snapshot.high_watermark == write_id and not snapshot.open_ids
    rows = handle.scan(with_row_id=True, snapshot=snapshot).to_arrow()
    keys = rows.column("ROW__ID").combine_chunks()
    n = rows.num_rows
    events = pa.table(
        {
            "operation": pa.array([0] * n, pa.int32()),
            "originalTransaction": keys.field("writeid"),
            "bucket": keys.field("bucketid"),
            "rowId": keys.field("rowid"),
            "currentTransaction": keys.field("writeid"),
            "row": pa.StructArray.from_arrays(
                [rows.column(c.name).combine_chunks() for c in handle.columns],
                names=[c.name for c in handle.columns],
            ),
        }
    ).sort_by([("originalTransaction", "ascending"), ("bucket", "ascending"), ("rowId", "ascending")])
    directory = f"{handle.location}/{base_dir(write_id)}"
    writer = AcidWriter(
        pafs.LocalFileSystem(),
        f"{directory}/{bucket_file(0)}",
        handle.columns,
        options=WriterOptions(is_base=True),
        side_file=False,
    )
    writer.write_events(events)
    writer.close()
    Path(directory, "_metadata_acid").write_text(
        json.dumps({"thisFileVersion": "0", "dataFormat": "compacted"})
    )


def both_readers_agree(ms: Metastore, hive: HiveJvm, table: str, snapshot: ValidWriteIdList) -> list[Any]:
    ours = ours_with_ids(ms, table, snapshot)
    theirs = sorted(hive.read_acid_table_with_row_ids(ms.table(table).location, COLS, hive_txns(snapshot)))
    assert ours == theirs, str(snapshot)
    return ours


def test_streamed_table_read_by_hive_at_several_snapshots(ms: Metastore, hive: HiveJvm) -> None:
    create(ms, "s", "id int, msg string")
    snapshots: list[ValidWriteIdList] = []

    def txn(conn: Any, ids: list[int], outcome: str) -> None:
        conn.begin_transaction()
        assert conn.current_transaction_id() == conn.current_write_id()  # Hive 2.3 reads ids as txn ids
        conn.write_batch(pa.table({"id": pa.array(ids, pa.int32()), "msg": [f"m{i}" for i in ids]}))
        if outcome == "commit":
            conn.commit_transaction()
        elif outcome == "abort":
            conn.abort_transaction()

    with connect(ms, "s") as conn:  # write ids 1, 2 (2 aborted): delta_1_1, delta_2_2
        txn(conn, [1, 2], "commit")
        txn(conn, [3], "abort")
    snapshots.append(ms.get_valid_write_ids("db.s"))
    write_compacted_base(ms, "db.s", 2)
    batch = connect(ms, "s", batch=10)  # write ids 3..12 in delta_3_12 with a side file
    try:
        txn(batch, [10, 11], "commit")
        txn(batch, [12], "abort")
        txn(batch, [13, 14, 15], "commit")
        snapshots.append(ms.get_valid_write_ids("db.s"))
        txn(batch, [16], "open")  # flushed to the file? only committed footers are readable
        batch.write_batch(pa.table({"id": pa.array([17], pa.int32()), "msg": ["m17"]}))
        location = Path(ms.table("db.s").location)
        assert (location / "delta_0000003_0000012" / "bucket_00000_flush_length").is_file()
        now = ms.get_valid_write_ids("db.s")
        assert now.open_ids and now.aborted_ids
        snapshots.append(now)
        # multi-statement deltas of one txn (write id 13) while the batch is still open
        owner = ms.open_txns(1)[0]
        [(_, wid)] = ms.allocate_table_write_ids([owner], "db.s")
        assert wid == owner
        for stmt, ids in ((0, [20, 21]), (1, [22])):
            with connect(ms, "s", write_id=wid, statement_id=stmt) as unmanaged:
                unmanaged.begin_transaction()
                unmanaged.write_batch(
                    pa.table({"id": pa.array(ids, pa.int32()), "msg": [f"m{i}" for i in ids]})
                )
                unmanaged.commit_transaction()
        ms.commit_txn(owner)
        snapshots.append(ms.get_valid_write_ids("db.s"))
        for snapshot in snapshots:
            both_readers_agree(ms, hive, "db.s", snapshot)
        batch.commit_transaction()  # write id 6 commits: its rows become visible
    finally:
        batch.close()
    assert not list(location.rglob("*_flush_length"))
    final = ms.get_valid_write_ids("db.s")
    rows = both_readers_agree(ms, hive, "db.s", final)
    assert sorted(r[1][0] for r in rows) == [1, 2, 10, 11, 13, 14, 15, 16, 17, 20, 21, 22]
    for snapshot in snapshots:  # closing the batch changes no earlier snapshot
        both_readers_agree(ms, hive, "db.s", snapshot)


# --- (c) every type ----------------------------------------------------------------------------------------

TYPED = [
    ("ti", "tinyint"),
    ("si", "smallint"),
    ("i", "int"),
    ("bi", "bigint"),
    ("b", "boolean"),
    ("f", "float"),
    ("d", "double"),
    ("dec", "decimal(20,3)"),
    ("s", "string"),
    ("c", "char(4)"),
    ("vc", "varchar(5)"),
    ("dt", "date"),
    ("ts", "timestamp"),
    ("bin", "binary"),
    ("arr", "array<bigint>"),
    ("m", "map<string,int>"),
    ("st", "struct<x:int,y:array<string>>"),
]
RECORDS = [
    "\x01".join(
        [
            "-5",
            "-300",
            "7",
            str(1 << 40),
            "true",
            "1.5",
            "2.25",
            "12345678901234567.125",
            "héllo",
            "ab",
            "abc",
            "2024-02-29",
            "2024-03-01 12:34:56.123456789",
            "AP8=",
            f"1\x02{1 << 35}\x02\\N",
            "k\x031\x02z\x032",
            "3\x02p\x03\\N",
        ]
    ),
    "\x01".join(["\\N"] * len(TYPED)),
]
EXPECTED = [
    (
        -5,
        -300,
        7,
        1 << 40,
        True,
        1.5,
        2.25,
        Decimal("12345678901234567.125"),
        "héllo",
        "ab  ",
        "abc",
        dt.date(2024, 2, 29),
        pd.Timestamp("2024-03-01 12:34:56.123456789"),
        b"\x00\xff",
        [1, 1 << 35, None],
        {"k": 1, "z": 2},
        {"x": 3, "y": ["p", None]},
    ),
    (None,) * len(TYPED),
]


def _normalise(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """pyarrow gives maps as (key, value) pairs and timestamps as datetimes without nanoseconds."""
    out = []
    for (_, type_), v in zip(TYPED, row, strict=True):
        if type_.startswith("map") and v is not None:
            v = dict(v)
        if type_ == "timestamp" and v is not None:
            v = pd.Timestamp(v)
        out.append(v)
    return tuple(out)


def test_commit_to_several_buckets_read_by_hive(ms: Metastore, hive: HiveJvm) -> None:
    """A commit's bucket files are encoded together (pyarrow files shared, a stripe per bucket file): Hive
    reads every bucket with our rows and ROW__IDs, in a batch of one and in an open batch of three."""
    create(ms, "b", "id int, msg string", "CLUSTERED BY (id) INTO 4 BUCKETS")

    def rows(ids: range) -> pa.Table:
        return pa.table({"id": pa.array(ids, pa.int32()), "msg": [f"message {i}" for i in ids]})

    with connect(ms, "b") as conn:
        conn.begin_transaction()
        assert conn.current_transaction_id() == conn.current_write_id()
        conn.write_batch(rows(range(200)))
        conn.commit_transaction()
    batch = connect(ms, "b", batch=3)
    try:
        for k in range(2):
            batch.begin_transaction()
            batch.write_batch(rows(range(1000 + 100 * k, 1050 + 100 * k)))
            batch.commit_transaction()
        seen = both_readers_agree(ms, hive, "db.b", ms.get_valid_write_ids("db.b"))
    finally:
        batch.close()
    assert len(seen) == 300 and len({bucket for (_, bucket, _), _ in seen}) == 4
    row_ids: dict[tuple[int, int], list[int]] = {}
    for (write_id, bucket, row_id), _ in seen:
        row_ids.setdefault((write_id, bucket), []).append(row_id)
    assert all(ids == list(range(len(ids))) for ids in row_ids.values())  # per file and write id, from 0
    assert both_readers_agree(ms, hive, "db.b", ms.get_valid_write_ids("db.b")) == seen


def test_every_hive_type_through_delimited_writer_and_both_readers(ms: Metastore, hive: HiveJvm) -> None:
    ms.execute(
        "CREATE TABLE db.typed (" + ", ".join(f"{n} {t}" for n, t in TYPED) + ") "
        "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    writer = StrictDelimitedInputWriter.builder().build()
    with (
        connect(ms, "typed")
        .__class__.builder()
        .with_metastore(ms)
        .with_database("db")
        .with_table("typed")
        .with_record_writer(writer)
        .connect() as conn
    ):
        conn.begin_transaction()
        for record in RECORDS:
            conn.write(record.encode())
        conn.commit_transaction()
    table = ms.table("db.typed").scan().to_arrow()
    assert table.schema.field("ts").type == pa.timestamp("ns")
    ours = [_normalise(tuple(r.values())) for r in table.to_pylist()]
    assert ours == EXPECTED
    snapshot = ms.get_valid_write_ids("db.typed")
    theirs = hive.read_acid_table(ms.table("db.typed").location, TYPED, hive_txns(snapshot))
    assert theirs == EXPECTED
