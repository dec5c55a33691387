"""Hive 4 reads what our streaming connections write: batches of 1 and 10 transactions, committed, aborted
and still open, static and dynamic partitions, at every snapshot: exactly the rows committed then."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.catalog import Metastore
from hive4.judge import judge
from hive4.referee import Referee

pytestmark = pytest.mark.hive4


@pytest.fixture
def ms(tmp_path: Path, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE db")
        yield m


def connect(ms: Metastore, table: str, batch: int, static: list[str] | None = None) -> StreamingConnection:
    builder = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("db")
        .with_table(table)
        .with_transaction_batch_size(batch)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
    )
    if static is not None:
        builder = builder.with_static_partition_values(static)
    return builder.connect()


@pytest.mark.parametrize("batch", [1, 10])
@pytest.mark.parametrize("bucketed", [False, True], ids=["unbucketed", "bucketed"])
def test_batches_committed_aborted_and_open(
    hive4: Referee, ms: Metastore, batch: int, bucketed: bool
) -> None:
    clustered = "CLUSTERED BY (id) INTO 3 BUCKETS " if bucketed else ""
    ms.execute(
        f"CREATE TABLE db.t (id int, msg string) {clustered}STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    snapshots = []  # (snapshot, the rows committed then)
    committed: list[tuple[int, str]] = []
    conn = connect(ms, "t", batch)
    for n in range(4):
        conn.begin_transaction()
        written = [(i, f"m{i}") for i in range(n * 10, n * 10 + 7)]
        for i, msg in written:
            conn.write(f"{i},{msg}".encode())
        if n == 2:
            conn.abort_transaction()
        else:
            conn.commit_transaction()
            committed += written
        snapshots.append((ms.snapshot(), list(committed)))
    conn.begin_transaction()  # left open: written, flushed by nobody's commit
    conn.write_batch(pa.table({"id": [900, 901], "msg": ["open", "open"]}))
    snapshots.append((ms.snapshot(), list(committed)))
    conn.commit_transaction()
    committed += [(900, "open"), (901, "open")]
    conn.begin_transaction()  # open again; the batch (of 10) stays open under the readers
    conn.write(b"902,open")
    snapshots.append((ms.snapshot(), list(committed)))
    try:
        for snap, then in snapshots:
            judge(hive4, ms, "db.t", snap, expected=then)
        judge(hive4, ms, "db.t", expected=committed)
    finally:
        conn.close()
    judge(hive4, ms, "db.t", expected=committed)


@pytest.mark.parametrize("batch", [1, 10])
def test_static_and_dynamic_partitions(hive4: Referee, ms: Metastore, batch: int) -> None:
    ms.execute(
        "CREATE TABLE db.p (id int, msg string) PARTITIONED BY (continent string, country string) "
        "CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    snapshots = []  # (snapshot, the rows committed then)
    committed: list[tuple[object, ...]] = []
    with connect(ms, "p", batch, ["Asia", "India"]) as static:
        for n in range(3):
            static.begin_transaction()
            static.write_batch(pa.table({"id": [n, n + 100], "msg": [f"s{n}", f"t{n}"]}))
            static.commit_transaction()
            committed += [(n, f"s{n}", "Asia", "India"), (n + 100, f"t{n}", "Asia", "India")]
            snapshots.append((ms.snapshot(), list(committed)))
    dynamic = connect(ms, "p", batch)
    for n in range(3):
        dynamic.begin_transaction()
        written = [
            (n * 10 + i, f"d{n}", continent, country)
            for i, (continent, country) in enumerate(
                [("Asia", "India"), ("Europe", "France"), ("Asia", "Japan")]
            )
        ]
        for row in written:
            dynamic.write(",".join(map(str, row)).encode())
        if n == 1:
            dynamic.abort_transaction()
        else:
            dynamic.commit_transaction()
            committed += written
        snapshots.append((ms.snapshot(), list(committed)))
    dynamic.begin_transaction()
    dynamic.write(b"99,open,Europe,France")
    snapshots.append((ms.snapshot(), list(committed)))
    try:
        for snap, then in snapshots:
            judge(hive4, ms, "db.p", snap, expected=then)
    finally:
        dynamic.close()
    assert len(judge(hive4, ms, "db.p", expected=committed)) == 6 + 6
