"""TableScan behaviour on real tables: projection, partition pruning, filters, ROW__IDs, snapshots, streaming
batches, statement ids, bases, deletes and original files (docs/format.md, Reading a snapshot)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.orc as po
import pytest
from readhelpers import connect, create, delete_rows, row_id, sorted_rows, stream

from acidstream import Metastore
from acidstream.acid.codec import BucketCodec
from acidstream.acid.names import base_dir, bucket_file
from acidstream.acid.orc import AcidWriter, WriterOptions
from acidstream.acid.writeids import ValidWriteIdList
from acidstream.errors import InvalidObjectException, InvalidPartition
from acidstream.read import scan as scan_module
from acidstream.read.bucket_read import BucketReader
from acidstream.read.scan import TableScan
from acidstream.runtime import DEFAULT_SWITCH_INTERVAL

B0 = BucketCodec.V1.encode(0)
B1 = BucketCodec.V1.encode(1)


@pytest.fixture
def people(ms: Metastore) -> Metastore:
    """``db.people`` partitioned by (year int, country string): 2 committed txns over 3 partitions + default."""
    create(ms, "people", "id int, name string, score double", "PARTITIONED BY (year int, country string)")
    stream(
        ms,
        "people",
        [
            (
                {
                    "id": [1, 2, 3],
                    "name": ["ann", "bob", "cid"],
                    "score": [1.5, 2.5, 3.5],
                    "year": ["2023", "2024", "2024"],
                    "country": ["fr", "fr", "de"],
                },
                True,
            ),
            (
                {
                    "id": [4, 5],
                    "name": ["dee", "eve"],
                    "score": [4.5, None],
                    "year": ["2024", "2025"],
                    "country": ["de", None],
                },
                True,
            ),
        ],
    )
    return ms


def test_projection_of_data_and_partition_columns_in_any_order(people: Metastore) -> None:
    table = people.table("db.people")
    full = table.scan().to_arrow()
    assert full.schema.names == ["id", "name", "score", "year", "country"]
    assert full.schema.field("year").type == pa.int32()
    got = table.scan(columns=["country", "ID", "year"]).to_arrow()
    assert got.schema.names == ["country", "id", "year"]
    assert sorted_rows(got) == sorted_rows(full.select(["country", "id", "year"]))
    assert sorted(table.scan(columns=["name"]).to_arrow().column("name").to_pylist()) == [
        "ann",
        "bob",
        "cid",
        "dee",
        "eve",
    ]
    only_part = table.scan(columns=["year"]).to_arrow()
    assert sorted(only_part.column("year").to_pylist()) == [2023, 2024, 2024, 2024, 2025]
    empty = table.scan(columns=[]).to_arrow()
    assert (empty.num_columns, empty.num_rows) == (0, 5)
    with pytest.raises(InvalidObjectException, match="no columns"):
        table.scan(columns=["nope"])


def test_default_partition_reads_as_null(people: Metastore) -> None:
    rows = people.table("db.people").scan(columns=["id", "country"]).to_arrow().to_pylist()
    assert {"id": 5, "country": None} in rows


def test_partition_filter_as_dict_and_expression(people: Metastore) -> None:
    table = people.table("db.people")

    def ids(**kw: object) -> list[int]:
        return sorted(table.scan(columns=["id"], **kw).to_arrow().column("id").to_pylist())  # type: ignore[arg-type]

    assert ids(partition_filter={"year": 2024}) == [2, 3, 4]
    assert ids(partition_filter={"year": "2024", "country": "de"}) == [3, 4]
    assert ids(partition_filter={"country": None}) == [5]
    assert ids(partition_filter=pc.field("year") >= 2024) == [2, 3, 4, 5]
    assert ids(partition_filter=(pc.field("country") == "fr") | pc.field("country").is_null()) == [1, 2, 5]
    assert ids(partition_filter={"year": 1999}) == []
    scan = table.scan(partition_filter={"year": 2023})
    assert {t.partition_name for t in scan.plan_files().tasks} == {"year=2023/country=fr"}
    with pytest.raises(InvalidPartition, match="unknown partition keys"):
        table.scan(partition_filter={"id": 1}).plan_files()
    with pytest.raises(InvalidPartition, match="not a filter over the partition keys"):
        table.scan(partition_filter=pc.field("id") == 1).plan_files()
    with pytest.raises(InvalidPartition, match="not a int32"):
        table.scan(partition_filter={"year": "twenty"}).plan_files()


def test_unparsable_typed_partition_value_reads_as_null(ms: Metastore) -> None:
    create(ms, "typed", "id int", "PARTITIONED BY (day date)")
    stream(ms, "typed", [({"id": [1, 2], "day": ["2024-02-29", "not-a-date"]}, True)])
    rows = ms.table("db.typed").scan().to_arrow().to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == [
        {"id": 1, "day": pa.scalar(19782, pa.date32()).as_py()},
        {"id": 2, "day": None},
    ]


def test_filter_on_projected_and_unprojected_columns(people: Metastore) -> None:
    table = people.table("db.people")
    got = table.scan(columns=["name"], filter=pc.field("score") > 2).to_arrow()
    assert got.schema.names == ["name"]  # score was read for the filter, then dropped
    assert sorted(got.column("name").to_pylist()) == ["bob", "cid", "dee"]
    by_part = table.scan(columns=["id"], filter=pc.field("country") == "de").to_arrow()
    assert sorted(by_part.column("id").to_pylist()) == [3, 4]
    both = table.scan(columns=["id", "score"], filter=(pc.field("id") > 1) & (pc.field("year") == 2024))
    assert sorted(both.to_arrow().column("id").to_pylist()) == [2, 3, 4]
    assert both.count() == 3
    by_row_id = table.scan(columns=["id"], filter=pc.field("ROW__ID", "rowid") == 0).to_arrow()
    assert by_row_id.schema.names == ["id"]
    assert sorted(by_row_id.column("id").to_pylist()) == [1, 2, 3, 4, 5]  # first row of each file
    no_columns = table.scan(columns=[], filter=pc.field("id") > 2)
    assert (no_columns.to_arrow().num_columns, no_columns.to_arrow().num_rows, no_columns.count()) == (
        0,
        3,
        3,
    )
    with pytest.raises(InvalidObjectException, match="does not apply"):
        table.scan(filter=pc.field("missing") == 1)


def test_row_ids_and_buckets(ms: Metastore) -> None:
    create(ms, "b", "id int, msg string", "CLUSTERED BY (id) INTO 2 BUCKETS")
    stream(
        ms, "b", [({"id": list(range(6)), "msg": list("abcdef")}, True), ({"id": [6], "msg": ["g"]}, True)]
    )
    rows = ms.table("db.b").scan(with_row_id=True).to_arrow().to_pylist()
    assert [r for r in rows if r["ROW__ID"] is None] == []
    by_bucket: dict[int, list[tuple[int, int]]] = {}
    for r in rows:
        wid, bucket, rid = row_id(r)
        by_bucket.setdefault(bucket, []).append((wid, rid))
    assert set(by_bucket) <= {B0, B1}
    for pairs in by_bucket.values():  # rowIds restart at 0 per write id and per bucket file
        for wid in (1, 2):
            rids = sorted(r for w, r in pairs if w == wid)
            assert rids == list(range(len(rids)))
    assert sum(len(v) for v in by_bucket.values()) == 7
    assert ms.table("db.b").scan(with_row_id=True).schema.names == ["ROW__ID", "id", "msg"]


def test_snapshot_as_list_or_string_excludes_later_commits(ms: Metastore) -> None:
    create(ms, "s", "id int")
    stream(ms, "s", [({"id": [1]}, True)])
    table = ms.table("db.s")
    old = ms.get_valid_write_ids("db.s")
    stream(ms, "s", [({"id": [2]}, True), ({"id": [3]}, False), ({"id": [4]}, True)])
    ids = lambda **kw: sorted(table.scan(**kw).to_arrow().column("id").to_pylist())  # noqa: E731
    assert ids() == [1, 2, 4]
    assert ids(snapshot=old) == [1]
    assert ids(snapshot=str(old)) == [1]
    assert ids(snapshot="db.s:2:9223372036854775807::") == [1, 2]
    assert ids(
        snapshot=ValidWriteIdList(4, open_ids=(2,), aborted_ids=(3,), table="db.s", min_open_write_id=2)
    ) == [1, 4]
    with pytest.raises(ValueError, match=r"is for db\.other"):
        table.scan(snapshot="db.other:2:9223372036854775807::")


def test_scan_takes_its_snapshot_once(ms: Metastore) -> None:
    create(ms, "once", "id int")
    stream(ms, "once", [({"id": [1]}, True)])
    scan = ms.table("db.once").scan()
    stream(ms, "once", [({"id": [2]}, True)])
    assert scan.to_arrow().column("id").to_pylist() == [1]
    assert ms.table("db.once").scan().count() == 2


def test_to_batches_streams_bounded_batches(ms: Metastore) -> None:
    create(ms, "big", "id int, msg string", "CLUSTERED BY (id) INTO 3 BUCKETS")
    stream(ms, "big", [({"id": list(range(i, 5000, 2)), "msg": ["x" * 10] * 2500}, True) for i in (0, 1)])
    table = ms.table("db.big")
    scan = TableScan(ms, table, batch_rows=700)
    reader = scan.to_batches()
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.schema == scan.schema
    sizes = [b.num_rows for b in reader]
    assert max(sizes) <= 700
    assert sum(sizes) == 5000
    filtered = TableScan(ms, table, batch_rows=700, filter=pc.field("id") < 1234)
    assert all(b.num_rows <= 700 for b in filtered.to_batches())
    assert filtered.count() == 1234


def test_scans_shorten_the_switch_interval_only_while_they_work(
    people: Metastore, monkeypatch: pytest.MonkeyPatch, tuned: None
) -> None:
    """Beside a busy Python thread each of a scan's pyarrow calls could wait 5 ms for the GIL (acidstream.runtime)."""
    seen: list[float] = []
    real_batches = BucketReader.batches

    def observed(self: BucketReader) -> Iterator[pa.RecordBatch]:
        for batch in real_batches(self):
            seen.append(sys.getswitchinterval())
            yield batch

    monkeypatch.setattr(BucketReader, "batches", observed)
    before = sys.getswitchinterval()
    table = people.table("db.people")
    between = [sys.getswitchinterval() for _ in TableScan(people, table, read_threads=1).to_batches()]
    assert len(seen) == len(between) >= 4  # a batch per bucket file at least
    assert seen == [pytest.approx(DEFAULT_SWITCH_INTERVAL)] * len(seen)
    assert between == [before] * len(seen)  # the caller's code between batches runs with its own interval
    assert sys.getswitchinterval() == before
    # buckets read in threads: each thread is in the section while it decodes (the caller's code may then
    # run with the short interval too: a reader works beside it), and the interval is back once they end
    seen.clear()
    monkeypatch.setattr(scan_module, "THREADED_MIN_BYTES", 0)  # a small table, read in threads all the same
    threaded = list(TableScan(people, table, read_threads=3).to_batches())
    assert len(seen) == len(threaded) == len(between)
    assert seen == [pytest.approx(DEFAULT_SWITCH_INTERVAL)] * len(seen)
    assert sys.getswitchinterval() == before


