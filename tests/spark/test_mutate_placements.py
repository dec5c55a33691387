"""Spark's merge, update and delete take rows wherever Hive's writers placed them: on a table ``CLUSTERED BY
(b, a)`` whose columns are ``(a, b, c)``, streamed rows sit where Hive's streaming client hashes them (table
column order), not where Hive's SQL would (``CLUSTERED BY`` order); existing rows go by their ROW__ID."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from acidstream import spark as acid
from acidstream.acid.bucketing import BucketKeyOrder
from acidstream.catalog import Metastore
from acidstream.errors import BucketIdException
from mutate.test_hive_placements import ROWS, make_swapped, placements


def test_spark_merge_update_and_delete_take_streamed_rows(
    acid_spark: Any, ms: Metastore, opts: dict[str, str]
) -> None:
    table = make_swapped(ms)
    assert acid.update(acid_spark, table, "a < 10", {"c": "c + 1000"}, **opts)["updated"] == 10
    assert acid.delete(acid_spark, table, "a >= 40", **opts)["deleted"] == ROWS - 40
    source = acid_spark.createDataFrame(
        pd.DataFrame({"a": [10, 11, 100], "b": ["k10", "k11", "k100"], "c": [2010, 2011, 2100]}).astype(
            {"a": "int32"}
        )
    )
    assert acid.merge(acid_spark, table, source, on=["a", "b"], **opts) == {
        "inserted": 1,
        "updated": 2,
        "deleted": 0,
    }
    rows, hashed = placements(ms, table)
    expected = {i: i + 1000 for i in range(10)} | {i: i for i in range(12, 40)} | {10: 2010, 11: 2011}
    assert {r["a"]: r["c"] for r in rows} == expected | {100: 2100}
    for i, row in enumerate(rows):
        order = BucketKeyOrder.CLUSTERED_BY if row["a"] == 100 else BucketKeyOrder.TABLE
        assert row["bucket"] == hashed[order][i], row
    moved = acid_spark.createDataFrame(pd.DataFrame({"a": [3], "b": ["elsewhere"]}).astype({"a": "int32"}))
    with pytest.raises(BucketIdException, match="bucketed column b of the row"):
        acid.merge(acid_spark, table, moved, on=["a"], **opts)
