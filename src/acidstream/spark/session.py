"""A local SparkSession configured the way acidstream's jobs and tests need it."""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

from pyspark.sql import SparkSession

#: Spark's own logging at ERROR, on stderr (Spark's default config logs INFO/WARN start-up chatter).
_LOG4J = """status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
rootLogger.level = error
rootLogger.appenderRef.console.ref = console
"""


def _log4j_config() -> str:
    path = os.path.join(tempfile.gettempdir(), f"acidstream-log4j2-{os.getuid()}.properties")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(_LOG4J)
        os.replace(tmp, path)
    return path


def session(
    app_name: str = "acidstream",
    master: str = "local[2]",
    *,
    shuffle_partitions: int = 4,
    log_level: str = "ERROR",
    log_file: str | None = None,
    extra_conf: dict[str, Any] | None = None,
) -> SparkSession:
    """Build (or return the running) local SparkSession.

    Spark's Python workers must run this interpreter (else they lack pyarrow and acidstream), its UI and noisy
    logs stay out of the way (with ``log_file``, the JVM's stderr — the few start-up lines log4j cannot
    silence, and any error — goes to that file), and ORC files with Hive's ACID column names are read through
    the ``hive`` ORC implementation, because the ``native`` one mis-shifts their column ids.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    java_options = f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{_log4j_config()}"
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.orc.impl", "hive")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, str(value))
    if log_file is None:
        spark = builder.getOrCreate()
    else:
        spark = _with_stderr_to(log_file, builder.getOrCreate)
    spark.sparkContext.setLogLevel(log_level)
    return spark


def _with_stderr_to(log_file: str, start: Any) -> SparkSession:
    """Run ``start`` with fd 2 pointing at ``log_file``: the JVM it launches inherits it; ours is restored."""
    os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
    saved = os.dup(2)
    try:
        with open(log_file, "a", encoding="utf-8") as log:
            os.dup2(log.fileno(), 2)
            spark: SparkSession = start()
            return spark
    finally:
        os.dup2(saved, 2)
        os.close(saved)