def test_empty_and_aborted_only_tables(ms: Metastore) -> None:
    create(ms, "empty", "id int, msg string", "PARTITIONED BY (p string)")
    scan = ms.table("db.empty").scan()
    assert scan.to_arrow().num_rows == 0
    assert scan.to_arrow().schema.names == ["id", "msg", "p"]
    assert scan.count() == 0
    assert list(scan.to_pandas().columns) == ["id", "msg", "p"]
    create(ms, "aborted", "id int, msg string")
    stream(ms, "aborted", [({"id": [1, 2], "msg": ["a", "b"]}, False)] * 3, batch=3)
    assert list(Path(ms.table("db.aborted").location).glob("delta_*/bucket_*"))  # the rows are on disk
    assert ms.table("db.aborted").scan().to_arrow().num_rows == 0
    assert ms.table("db.aborted").scan().count() == 0


def test_open_batch_shows_only_committed_prefix(ms: Metastore) -> None:
    create(ms, "open", "id int, msg string")
    conn = connect(ms, "open", batch=10)
    try:
        for i, commit in enumerate([True, False, True]):
            conn.begin_transaction()
            conn.write_batch(pa.table({"id": [i], "msg": [str(i)]}))
            conn.commit_transaction() if commit else conn.abort_transaction()
        conn.begin_transaction()
        conn.write_batch(pa.table({"id": [9], "msg": ["open"]}))
        plan = ms.table("db.open").scan().plan_files()
        assert [f.open_batch for t in plan.tasks for f in t.insert_files] == [True]
        assert sorted(ms.table("db.open").scan().to_arrow().column("id").to_pylist()) == [0, 2]
    finally:
        conn.close()


