"""A table Hive's writers filled takes acidstream's updates, deletes and merges, as Hive 4's reader judges them.

The table's columns are ``(a, b, c)`` and it is ``CLUSTERED BY (b, a)``: Hive's streaming client (Hive 3.1.3's
``HiveStreamingConnection``, on the Hive 4 metastore) hashes the bucket columns in the table's column order,
Hive's SQL in ``CLUSTERED BY`` order (``GenBucketingSortingDest``: no SQL engine runs here, so those rows are
written by Hive's ``OrcRecordUpdater`` into the buckets that order gives, as an INSERT's reducers would). Rows of
one key can so sit in two buckets; acidstream's update, delete and merge (Python and SQL) route every existing
row by its ROW__ID, never re-hashing it, and put new rows where Hive's SQL would.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream import Metastore
from acidstream.acid.bucketing import BucketKeyOrder
from acidstream.mutate import BucketIdResolver
from acidstream.mutate.record_id import row_id_arrays
from acidstream.storage import table_filesystem
from hive4.judge import judge
from hive4.referee import Referee, Streamer
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

_dbs = itertools.count()
COLUMNS = [("a", "int"), ("b", "string"), ("c", "bigint")]


@pytest.fixture
def ms(hive4_metastore: str) -> Iterator[Metastore]:
    import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")
    with Metastore.connect(hive4_metastore) as m:
        yield m


def rows(keys: range, c: int) -> list[tuple[int, str, int]]:
    return [(i, f"k{i}", c + i) for i in keys]


def hive_sql_insert(
    hive4: Referee, uri: str, ms: Metastore, table: str, values: list[tuple[int, str, int]]
) -> None:
    """One committed txn whose rows Hive's OrcRecordUpdater writes into the buckets Hive's SQL hashes them to."""
    db, name = table.split(".")
    [txn] = hive4.metastore(uri, "open_txns", db=db, table=name, count=1)["txns"]
    [write_id] = hive4.metastore(uri, "allocate_write_ids", db=db, table=name, txns=[txn])["write_ids"]
    data = pa.table(
        {
            "a": pa.array([v[0] for v in values], pa.int32()),
            "b": [v[1] for v in values],
            "c": pa.array([v[2] for v in values], pa.int64()),
        }
    )
    buckets = BucketIdResolver(ms.table(table).definition(), BucketKeyOrder.CLUSTERED_BY).compute_bucket_ids(
        data
    )
    location = table_filesystem(ms.table(table).location)[1]
    for bucket in sorted(set(buckets.tolist())):
        hive4.write(
            location,
            COLUMNS,
            [("insert", write_id, list(v)) for v, b in zip(values, buckets, strict=True) if b == bucket],
            bucket=bucket,
            min_write_id=write_id,
            max_write_id=write_id,
            statement_id=0,
        )
    hive4.metastore(uri, "commit_txn", db=db, table=name, txn=txn)


def placed(ms: Metastore, table: str) -> dict[int, tuple[int, dict[BucketKeyOrder, int]]]:
    """Each row's bucket (by a) with the bucket each of Hive's writers would hash it to."""
    data = ms.table(table).scan(with_row_id=True).to_arrow()
    buckets = row_id_arrays(data.column("ROW__ID"))[3]
    definition = ms.table(table).definition()
    hashed = {o: BucketIdResolver(definition, o).compute_bucket_ids(data) for o in BucketKeyOrder}
    return {
        a: (int(buckets[i]), {o: int(h[i]) for o, h in hashed.items()})
        for i, a in enumerate(data.column("a").to_pylist())
    }


def test_rows_of_hive_sql_and_hive_streaming_take_our_mutations(
    hive4: Referee, hive4_streamer: Streamer, hive4_metastore: str, ms: Metastore
) -> None:
    db = f"placed{next(_dbs)}"
    table = f"{db}.t"
    ms.execute(f"CREATE DATABASE {db}")
    ms.execute(
        f"CREATE TABLE {table} (a int, b string, c bigint) CLUSTERED BY (b, a) INTO 4 BUCKETS STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    expected: dict[int, tuple[int, str, int]] = {}
    hive4_streamer.connect(hive4_metastore, db, "t", batch=1, writer="delimited", static=None)
    try:
        streamed = rows(range(0, 24), 0)
        hive4_streamer.transaction([f"{a},{b},{c}" for a, b, c in streamed], commit=True)
    finally:
        hive4_streamer.close_connection()
    expected |= {r[0]: r for r in streamed}
    by_sql = rows(range(100, 124), 0)
    hive_sql_insert(hive4, hive4_metastore, ms, table, by_sql)
    expected |= {r[0]: r for r in by_sql}
    judge(hive4, ms, table, expected=expected.values())
    where = placed(ms, table)
    # Hive's streaming client hashes in the table's column order, Hive's SQL in CLUSTERED BY order: they differ
    assert all(b == h[BucketKeyOrder.TABLE] for a, (b, h) in where.items() if a < 100)
    assert all(b == h[BucketKeyOrder.CLUSTERED_BY] for a, (b, h) in where.items() if a >= 100)
    assert sum(h[BucketKeyOrder.TABLE] != h[BucketKeyOrder.CLUSTERED_BY] for _, h in where.values()) >= 12

    t = ms.table(table)
    thirds = pa.array([a for a in expected if a % 3 == 0], pa.int32())
    assert t.update(pc.is_in(pc.field("a"), thirds), {"c": pc.field("c") + 1000})["updated"] == 16
    expected |= {a: (a, b, c + 1000) for a, b, c in expected.values() if a % 3 == 0}
    judge(hive4, ms, table, expected=expected.values())
    assert t.delete(pc.is_in(pc.field("a"), pa.array([1, 2, 101, 102], pa.int32())))["deleted"] == 4
    for a in (1, 2, 101, 102):
        del expected[a]
    judge(hive4, ms, table, expected=expected.values())
    source = pd.DataFrame(
        {
            "a": pd.array([4, 5, 104, 105, 200, 201], "int32"),
            "b": ["k4", "k5", "k104", "k105", "k200", "k201"],
            "c": [-4, -5, -104, -105, -200, -201],
        }
    )
    assert t.merge(source, on=["a", "b"], workers=2) == {"inserted": 2, "updated": 4, "deleted": 0}
    expected |= {a: (a, b, c) for a, b, c in source.itertuples(index=False)}
    judge(hive4, ms, table, expected=expected.values())
    assert ms.execute(f"UPDATE {table} SET c = c * 2 WHERE a IN (7, 8, 107, 108, 200)") == [(0, 5, 0)]
    expected |= {a: (a, b, c * 2) for a, b, c in list(expected.values()) if a in (7, 8, 107, 108, 200)}
    assert ms.execute(f"DELETE FROM {table} WHERE a IN (10, 110)") == [(0, 0, 2)]
    del expected[10], expected[110]
    judge(hive4, ms, table, expected=expected.values())
    where = placed(ms, table)
    assert all(where[a][0] == where[a][1][BucketKeyOrder.CLUSTERED_BY] for a in (200, 201))  # new: Hive SQL's
    # updated streamed rows stayed in the buckets Hive's streaming client put them in
    assert all(where[a][0] == where[a][1][BucketKeyOrder.TABLE] for a in (0, 3, 4, 5, 7, 8))
