from __future__ import annotations

import sysconfig
from pathlib import Path
from typing import Any

import pytest


def test_shared_session_runs_python_workers_with_project_interpreter(spark: Any) -> None:
    import sys

    df = spark.range(4).repartition(2)
    executables = set(df.rdd.map(lambda _: __import__("sys").executable).collect())
    assert executables == {sys.executable}
    assert spark.conf.get("spark.sql.orc.impl") == "hive"


def test_hive_classes_reachable(jvm: Any) -> None:
    assert jvm.org.apache.hadoop.hive.ql.io.AcidUtils.deltaSubdir(1, 1, 0) == "delta_0000001_0000001_0000"


def test_workers_import_the_installed_compiled_pyspark(spark: Any) -> None:
    """scripts/bootstrap.sh's .pth keeps Spark's pyspark.zip (recompiled in every worker) off workers' path."""
    if not (Path(sysconfig.get_paths()["purelib"]) / "acidstream-spark-workers.pth").exists():
        pytest.skip("environment not made by scripts/bootstrap.sh (no acidstream-spark-workers.pth)")
    files = set(spark.range(2).repartition(2).rdd.map(lambda _: __import__("pyspark").__file__).collect())
    assert len(files) == 1 and ".zip" not in files.pop()