def test_multi_statement_deltas_of_one_txn(ms: Metastore) -> None:
    create(ms, "ms", "id int, msg string")
    txn = ms.open_txns(1)[0]
    [(_, wid)] = ms.allocate_table_write_ids([txn], "db.ms")
    for stmt, ids in ((0, [1, 2]), (1, [3])):
        with connect(ms, "ms", write_id=wid, statement_id=stmt) as conn:
            conn.begin_transaction()
            conn.write_batch(pa.table({"id": ids, "msg": [f"s{stmt}"] * len(ids)}))
            conn.commit_transaction()
    location = Path(ms.table("db.ms").location)
    assert sorted(p.name for p in location.iterdir() if p.is_dir()) == [
        f"delta_{wid:07d}_{wid:07d}_0000",
        f"delta_{wid:07d}_{wid:07d}_0001",
    ]
    assert ms.table("db.ms").scan().count() == 0  # not committed yet
    ms.commit_txn(txn)
    rows = ms.table("db.ms").scan(with_row_id=True).to_arrow().to_pylist()
    assert sorted((row_id(r), r["id"]) for r in rows) == [
        ((wid, B0, 0), 1),
        ((wid, B0, 1), 2),
        ((wid, B0 + 1, 0), 3),  # statement 1 in the bucket property
    ]


