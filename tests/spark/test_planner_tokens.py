"""A delegation token a planner got for a job (Kerberos named only by the read's or write's options) is
cancelled once the job's SparkSession stops: on the session's kerberized MiniDFSCluster, the namenode refuses
it then, while the driver's process lives on. The driver is a process of its own (stopping the tests' shared
session is not an option), and its planner a Spark Python worker running :func:`resolve` as the data source's
planner does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from acidstream import Metastore
from acidstream.errors import AcidStreamError
from acidstream.storage import configure_stores, table_filesystem
from support.deps import import_or_skip
from support.hdfscluster import MiniHdfs
from support.ticketless import driver_with_ticket

pytestmark = pytest.mark.spark

import_or_skip("requests_gssapi")

DRIVER = """
import json, sys
from acidstream.spark.session import session

options, workers = json.loads(sys.argv[1]), json.loads(sys.argv[2])
spark = session("planner-tokens", master="local[1]", extra_conf={"spark.driver.memory": "512m"})
spark.sparkContext.environment.update(workers)  # the kerberized HDFS for the Python workers, not the JVM


def plan(_):
    from acidstream.spark.options import JobSettings, resolve

    return dict(resolve(options, writable=True, job=JobSettings()).job.hdfs)["delegation_token"]


print(json.dumps(spark.sparkContext.parallelize([0], 1).map(plan).collect()[0]), flush=True)
sys.stdin.readline()
spark.stop()
print("stopped", flush=True)
sys.stdin.readline()  # the driver lives on after its session's stop
"""


#: The driver's JVMs (spark-submit's launcher and Spark's) start quicker with the client compiler alone and the
#: serial collector (and a 512 MB heap leaves the shared machine more): a job this short needs no more.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _refused(token: str, warehouse: str) -> bool:
    configure_stores(hdfs={"delegation_token": token})
    fs, path = table_filesystem(warehouse)
    try:
        fs.get_file_info(path)
    except (AcidStreamError, OSError):
        return True
    return False


@pytest.mark.timeout(300)
def test_a_planners_token_is_cancelled_when_the_session_stops(
    hdfs_kerberos_namenode: MiniHdfs, kdc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warehouse = driver_with_ticket(monkeypatch, hdfs_kerberos_namenode, kdc, tmp_path / "ccache")
    previous = configure_stores(hdfs={})
    options = {"metastore": f"sqlite:///{tmp_path / 'm.db'}", "warehouse": warehouse, "table": "t"}
    with Metastore.connect(options["metastore"], warehouse=warehouse) as ms:
        ms.execute("CREATE TABLE t (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
    workers = {
        "HADOOP_CONF_DIR": str(hdfs_kerberos_namenode.conf_dir),
        "KRB5_CONFIG": str(kdc.krb5_conf),
        "KRB5CCNAME": f"FILE:{tmp_path / 'ccache'}",  # alice's ticket: the planner gets the token with it
    }
    env = {k: v for k, v in os.environ.items() if k != "HADOOP_CONF_DIR"}  # the JVM's Hadoop stays open
    env["JAVA_TOOL_OPTIONS"] = QUICK_JVM
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(options), json.dumps(workers)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    assert driver.stdin is not None and driver.stdout is not None
    try:
        line = driver.stdout.readline()
        assert line, driver.communicate(timeout=60)[1][-3000:]
        token = json.loads(line)
        assert not _refused(token, warehouse)  # the job's token, while its session runs
        driver.stdin.write("stop\n")
        driver.stdin.flush()
        assert driver.stdout.readline().strip() == "stopped"
        deadline = time.monotonic() + 120  # the watcher looks once a second
        while not _refused(token, warehouse) and time.monotonic() < deadline:
            time.sleep(1)
        assert _refused(token, warehouse)
        assert driver.poll() is None  # cancelled at the session's stop, not at the driver's end
        driver.stdin.write("exit\n")
        driver.stdin.flush()
        assert driver.wait(timeout=120) == 0
    finally:
        configure_stores(**previous)
        if driver.poll() is None:
            driver.kill()
            driver.wait()
