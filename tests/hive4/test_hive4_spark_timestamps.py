"""Spark's batch writer stores timestamps before 1970 with a fraction of a second so that Hive 4 reads them
back exactly (docs/format.md, Event files: timestamps)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acidstream.catalog import Metastore
from hive4.judge import hive_rows
from hive4.referee import Referee

pytestmark = pytest.mark.hive4

VALUES = [
    "1969-12-31 23:59:58.5",
    "1969-12-31 23:59:59.000999",
    "1900-01-01 00:00:00.123456",
    "1965-06-30 12:00:00.999999",
    "2024-02-29 12:34:56.123456",
]


def test_spark_writes_old_timestamps(spark: Any, hive4: Referee, tmp_path: Path, warehouse: Path) -> None:
    from acidstream.spark import register

    url = f"sqlite:///{tmp_path / 'ms.db'}"
    with Metastore.connect(url, warehouse=str(warehouse)) as ms:
        ms.execute("CREATE DATABASE db")
        ms.execute(
            "CREATE TABLE db.s (id int, ts timestamp) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
    acid_spark = register(spark)
    rows = " UNION ALL ".join(f"SELECT {i} id, TIMESTAMP'{ts}' ts" for i, ts in enumerate(VALUES))
    frame = acid_spark.sql(rows).repartition(2)
    frame.write.format("acidstream").options(metastore=url, warehouse=str(warehouse)).mode("append").save(
        "db.s"
    )
    with Metastore.connect(url, warehouse=str(warehouse)) as ms:
        txns = ms.snapshot()
        for vectorized in (False, True):
            got = hive_rows(hive4, ms, "db.s", txns, vectorized=vectorized, splits="etl")
            assert sorted(row for _, row in got) == list(enumerate(VALUES))