def write_base(ms: Metastore, table: str, write_id: int, events: list[tuple[int, int, str]]) -> None:
    """``base_<write_id>/bucket_00000`` with insert events ``(write id, row id, msg)`` (compactor-style)."""
    handle = ms.table(f"db.{table}")
    path = f"{handle.location}/{base_dir(write_id)}/{bucket_file(0)}"
    writer = AcidWriter(
        pafs.LocalFileSystem(), path, handle.columns, options=WriterOptions(is_base=True), side_file=False
    )
    n = len(events)
    writer.write_events(
        pa.table(
            {
                "operation": pa.array([0] * n, pa.int32()),
                "originalTransaction": pa.array([e[0] for e in events], pa.int64()),
                "bucket": pa.array([B0] * n, pa.int32()),
                "rowId": pa.array([e[1] for e in events], pa.int64()),
                "currentTransaction": pa.array([e[0] for e in events], pa.int64()),
                "row": pa.array(
                    [{"id": 100 + i, "msg": e[2]} for i, e in enumerate(events)],
                    pa.struct([("id", pa.int32()), ("msg", pa.string())]),
                ),
            }
        )
    )
    writer.close()


def test_base_shadows_older_deltas_and_newer_deltas_add_rows(ms: Metastore) -> None:
    create(ms, "based", "id int, msg string")
    stream(ms, "based", [({"id": [1], "msg": ["d1"]}, True), ({"id": [2], "msg": ["d2"]}, True)])
    write_base(ms, "based", 2, [(1, 0, "base1"), (2, 0, "base2")])
    stream(ms, "based", [({"id": [3], "msg": ["d3"]}, True)])
    scan = ms.table("db.based").scan(with_row_id=True)
    rows = scan.to_arrow().to_pylist()
    assert sorted((row_id(r), r["msg"]) for r in rows) == [
        ((1, B0, 0), "base1"),
        ((2, B0, 0), "base2"),
        ((3, B0, 0), "d3"),
    ]
    assert sorted(Path(p).name for p in scan.plan_files().obsolete) == [
        "delta_0000001_0000001",
        "delta_0000002_0000002",
    ]
    # A delete of a base row applies like any other.
    delete_rows(ms, "based", [(1, B0, 0)])
    assert sorted(ms.table("db.based").scan().to_arrow().column("msg").to_pylist()) == ["base2", "d3"]


def test_deletes_committed_aborted_open_and_by_snapshot(ms: Metastore) -> None:
    create(ms, "d", "id int, msg string")
    stream(ms, "d", [({"id": list(range(10)), "msg": list("abcdefghij")}, True)])
    table = ms.table("db.d")
    ids = {r["id"]: row_id(r) for r in table.scan(with_row_id=True).to_arrow().to_pylist()}
    before = ms.get_valid_write_ids("db.d")
    delete_rows(ms, "d", [ids[1], ids[3]])
    delete_rows(ms, "d", [ids[4]], commit=False)
    delete_rows(ms, "d", [ids[5]], commit=None)
    visible = lambda **kw: sorted(table.scan(columns=["id"], **kw).to_arrow().column("id").to_pylist())  # noqa: E731
    assert visible() == [0, 2, 4, 5, 6, 7, 8, 9]
    assert visible(snapshot=before) == list(range(10))
    assert table.scan().count() == 8
    # deleting an already-deleted row again, and a key no row has, changes nothing else
    delete_rows(ms, "d", [ids[1], (1, B0, 999), (7, B0, 0)])
    assert visible() == [0, 2, 4, 5, 6, 7, 8, 9]


