"""Rows Hive's two writers place take every mutation: a table ``CLUSTERED BY (b, a)`` whose columns are
``(a, b, c)`` holds rows hashed in table order (Hive's streaming client, and acidstream's streaming) and rows
hashed in ``CLUSTERED BY`` order (Hive's SQL, and acidstream's merge inserts). Update, delete and merge (Python,
SQL, the Mutation API) route existing rows by their ROW__ID's bucket; a change of a bucketed column is refused."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.acid.bucketing import BucketKeyOrder
from acidstream.catalog import Metastore
from acidstream.errors import BucketIdException
from acidstream.mutate import BucketIdResolver, MutatorClient, MutatorCoordinator, RecordIdentifier
from acidstream.mutate.changes import Changes
from acidstream.mutate.record_id import ROW_ID_TYPE, row_id_arrays

SWAPPED = "testing.swapped"
ROWS = 48


@pytest.fixture
def swapped(ms: Metastore) -> str:
    return make_swapped(ms)


def make_swapped(ms: Metastore) -> str:
    """The table with ROWS rows streamed, a third of which Hive's SQL would have put in another bucket."""
    ms.execute(
        "CREATE TABLE testing.swapped (a int, b string, c bigint) CLUSTERED BY (b, a) INTO 4 BUCKETS "
        "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    with (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("testing")
        .with_table("swapped")
        .with_record_writer(StrictDelimitedInputWriter.builder().build())
        .connect()
    ) as conn:
        conn.begin_transaction()
        conn.write_batch(
            pa.table(
                {
                    "a": pa.array(range(ROWS), pa.int32()),
                    "b": [f"k{i}" for i in range(ROWS)],
                    "c": pa.array(range(ROWS), pa.int64()),
                }
            )
        )
        conn.commit_transaction()
    return SWAPPED


def placements(ms: Metastore, name: str) -> tuple[list[dict[str, Any]], dict[BucketKeyOrder, np.ndarray]]:
    """The rows (by a) with their ROW__ID's bucket as ``bucket``, and each Hive writer's bucket for them."""
    data = ms.table(name).scan(with_row_id=True).to_arrow().sort_by("a")
    buckets = row_id_arrays(data.column("ROW__ID"))[3]
    rows = [{**r, "bucket": int(b)} for r, b in zip(data.to_pylist(), buckets, strict=True)]
    definition = ms.table(name).definition()
    hashed = {o: BucketIdResolver(definition, o).compute_bucket_ids(data) for o in BucketKeyOrder}
    return rows, hashed


def test_streamed_rows_sit_where_hive_streaming_puts_them(ms: Metastore, swapped: str) -> None:
    rows, hashed = placements(ms, swapped)
    buckets = np.array([r["bucket"] for r in rows])
    assert (buckets == hashed[BucketKeyOrder.TABLE]).all()
    assert (buckets != hashed[BucketKeyOrder.CLUSTERED_BY]).sum() >= ROWS // 4  # the orders differ here


def test_python_update_delete_and_merge_take_streamed_rows(ms: Metastore, swapped: str) -> None:
    table = ms.table(swapped)
    assert table.update(pc.field("a") < 10, {"c": pc.field("c") + 1000}) == {
        "inserted": 0,
        "updated": 10,
        "deleted": 0,
    }
    assert table.delete(pc.field("a") >= 40)["deleted"] == 8
    source = pd.DataFrame(
        {
            "a": pd.array([10, 11, 12, 100, 101], "int32"),
            "b": ["k10", "k11", "k12", "k100", "k101"],
            "c": [2010, 2011, 2012, 2100, 2101],
        }
    )
    # keys (a, b) are the bucketed columns: a merge split by bucket would miss rows of the other placement
    assert table.merge(source, on=["a", "b"], workers=2) == {"inserted": 2, "updated": 3, "deleted": 0}
    assert table.merge(source.iloc[:1], on=["a"], when_matched="delete", when_not_matched=None) == {
        "inserted": 0,
        "updated": 0,
        "deleted": 1,
    }
    rows, hashed = placements(ms, swapped)
    expected = {i: i + 1000 for i in range(10)} | {i: i for i in range(13, 40)} | {11: 2011, 12: 2012}
    assert {r["a"]: r["c"] for r in rows} == expected | {100: 2100, 101: 2101}
    for i, row in enumerate(rows):
        # updated rows stay in their ROW__ID's bucket (streaming's); new rows go where Hive's SQL puts them
        order = BucketKeyOrder.CLUSTERED_BY if row["a"] >= 100 else BucketKeyOrder.TABLE
        assert row["bucket"] == hashed[order][i], row


