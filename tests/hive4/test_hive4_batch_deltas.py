"""Hive 4 reads the layout our transaction batches write on object stores, one ``delta_w_w`` per txn (forced
on a local directory with ``delta_per_transaction``: the same names and files as on S3), at every snapshot:
txns committed, aborted and still open in a batch of 10, static and dynamic partitions, a compaction beside
an open batch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.acid.writeids import ValidTxnList
from acidstream.catalog import Metastore
from hive4.judge import judge
from hive4.referee import Referee

pytestmark = pytest.mark.hive4

#: the object-store layout, and every insert flushed: an open txn's rows are in its files already
CONFIG = {"delta_per_transaction": True, "max_buffered_bytes": 0}


@pytest.fixture
def ms(tmp_path: Path, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE db")
        m.execute(
            "CREATE TABLE db.p (id int, msg string) PARTITIONED BY (continent string, country string) "
            "CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        yield m


def connect(ms: Metastore, static: list[str] | None = None) -> StreamingConnection:
    builder = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("db")
        .with_table("p")
        .with_transaction_batch_size(10)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .with_configuration(CONFIG)
    )
    if static is not None:
        builder = builder.with_static_partition_values(static)
    return builder.connect()


PLACES = [("Asia", "India"), ("Europe", "France"), ("Asia", "Japan")]


def test_one_delta_per_txn_at_every_snapshot(hive4: Referee, ms: Metastore) -> None:
    snapshots: list[tuple[ValidTxnList, list[tuple[object, ...]]]] = []  # with the rows committed then
    committed: list[tuple[object, ...]] = []
    with connect(ms, ["Asia", "India"]) as static:
        for n in range(3):
            static.begin_transaction()
            static.write(f"{n},s{n}".encode())
            if n == 1:
                static.abort_transaction()
            else:
                static.commit_transaction()
                committed.append((n, f"s{n}", "Asia", "India"))
            snapshots.append((ms.snapshot(), list(committed)))
    dynamic = connect(ms)
    try:
        for n in range(5):
            dynamic.begin_transaction()
            written = [(100 + n * 10 + i, f"d{n}", *place) for i, place in enumerate(PLACES)]
            for row in written:
                dynamic.write(",".join(map(str, row)).encode())
            snapshots.append((ms.snapshot(), list(committed)))  # open, its rows in its delta's files
            if n in (1, 2):
                dynamic.abort_transaction()
            else:
                dynamic.commit_transaction()
                committed += written
            snapshots.append((ms.snapshot(), list(committed)))
        ms.compact("db.p", "continent=Asia/country=India", kind="minor", wait=True)
        dynamic.begin_transaction()  # open beside the compaction's output
        dynamic.write(b"999,open,Europe,France")
        snapshots.append((ms.snapshot(), list(committed)))
        for snap, then in snapshots:
            judge(hive4, ms, "db.p", snap, expected=then)
    finally:
        dynamic.close()
    france = Path(ms.table("db.p").location) / "continent=Europe" / "country=France"
    with_data = {f.parent.name for f in france.glob("*/bucket_*")}
    assert with_data == {"delta_0000011_0000011", "delta_0000014_0000014", "delta_0000015_0000015"}
    assert not list(france.glob("*/*_flush_length"))
    assert len(judge(hive4, ms, "db.p", expected=committed)) == 2 + 3 * 3
