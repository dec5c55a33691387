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
    """scripts/bootstrap.sh's .pth keeps Spark's archives off workers' path and importer cache: pyspark.zip
    (recompiled in every worker), and the spark-core jar, whose importer re-reads 5,000 entries every task."""
    if not (Path(sysconfig.get_paths()["purelib"]) / "acidstream-spark-workers.pth").exists():
        pytest.skip("environment not made by scripts/bootstrap.sh (no acidstream-spark-workers.pth)")

    def imports(_: Any) -> tuple[str, tuple[str, ...]]:
        import sys
        import zipimport

        import pyspark

        zips = tuple(k for k, v in sys.path_importer_cache.items() if isinstance(v, zipimport.zipimporter))
        return pyspark.__file__ or "", zips

    seen = set(spark.range(2).repartition(2).rdd.map(imports).collect())
    assert len(seen) == 1
    pyspark_file, zip_importers = seen.pop()
    assert ".zip" not in pyspark_file
    assert not [k for k in zip_importers if "pyspark" in k], zip_importers
