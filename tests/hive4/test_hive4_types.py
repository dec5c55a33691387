"""Hive 4 reads every column type our writers write, under the table's schema (Hive's schema evolution checks the
files' ORC types against it): the values it returns are ours."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.catalog import Metastore
from hive4.judge import as_hive, hive_rows, our_rows
from hive4.referee import Referee

pytestmark = pytest.mark.hive4

COLUMNS = (
    "id int, ti tinyint, si smallint, bi bigint, f float, d double, b boolean, s string, vc varchar(10), "
    "c char(5), dec decimal(10,2), wide decimal(38,10), day date, ts timestamp, bin binary, "
    "arr array<int>, m map<string,int>, st struct<a:int,b:string>"
)


@pytest.fixture
def ms(tmp_path: Path, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE db")
        yield m


def test_every_type(hive4: Referee, ms: Metastore) -> None:
    ms.execute(f"CREATE TABLE db.t ({COLUMNS}) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
    conn = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("db")
        .with_table("t")
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter("|").build())
        .connect()
    )
    schema = ms.table("db.t").scan().schema
    values = {
        "id": [1, 2, 3],
        "ti": [1, -128, None],
        "si": [-2, 32767, None],
        "bi": [3000000000, -9223372036854775808, None],
        "f": [1.5, 0.0, None],
        "d": [-2.25, 1e300, None],
        "b": [True, False, None],
        "s": ["héllo", "", None],
        "vc": ["abc", "0123456789", None],
        "c": ["ab", "abcde", None],
        "dec": [Decimal("12.30"), Decimal("-0.01"), None],
        "wide": [Decimal("-1234567890123456789012345678.0123456789"), Decimal(0), None],
        "day": [dt.date(2024, 2, 29), dt.date(1970, 1, 1), None],
        "ts": [dt.datetime(2024, 2, 29, 12, 34, 56, 123456), dt.datetime(1969, 12, 31, 23, 59, 59), None],
        "bin": [b"binary", b"\x00", None],
        "arr": [[1, 2, None], [], None],
        "m": [[("k1", 1), ("k2", None)], [], None],
        "st": [{"a": 7, "b": "x"}, {"a": None, "b": None}, None],
    }
    with conn:
        conn.begin_transaction()
        conn.write_batch(pa.table(values, schema=schema))
        conn.commit_transaction()
    ms.table("db.t").update(pc.field("id") == 2, {"s": "updated"})
    txns = ms.snapshot()
    theirs = hive_rows(hive4, ms, "db.t", txns)
    ours = [(rid, tuple(as_hive(v) for v in row)) for rid, row in our_rows(ms, "db.t", txns)]
    assert [rid for rid, _ in ours] == [rid for rid, _ in theirs]
    for (_, mine), (_, hive) in zip(ours, theirs, strict=True):
        names = [c.split()[0] for c in COLUMNS.split(", ")]
        assert dict(zip(names, mine, strict=True)) == dict(zip(names, hive, strict=True))
    for vectorized, splits in ((True, "hybrid"), (False, "etl"), (True, "etl")):
        assert hive_rows(hive4, ms, "db.t", txns, vectorized=vectorized, splits=splits) == theirs
