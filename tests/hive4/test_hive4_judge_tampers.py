"""The judge's own mutation test: each way of damaging a real table that two readers can read alike must make
the judge fail, because it holds the rows to what the test committed (and to unique ROW__IDs), not only to our
reader. The table: a closed batch, an open batch of 10 (two txns committed, one aborted between them, its
files and side files live), and a delete of rows of the first batch."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc
import pytest

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.catalog import Metastore
from hive4.judge import judge
from hive4.referee import Referee

pytestmark = pytest.mark.hive4

COLUMNS = [("id", "int"), ("msg", "string")]


class Built:
    """The table ``db.t``, its metastore's database file, the rows committed, and the open connection."""

    def __init__(self, ms: Metastore, db_file: Path, conn: StreamingConnection) -> None:
        self.ms, self.db_file, self.conn = ms, db_file, conn
        self.location = Path(ms.table("db.t").location)
        self.committed = {(i, "a") for i in range(4, 10)} | {(i, "b") for i in range(10, 20)}
        self.committed |= {(i, "c") for i in range(20, 30)}

    def only(self, pattern: str) -> Path:
        [found] = sorted(self.location.glob(pattern))
        return found


def connect(ms: Metastore, batch: int) -> StreamingConnection:
    """Every write flushed at once (a stripe and a side-file length each): an aborted txn's rows reach the
    file, as they do in Hive's when a batch's writer flushes before the abort."""
    return (
        StreamingConnection.builder()
        .with_configuration({"max_buffered_bytes": 0})
        .with_metastore(ms)
        .with_database("db")
        .with_table("t")
        .with_transaction_batch_size(batch)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    )


def txn(conn: StreamingConnection, ids: range, msg: str, *, commit: bool) -> None:
    conn.begin_transaction()
    conn.write_batch(pa.table({"id": pa.array(ids, pa.int32()), "msg": [msg] * len(ids)}))
    conn.commit_transaction() if commit else conn.abort_transaction()


@pytest.fixture
def built(tmp_path: Path, warehouse: Path) -> Iterator[Built]:
    db_file = tmp_path / "ms.db"
    with Metastore.connect(f"sqlite:///{db_file}", warehouse=str(warehouse)) as ms:
        ms.execute("CREATE DATABASE db")
        ms.execute(
            "CREATE TABLE db.t (id int, msg string) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
            "TBLPROPERTIES ('transactional'='true')"
        )
        with connect(ms, 1) as closed:  # write id 1: delta_0000001_0000001
            txn(closed, range(0, 10), "a", commit=True)
        conn = connect(ms, 10)  # write ids 2..11: delta_0000002_0000011, left open
        txn(conn, range(10, 20), "b", commit=True)
        txn(conn, range(100, 105), "x", commit=False)
        txn(conn, range(20, 30), "c", commit=True)
        ms.table("db.t").delete(pc.field("id") < 4)  # write id 12: delete_delta_0000012_0000012
        try:
            yield Built(ms, db_file, conn)
        finally:
            conn.close()


def delete_the_delete_delta(t: Built, hive4: Referee, tmp: Path) -> None:
    shutil.rmtree(t.only("delete_delta_*"))


def change_a_delete_events_row_id(t: Built, hive4: Referee, tmp: Path) -> None:
    """Rewrite one delete delta file with Hive's own writer, its last event's rowId moved past every row (the
    events stay in ROW__ID order)."""
    target = sorted(t.only("delete_delta_*").glob("bucket_*"))[0]
    events = orc.read_table(target).to_pylist()
    write_id = events[0]["currentTransaction"]
    ops = [
        (
            "delete",
            write_id,
            [e["originalTransaction"], e["bucket"], e["rowId"] + (1000 if k == len(events) - 1 else 0)],
        )
        for k, e in enumerate(events)
    ]
    bucket = int(target.name.removeprefix("bucket_"))
    hive4.write(tmp, COLUMNS, ops, bucket=bucket, min_write_id=write_id, max_write_id=write_id)
    [forged] = tmp.glob(f"delete_delta_*/{target.name}")
    shutil.copyfile(forged, target)


def rename_a_bucket_file(t: Built, hive4: Referee, tmp: Path) -> None:
    """The first batch's bucket 0 (rows the delete deleted among them) becomes a bucket the deletes never name."""
    delta = t.only("delta_0000001_0000001")
    (delta / "bucket_00000").rename(delta / "bucket_00002")


def cut_a_side_file_back(t: Built, hive4: Referee, tmp: Path) -> None:
    """Every side file of the open batch loses its last length: the last commit's rows are cut off, as for a
    reader of a stale side file."""
    sides = sorted(t.only("delta_0000002_0000011").glob("*_flush_length"))
    assert sides and all(side.stat().st_size >= 16 for side in sides)
    for side in sides:
        side.write_bytes(side.read_bytes()[:-8])


def copy_a_delta(t: Built, hive4: Referee, tmp: Path) -> None:
    """The first batch's delta copied under the delete's (committed) write id."""
    shutil.copytree(t.only("delta_0000001_0000001"), t.location / "delta_0000012_0000012")


def mark_the_aborted_txn_committed(t: Built, hive4: Referee, tmp: Path) -> None:
    with sqlite3.connect(t.db_file) as db:
        assert db.execute("UPDATE txns SET txn_state = 'c' WHERE txn_state = 'a'").rowcount == 1


TAMPERS: list[Callable[[Built, Referee, Path], None]] = [
    delete_the_delete_delta,
    change_a_delete_events_row_id,
    rename_a_bucket_file,
    cut_a_side_file_back,
    copy_a_delta,
    mark_the_aborted_txn_committed,
]


def test_the_untampered_table_passes(hive4: Referee, built: Built) -> None:
    judge(hive4, built.ms, "db.t", expected=built.committed)


@pytest.mark.parametrize("tamper", TAMPERS, ids=[t.__name__ for t in TAMPERS])
def test_each_tamper_fails_the_judge(
    hive4: Referee, built: Built, tamper: Callable[[Built, Referee, Path], None], tmp_path: Path
) -> None:
    tamper(built, hive4, tmp_path / "forged")
    with pytest.raises(AssertionError) as failed:
        judge(hive4, built.ms, "db.t", expected=built.committed)
    print(f"{tamper.__name__}: {str(failed.value)[:300]}")
