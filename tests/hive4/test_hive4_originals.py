"""Hive 4 reads a table converted to ACID with its original (pre-ACID) files, as we do: synthetic ROW__IDs
(write id 0, the bucket from the file name, row ids running on across a bucket's copies), deletes of original
rows, later deltas, and a major compaction that absorbs the originals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as po
import pytest

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.catalog import Metastore
from acidstream.mutate import BucketIdResolver
from hive4.judge import judge
from hive4.referee import Referee

pytestmark = pytest.mark.hive4


@pytest.fixture
def ms(tmp_path: Path, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE db")
        yield m


@pytest.mark.parametrize("bucketed", [False, True], ids=["unbucketed", "bucketed"])
def test_original_files(hive4: Referee, ms: Metastore, bucketed: bool) -> None:
    clustered = "CLUSTERED BY (id) INTO 2 BUCKETS " if bucketed else ""
    ms.execute(
        f"CREATE TABLE db.t (id int, msg string) {clustered}STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    location = Path(ms.table("db.t").location)
    location.mkdir(parents=True, exist_ok=True)
    if bucketed:  # each file holds the rows its bucket would (Hive's bucketing hash)
        resolver = BucketIdResolver(ms.table("db.t"))
        even = [i for i in range(1, 7) if resolver.compute_bucket_id({"id": i}) == 0]
        files = [
            ("000000_0", even[:-1]),
            ("000000_0_copy_1", even[-1:]),
            ("000001_0", sorted({*range(1, 7)} - {*even})),
        ]
    else:
        files = [("000000_0", [2, 4]), ("000000_0_copy_1", [6]), ("000001_0", [1, 3, 5])]
    for name, ids in files:
        po.write_table(
            pa.table({"id": pa.array(ids, pa.int32()), "msg": [f"o{i}" for i in ids]}), location / name
        )
    originals = [(i, f"o{i}") for i in range(1, 7)]
    snapshots = [(ms.snapshot(), originals)]  # with the rows committed then
    with (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("db")
        .with_table("t")
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    ) as conn:
        conn.begin_transaction()
        conn.write_batch(pa.table({"id": pa.array([7, 8], pa.int32()), "msg": ["new", "new"]}))
        conn.commit_transaction()
    snapshots.append((ms.snapshot(), [*originals, (7, "new"), (8, "new")]))
    ms.table("db.t").delete(pc.is_in(pc.field("id"), pa.array([3, 6, 8], pa.int32())))
    ms.table("db.t").update(pc.field("id") == 4, {"msg": "updated"})
    final = [(1, "o1"), (2, "o2"), (4, "updated"), (5, "o5"), (7, "new")]
    snapshots.append((ms.snapshot(), final))
    for snap, then in snapshots:
        judge(hive4, ms, "db.t", snap, expected=then)
    ms.execute("ALTER TABLE db.t COMPACT 'major' AND WAIT")
    judge(hive4, ms, "db.t", expected=final)
