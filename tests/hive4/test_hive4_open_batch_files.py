"""Hive 4 reads a table while a transaction batch has files its open (or aborted) transaction created: a new
bucket of a partition, or a new dynamic partition. Such a file holds nothing until its first flush, 0 bytes as
Hive's own writer leaves it, which Hive's footer-reading (ETL) split generation skips: a file holding only the
ORC header made it fail with 'chunk is null'."""

from __future__ import annotations

import os
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


def connect(ms: Metastore, table: str) -> StreamingConnection:
    return (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("db")
        .with_table(table)
        .with_transaction_batch_size(10)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    )


def bucket_files(root: str) -> dict[str, int]:
    """Every bucket file under ``root`` (no side files), with its size."""
    return {
        os.path.join(d, f): os.path.getsize(os.path.join(d, f))
        for d, _, files in os.walk(root)
        for f in files
        if f.startswith("bucket_") and not f.endswith("_flush_length")
    }


def test_new_buckets_of_an_open_and_an_aborted_transaction(hive4: Referee, ms: Metastore) -> None:
    ms.execute(
        "CREATE TABLE db.t (id int, msg string) CLUSTERED BY (id) INTO 4 BUCKETS STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    location = ms.table("db.t").location
    conn = connect(ms, "t")
    try:
        conn.begin_transaction()
        conn.write(b"1,committed")
        conn.commit_transaction()
        committed = bucket_files(location)
        assert len(committed) == 1
        conn.begin_transaction()
        ids = list(range(2, 40))  # into every bucket: three of them new files of the batch
        conn.write_batch(pa.table({"id": pa.array(ids, pa.int32()), "msg": ["open"] * len(ids)}))
        assert [r for _, r in judge(hive4, ms, "db.t")] == [(1, "committed")]
        opened = {p: n for p, n in bucket_files(location).items() if p not in committed}
        assert len(opened) == 3 and set(opened.values()) == {0}  # nothing flushed: nothing written
        conn.abort_transaction()
        assert [r for _, r in judge(hive4, ms, "db.t")] == [(1, "committed")]
        assert {p: bucket_files(location)[p] for p in opened} == opened  # until the batch's next flush
        conn.begin_transaction()
        conn.write(b"50,later")
        conn.commit_transaction()
        judge(hive4, ms, "db.t")
    finally:
        conn.close()
    assert sorted(r for _, r in judge(hive4, ms, "db.t")) == [(1, "committed"), (50, "later")]


def test_a_new_dynamic_partition_of_an_open_and_an_aborted_transaction(hive4: Referee, ms: Metastore) -> None:
    ms.execute(
        "CREATE TABLE db.p (id int, msg string) PARTITIONED BY (country string) STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    conn = connect(ms, "p")
    try:
        conn.begin_transaction()
        conn.write(b"1,committed,France")
        conn.commit_transaction()
        conn.begin_transaction()
        conn.write_batch(pa.table({"id": pa.array([2], pa.int32()), "msg": ["open"], "country": ["Japan"]}))
        france = ms.table("db.p").location + "/country=France"
        japan = ms.table("db.p").location + "/country=Japan"
        assert [tuple(p.values) for p in ms.list_partitions("db.p")] == [("France",), ("Japan",)]
        assert [r for _, r in judge(hive4, ms, "db.p")] == [(1, "committed", "France")]
        assert set(bucket_files(japan).values()) == {0}
        conn.abort_transaction()
        assert [r for _, r in judge(hive4, ms, "db.p")] == [(1, "committed", "France")]
        assert set(bucket_files(japan).values()) == {0}
        conn.begin_transaction()
        conn.write(b"3,later,Japan")
        conn.commit_transaction()
        assert min(bucket_files(japan).values()) > 0 and min(bucket_files(france).values()) > 0
        judge(hive4, ms, "db.p")
    finally:
        conn.close()
    assert sorted(r for _, r in judge(hive4, ms, "db.p")) == [
        (1, "committed", "France"),
        (3, "later", "Japan"),
    ]