def test_deletes_match_the_full_bucket_property_and_only_their_bucket(ms: Metastore) -> None:
    create(ms, "two", "id int, msg string", "CLUSTERED BY (id) INTO 2 BUCKETS")
    stream(ms, "two", [({"id": list(range(20)), "msg": ["m"] * 20}, True)])
    table = ms.table("db.two")
    rows = table.scan(with_row_id=True).to_arrow().to_pylist()
    by_key = {row_id(r): r["id"] for r in rows}
    assert (1, B0, 0) in by_key and (1, B1, 0) in by_key
    # An event for bucket 1's row 0 written into bucket 1's delete file deletes that row only.
    delete_rows(ms, "two", [(1, B1, 0)])
    # Bucket 0's row 0 is not hit by an event carrying statement id 1 in its bucket property.
    delete_rows(ms, "two", [(1, B0 + 1, 0)])
    left = {row_id(r) for r in table.scan(with_row_id=True).to_arrow().to_pylist()}
    assert (1, B1, 0) not in left
    assert (1, B0, 0) in left
    assert len(left) == 19


def test_original_files_get_synthetic_row_ids_and_can_be_deleted(ms: Metastore) -> None:
    create(ms, "orig", "id int, msg string")
    location = Path(ms.table("db.orig").location)
    location.mkdir(parents=True, exist_ok=True)
    # Pre-ACID files name their fields _colN: Hive reads them by position.
    plain = lambda ids: pa.table({"_col0": pa.array(ids, pa.int32()), "_col1": [f"o{i}" for i in ids]})  # noqa: E731
    po.write_table(plain([1, 2]), location / "000000_0")
    po.write_table(plain([3]), location / "000000_0_copy_1")
    po.write_table(plain([4, 5]), location / "000001_0")
    stream(ms, "orig", [({"id": [6], "msg": ["new"]}, True)])
    table = ms.table("db.orig")
    rows = table.scan(with_row_id=True).to_arrow().to_pylist()
    assert sorted((row_id(r), r["id"], r["msg"]) for r in rows) == [
        ((0, B0, 0), 1, "o1"),
        ((0, B0, 1), 2, "o2"),
        ((0, B0, 2), 3, "o3"),  # row ids continue across the copies of one bucket
        ((0, B1, 0), 4, "o4"),
        ((0, B1, 1), 5, "o5"),
        ((1, B0, 0), 6, "new"),
    ]
    delete_rows(ms, "orig", [(0, B0, 2), (0, B1, 0)])
    assert sorted(table.scan(columns=["id"]).to_arrow().column("id").to_pylist()) == [1, 2, 5, 6]
    # batches of original files are bounded too
    assert max(b.num_rows for b in TableScan(ms, table, batch_rows=1).to_batches()) == 1


def test_partitioned_scan_on_both_metastore_backends(metastore_url: str, warehouse: Path) -> None:
    with Metastore.connect(metastore_url, warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE db")
        create(m, "p", "id int", "PARTITIONED BY (k string)")
        stream(m, "p", [({"id": [1, 2, 3], "k": ["a", "b", "a"]}, True)])
        stream(m, "p", [({"id": [4]}, True)], static=["b"])
        stream(m, "p", [({"id": [5], "k": ["a"]}, False)])
        got = m.table("db.p").scan(partition_filter={"k": "a"}).to_arrow().to_pylist()
        assert sorted(r["id"] for r in got) == [1, 3]
        assert m.table("db.p").scan().count() == 4


def test_to_pandas_without_pandas_says_which_extra_brings_it(
    people: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pandas is an extra: without it ``to_pandas`` names the extra, where pyarrow's error would not."""
    scan = people.table("db.people").scan()
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if not installed: ``import pandas`` fails
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'acidstream\[pandas\]'"):
        scan.to_pandas()
    monkeypatch.undo()
    assert sorted(scan.to_pandas()["id"]) == [1, 2, 3, 4, 5]
