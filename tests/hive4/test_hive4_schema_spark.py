"""Hive 4 judges what acidstream's Spark data source writes into a table altered since its first files (a column
widened, one added): an append, a merge, an update and a delete, each on rows of both schemas, on our metastore
and on a Hive Metastore; Spark's own read returns the same rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acidstream import spark as acid
from acidstream.catalog import Metastore
from hive4.judge import judge
from hive4.referee import Referee
from hive4.schema_support import both_metastores, stream

pytestmark = pytest.mark.hive4


@pytest.fixture(params=["ours", "hive"])
def ms(request: pytest.FixtureRequest, tmp_path: Path, warehouse: Path) -> Iterator[tuple[Metastore, str]]:
    yield from both_metastores(request, tmp_path, warehouse)


def test_spark_appends_and_mutates_rows_of_both_schemas(
    spark: Any, hive4: Referee, ms: tuple[Metastore, str], warehouse: Path
) -> None:
    m, db = ms
    t = f"{db}.s"
    url = m.url
    opts = (
        {"metastore": url} if url.startswith("thrift://") else {"metastore": url, "warehouse": str(warehouse)}
    )
    m.execute(
        f"CREATE TABLE {t} (id int, msg string, n int) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    stream(m, t, {"id": [1, 2, 3, 4], "msg": ["a", "b", "c", "d"], "n": [1, 2, 3, 4]})
    m.execute(f"ALTER TABLE {t} CHANGE n n bigint")
    m.execute(f"ALTER TABLE {t} ADD COLUMNS (tag string)")
    model = {i: (i, m_, i, None) for i, m_ in zip((1, 2, 3, 4), "abcd", strict=True)}

    acid_spark = acid.register(spark)
    new = acid_spark.createDataFrame([(5, "e", 2**40, "spark")], "id int, msg string, n bigint, tag string")
    new.write.format("acidstream").options(**opts).mode("append").save(t)
    model[5] = (5, "e", 2**40, "spark")
    judge(hive4, m, t, expected=model.values())

    source = acid_spark.createDataFrame(
        [(1, "a", 2**41, "merged"), (6, "f", 6, "merged")], "id int, msg string, n bigint, tag string"
    )
    assert acid.merge(acid_spark, t, source, on=["id"], **opts) == {"inserted": 1, "updated": 1, "deleted": 0}
    model[1] = (1, "a", 2**41, "merged")
    model[6] = (6, "f", 6, "merged")
    assert (
        acid.update(acid_spark, t, "id IN (2, 5)", {"tag": "'updated'", "n": "n + 1"}, **opts)["updated"] == 2
    )
    model[2] = (2, "b", 3, "updated")
    model[5] = (5, "e", 2**40 + 1, "updated")
    assert acid.delete(acid_spark, t, "id = 3", **opts)["deleted"] == 1
    del model[3]
    judge(hive4, m, t, expected=model.values())
    read = acid_spark.read.format("acidstream").options(**opts).load(t)
    assert sorted(tuple(r) for r in read.collect()) == sorted(model.values())
