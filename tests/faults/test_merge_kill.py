"""``kill -9`` of a process merging with workers (``Table.merge(..., workers=2)``): its workers die with it.

A worker left running would go on writing delta files of a txn the metastore aborts once it times out; files
written after the cleaner removed the txn's directories stay for good (and, once the cleaner forgets the aborted
write id, a delta above the base would be read). So after the kill: no worker process is left within a few
seconds, nothing appears in the table's directory any more, even after the txn is aborted, the table compacted
and cleaned; the table holds what it held before, and takes a new merge.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from acidstream import Metastore
from acidstream.compactor import Cleaner
from acidstream.compactor.config import CompactorConfig
from acidstream.faults import FAULTS_ENV
from acidstream.metastore import TxnStatus
from support.accounts import ACCOUNTS_DDL, frame, table_frame

TABLE = "default.accounts"
#: Every process of the merge waits this long at its first file's footer: the worker is mid-merge for that long
#: (the merging process closes its own files only once the workers are done).
PAUSE = 6.0
#: The merging process's txn timeout: its txn and its scan's registration end this long after the kill.
TXN_TIMEOUT = 2.0
#: How soon after the kill no process of the merge may be left.
BOUND = 3.0

MERGE = """
import sys
import pandas as pd
from acidstream import Metastore

url, warehouse, table, TXN_TIMEOUT = *sys.argv[1:4], float(sys.argv[4])
ids = list(range(0, 400, 3)) + list(range(400, 440))
source = pd.DataFrame({"id": ids, "name": [f"b{i}" for i in ids], "score": [2.0 * i for i in ids],
                       "p": [f"p{i % 3}" for i in ids]})
with Metastore.connect(url, warehouse=warehouse, txn_timeout=TXN_TIMEOUT) as ms:
    ms.table(table).merge(source, on=["id"], workers=2)
"""


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _running(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``processes`` still running (a zombie has ended: only its exit status is left)."""
    running = []
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.status() != psutil.STATUS_ZOMBIE:
                running.append(process)
    return running


def _worker_dirs(root: Path) -> list[Path]:
    return sorted(root.glob("*/*delta_*_0001"))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_workers_die_with_a_killed_merge_and_write_nothing_after(metastore_url: str, warehouse: Path) -> None:
    with Metastore.connect(metastore_url, warehouse=str(warehouse)) as ms:
        ms.execute(ACCOUNTS_DDL.format(TABLE))
        ms.table(TABLE).merge(frame(list(range(400)), "a"), on=["id"], workers=1)
        before = table_frame(ms, TABLE)
        root = Path(ms.table(TABLE).location)

        merging = subprocess.Popen(
            [sys.executable, "-c", MERGE, metastore_url, str(warehouse), TABLE, str(TXN_TIMEOUT)],
            env={**os.environ, FAULTS_ENV: f"orc.flush.tail=sleep:{PAUSE}@1"},
            stdout=subprocess.DEVNULL,  # no pipe: a worker holding it would keep it open
        )
        deadline = time.monotonic() + 60
        while not _worker_dirs(root) and merging.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _worker_dirs(root), f"no worker wrote (merge exit status {merging.poll()})"
        processes = psutil.Process(merging.pid).children(recursive=True)
        assert processes, "the merge runs in no other process"
        merging.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        assert merging.wait() == -signal.SIGKILL

        while _running(processes) and time.monotonic() < killed + BOUND:
            time.sleep(0.01)
        assert not _running(processes), f"left running {BOUND} s after the kill: {_running(processes)}"
        files = _files(root)

        # the housekeeper aborts the dead merge's txn once it timed out; then a compaction and its cleaner
        time.sleep(max(0.0, killed + TXN_TIMEOUT + 0.1 - time.monotonic()))
        assert len(ms.perform_timeouts()) == 1
        assert not [t for t in ms.show_txns() if t.state is TxnStatus.OPEN]
        assert _files(root) == files
        for part in ("p0", "p1", "p2"):
            ms.compact(TABLE, f"p={part}", "major", wait=True)
        outcomes = Cleaner(ms, CompactorConfig(retention=0)).run_once()
        assert all(o.state == "succeeded" for o in outcomes)
        cleaned = _files(root)
        assert _worker_dirs(root) == []
        time.sleep(max(0.0, killed + PAUSE + 1.0 - time.monotonic()))  # past the pause a worker was in
        assert _files(root) == cleaned

        pd.testing.assert_frame_equal(table_frame(ms, TABLE), before)
        counts = ms.table(TABLE).merge(frame([1, 2, 500], "c"), on=["id"], workers=2)
        assert counts == {"inserted": 1, "updated": 2, "deleted": 0}
        expected = pd.concat([before[~before.id.isin([1, 2])], frame([1, 2, 500], "c")])
        pd.testing.assert_frame_equal(
            table_frame(ms, TABLE), expected.sort_values("id").reset_index(drop=True), check_dtype=False
        )
