from __future__ import annotations

from typing import Any


def test_shared_session_runs_python_workers_with_project_interpreter(spark: Any) -> None:
    import sys

    df = spark.range(4).repartition(2)
    executables = set(df.rdd.map(lambda _: __import__("sys").executable).collect())
    assert executables == {sys.executable}
    assert spark.conf.get("spark.sql.orc.impl") == "hive"


def test_hive_classes_reachable(jvm: Any) -> None:
    assert jvm.org.apache.hadoop.hive.ql.io.AcidUtils.deltaSubdir(1, 1, 0) == "delta_0000001_0000001_0000"