def test_sql_update_delete_and_merge_take_streamed_rows(ms: Metastore, swapped: str) -> None:
    assert ms.execute("UPDATE testing.swapped SET c = c * 2 WHERE a < 20") == [(0, 20, 0)]
    assert ms.execute("DELETE FROM testing.swapped WHERE a >= 30") == [(0, 0, 18)]
    ms.execute(
        "CREATE TABLE testing.src (a int, b string, c bigint) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    ms.table("testing.src").merge(
        pd.DataFrame({"a": pd.array([1, 25, 200], "int32"), "b": ["k1", "k25", "k200"], "c": [7, 8, 9]}),
        on=["a"],
    )
    assert ms.execute(
        "MERGE INTO testing.swapped t USING testing.src s ON t.a = s.a AND t.b = s.b "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    ) == [(1, 2, 0)]
    rows, hashed = placements(ms, swapped)
    assert {r["a"]: r["c"] for r in rows} == (
        {i: 2 * i for i in range(20)} | {i: i for i in range(20, 30)} | {1: 7, 25: 8, 200: 9}
    )
    new = [i for i, r in enumerate(rows) if r["a"] == 200]
    assert [rows[i]["bucket"] for i in new] == [hashed[BucketKeyOrder.CLUSTERED_BY][i] for i in new]


def test_a_merge_that_changes_a_bucketed_column_is_refused(ms: Metastore, swapped: str) -> None:
    table = ms.table(swapped)
    source = pd.DataFrame({"a": pd.array([3], "int32"), "b": ["moved"], "c": [0]})
    with pytest.raises(BucketIdException, match=r"bucketed column b of the row .* from k3 to moved"):
        table.merge(source, on=["a"])
    assert sorted(r["b"] for r in placements(ms, swapped)[0])[:1] == ["k0"]
    assert len(placements(ms, swapped)[0]) == ROWS


def test_mutation_api_takes_rows_of_either_placement(ms: Metastore, swapped: str) -> None:
    """Hive's coordinator checks each record's bucket against its bucketed columns: rows either of Hive's
    writers placed pass; a record whose bucketed columns changed does not."""
    client = MutatorClient.builder().with_metastore(ms).add_sink_table("testing", "swapped").build()
    client.connect()
    try:
        txn = client.new_transaction()
        (acid,) = client.get_tables()
        txn.begin()
        rows = ms.table(swapped).scan(with_row_id=True, snapshot=txn.snapshot()).to_arrow().to_pylist()
        moved = [r for r in rows if _clustered_bucket(acid, r) != RecordIdentifier.of(r["ROW__ID"]).bucket]
        assert moved
        row = moved[0]
        with MutatorCoordinator.builder().with_metastore(ms).with_table(acid).build() as coordinator:
            coordinator.update(None, {**row, "c": -1})
        with (
            pytest.raises(BucketIdException, match="rows never move between buckets"),
            MutatorCoordinator.builder().with_metastore(ms).with_table(acid).build() as coordinator,
        ):
            coordinator.update_batch(None, pa.Table.from_pylist([{**moved[1], "b": "elsewhere"}]))
        txn.commit()
    finally:
        client.close()
    after = {r["a"]: r["c"] for r in placements(ms, swapped)[0]}
    assert after[row["a"]] == -1 and len(after) == ROWS


def _clustered_bucket(acid: Any, row: dict[str, Any]) -> int:
    return BucketIdResolver(acid).compute_bucket_id({k: v for k, v in row.items() if k != "ROW__ID"})


def test_bucketed_values_compare_across_arrow_types(ms: Metastore) -> None:
    """A Spark task's target rows hold timestamps as UTC microseconds, the aligned source as the table's type:
    an unchanged bucketed value is unchanged, a changed one refused."""
    ms.execute(
        "CREATE TABLE testing.stamped (k int, ts timestamp) CLUSTERED BY (ts, k) INTO 2 BUCKETS "
        "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    changes = Changes(ms.table("testing.stamped").definition())
    row_id = pa.array([{"writeid": 1, "bucketid": 536870912, "rowid": 0}], ROW_ID_TYPE)
    target = pa.table(
        {
            "ROW__ID": row_id,
            "k": pa.array([1], pa.int32()),
            "ts": pa.array([1_700_000_000_123_456], pa.timestamp("us", tz="UTC")),
            "__part": pa.array([0], pa.int32()),
        }
    )
    same = pa.table(
        {"k": pa.array([1], pa.int32()), "ts": pa.array([1_700_000_000_123_456_000], pa.timestamp("ns"))}
    )
    one = np.array([0])
    assert changes.updates(target, [()], same, one, one).num_rows == 1
    moved = same.set_column(1, "ts", pa.array([0], pa.timestamp("ns")))
    with pytest.raises(BucketIdException, match="bucketed column ts"):
        changes.updates(target, [()], moved, one, one)
