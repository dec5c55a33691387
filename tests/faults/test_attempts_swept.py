"""Nothing of a Spark write's task attempts stays once its txn is over, in a table never compacted: a driver
SIGKILLed after its tasks staged their files, a losing attempt killed after the commit, a streaming batch
aborted or skipped as a replay. The compactor's housekeeper sweeps what no driver could delete, and never the
attempts of a txn still open. Local disk and S3; SQLite and PostgreSQL metastores. No Spark needed: the tasks'
and the committer's code runs as Spark runs it, in this process or in the killed driver's.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from acidstream import Metastore
from acidstream.acid.attempts import ATTEMPTS_DIR
from acidstream.compactor import CompactorDaemon
from acidstream.spark.commit import commit_write
from acidstream.spark.options import ResolvedTable
from acidstream.spark.stream_write import (
    AcidStreamWriter,
    StreamMessage,
    batch_label,
    batch_tag,
    elect_batch_txn,
)
from acidstream.spark.task_write import write_task
from acidstream.storage import table_filesystem
from read.readhelpers import create
from support.s3server import BUCKETS

#: The killed driver's txn timeout: its txn ends this long after the kill.
DRIVER_TXN_TIMEOUT = 2.0

DRIVER = """
import sys, time
import pyarrow as pa
from acidstream import Metastore
from acidstream.spark.options import ResolvedTable
from acidstream.spark.task_write import write_task
from acidstream.spark.writelock import lock_for_write

url, warehouse, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
ms = Metastore.connect(url, warehouse=warehouse, txn_timeout=timeout)
target = ResolvedTable(url, warehouse, ms.table("db.t").definition())
(txn,) = ms.open_txns(1, agent_info="killed-driver")
((_, write_id),) = ms.allocate_table_write_ids([txn], "db.t")
lock_for_write(ms, target.table, txn, "killed-driver")  # as AcidBatchWriter does, before its tasks write
batch = pa.RecordBatch.from_pydict({"id": pa.array([7, 8], pa.int32()), "msg": ["m7", "m8"]})
for statement in (0, 1):
    write_task(target, write_id, statement, [batch])
print(txn, write_id, flush=True)
time.sleep(600)
"""


@pytest.fixture(params=["local", "s3"])
def warehouse_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "wh")
    request.getfixturevalue("s3_endpoint")  # the session's S3 server; the AWS environment points at it
    return f"s3://{BUCKETS[0]}/{uuid.uuid4().hex[:12]}/wh"


def rows(*ids: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"id": pa.array(ids, pa.int32()), "msg": [f"m{i}" for i in ids]})


def attempts(ms: Metastore) -> list[str]:
    """The attempt directories in the table's attempts directory (whose writes they are: ``w<id>_s…``)."""
    fs, table_dir = table_filesystem(ms.table("db.t").location)
    infos = fs.get_file_info(pafs.FileSelector(f"{table_dir}/{ATTEMPTS_DIR}", allow_not_found=True))
    return sorted(i.base_name.split("_s", 1)[0] for i in infos if i.type == pafs.FileType.Directory)


def visible(ms: Metastore) -> list[int]:
    return sorted(ms.table("db.t").scan(columns=["id"]).to_arrow().column("id").to_pylist())


def open_write(ms: Metastore) -> tuple[int, int]:
    (txn,) = ms.open_txns(1)
    ((_, write_id),) = ms.allocate_table_write_ids([txn], "db.t")
    return txn, write_id


