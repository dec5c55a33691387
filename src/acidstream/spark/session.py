"""A local SparkSession configured the way acidstream's jobs and tests need it."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from typing import Any

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
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
    settings: dict[str, str] = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.orc.impl": "hive",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": java_options,
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        **{key: str(value) for key, value in (extra_conf or {}).items()},
    }

    conf = SparkConf().setAll(list(settings.items()))

    def start() -> SparkSession:
        if SparkContext._gateway is None:  # no JVM in this process yet
            _launch_jvm(conf)
        return SparkSession.builder.config(conf=conf).getOrCreate()

    spark = start() if log_file is None else _with_stderr_to(log_file, start)
    spark.sparkContext.setLogLevel(log_level)
    _quiet_accumulator_server(spark.sparkContext)
    return spark


def _quiet_accumulator_server(sc: SparkContext) -> None:
    """pyspark's accumulator server prints a traceback when the JVM closes its connection (an ``EOFError`` as
    Spark stops on a signal): an expected end, so it says nothing of it; any other error is printed as before."""
    server = getattr(sc, "_accumulatorServer", None)
    if server is None:
        return
    printed = server.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (EOFError, ConnectionError)):
            printed(request, client_address)

    server.handle_error = handle_error


def _launch_jvm(conf: SparkConf) -> None:
    """Start Spark's JVM as pyspark does, but in a process group of its own, and its context.

    A signal sent to this process's group (Ctrl-C at a terminal, ``timeout``, a supervisor stopping a service)
    then reaches this process only, which stops Spark in order (its streaming queries, their open transactions)
    instead of finding the JVM gone mid-call; the JVM still ends when this process does (its pipe to it closes).
    Should the launch itself be interrupted, pyspark has no handle left on the JVM: it is killed here, or it
    would run on forever (its wait for this process never starts).
    """
    before = _own_process_groups()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True})
    except BaseException:
        for pgid in _own_process_groups() - before:
            os.killpg(pgid, signal.SIGKILL)
        raise
    SparkContext(conf=conf, gateway=gateway)


def _own_process_groups() -> set[int]:
    """Child processes of this one that lead a process group of their own (read from Linux's ``/proc``;
    elsewhere none are found)."""
    me, found = os.getpid(), set()
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else []:
        if not entry.name.isdigit():
            continue
        try:
            with open(os.path.join(entry.path, "stat"), "rb") as handle:
                stat = handle.read()
        except OSError:  # it ended meanwhile
            continue
        ppid, pgrp = (int(v) for v in stat[stat.rindex(b")") + 2 :].split()[1:3])
        if ppid == me and pgrp == int(entry.name):
            found.add(pgrp)
    return found


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
