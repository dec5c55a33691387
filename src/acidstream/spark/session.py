"""A local SparkSession configured the way acidstream's jobs and tests need it."""

from __future__ import annotations

import os
import sys
from typing import Any

from pyspark.sql import SparkSession


def session(
    app_name: str = "acidstream",
    master: str = "local[2]",
    *,
    shuffle_partitions: int = 4,
    log_level: str = "ERROR",
    extra_conf: dict[str, Any] | None = None,
) -> SparkSession:
    """Build (or return the running) local SparkSession.

    Spark's Python workers must run this interpreter (else they lack pyarrow and acidstream), its UI and noisy
    logs stay out of the way, and ORC files with Hive's ACID column names are read through the ``hive`` ORC
    implementation, because the ``native`` one mis-shifts their column ids (pyspark-notes.md §2).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.orc.impl", "hive")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC -Dlog4j2.level=ERROR")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