@pytest.mark.timeout(240)
def test_the_housekeeper_sweeps_a_killed_drivers_attempts_in_a_table_never_compacted(
    metastore_url: str, warehouse_url: str
) -> None:
    with Metastore.connect(metastore_url, warehouse=warehouse_url) as ms:
        ms.create_database("db")
        create(ms, "t", "id int, msg string")
        target = ResolvedTable(metastore_url, warehouse_url, ms.table("db.t").definition())
        fs, table_dir = table_filesystem(ms.table("db.t").location)

        # a committed write, and a losing attempt of it killed mid-write after the commit's cleanup
        done_txn, done = open_write(ms)
        commit_write(
            ms, "db.t", done_txn, done, [write_task(target, done, 0, [rows(1, 2)])], partitioned=False
        )
        loser = f"{table_dir}/{ATTEMPTS_DIR}/w{done}_s0_t99/delta_{done:07d}_{done:07d}_0000"
        fs.create_dir(loser)
        with fs.open_output_stream(f"{loser}/bucket_00000") as out:
            out.write(b"a losing attempt's partial file")
        # a live writer's txn, still open: its attempts stay whatever happens
        running_txn, running = open_write(ms)
        write_task(target, running, 0, [rows(5)])

        # a driver SIGKILLed once its tasks staged their files
        driver = subprocess.Popen(
            [sys.executable, "-c", DRIVER, metastore_url, warehouse_url, str(DRIVER_TXN_TIMEOUT)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert driver.stdout is not None
        line = driver.stdout.readline()
        driver.send_signal(signal.SIGKILL)
        _, err = driver.communicate()
        assert driver.returncode == -signal.SIGKILL and line, err
        killed_txn, killed = map(int, line.split())
        assert attempts(ms) == sorted([f"w{done}", f"w{running}", f"w{killed}", f"w{killed}"])

        deadline = time.monotonic() + 120  # the killed driver's txn times out (the metastore's housekeeping)
        while ms.get_txn_state(killed_txn).name == "OPEN" and time.monotonic() < deadline:
            time.sleep(0.5)
            ms.perform_timeouts()
        assert ms.get_txn_state(killed_txn).name == "ABORTED"

        daemon = CompactorDaemon(ms)
        daemon.run_once()
        assert ms.show_compactions() == []  # no compaction: the housekeeper swept them
        assert attempts(ms) == [f"w{running}"]
        assert visible(ms) == [1, 2]

        ms.abort_txn(running_txn)
        daemon.run_once()
        assert attempts(ms) == []
        assert fs.get_file_info(f"{table_dir}/{ATTEMPTS_DIR}").type in (
            pafs.FileType.NotFound,
            pafs.FileType.Directory,  # S3: a prefix with nothing below it is no directory to delete
        )
        assert visible(ms) == [1, 2]


def test_an_aborted_or_replayed_micro_batch_leaves_no_attempts(
    metastore_url: str, warehouse_url: str
) -> None:
    """The sink's committer deletes its tasks' attempts when Spark aborts the batch and when it skips a replay
    of a batch already committed; no housekeeper needed."""
    with Metastore.connect(metastore_url, warehouse=warehouse_url) as ms:
        ms.create_database("db")
        create(ms, "t", "id int, msg string")
        target = ResolvedTable(metastore_url, warehouse_url, ms.table("db.t").definition())
        sink = AcidStreamWriter(target, {"sinkId": "s"})

        def batch(batch_id: int, ids: list[int]) -> StreamMessage:
            label, tag = batch_label("s", batch_id, "run"), batch_tag("s", batch_id, "run")
            txn, write_id = elect_batch_txn(ms, target.table, tag, label)
            return StreamMessage("q", txn, write_id, write_task(target, write_id, 0, [rows(*ids)]))

        aborted = batch(0, [1])
        assert attempts(ms) == [f"w{aborted.write_id}"]
        sink.abort([aborted, None], 0)  # a task failed: Spark aborts the batch
        assert attempts(ms) == []

        sink.commit([batch(0, [2])], 0)
        replay = batch(0, [3])  # the same batch again (a restart before Spark recorded its commit)
        sink.commit([replay], 0)
        assert attempts(ms) == []
        assert ms.get_txn_state(replay.txn_id).name == "ABORTED"  # type: ignore[arg-type]
        assert visible(ms) == [2]
