"""Tasks keep a long job's transaction alive (no Spark needed: the heartbeat thread alone)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from acidstream.catalog import Metastore
from acidstream.metastore import TxnStatus
from acidstream.spark.options import ResolvedTable
from acidstream.spark.task_write import TxnKeepAlive


def test_keepalive_outlives_the_txn_timeout_and_silence_does_not(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ms.db'}"
    ms = Metastore.connect(url, warehouse=tmp_path, txn_timeout=1.0)
    ms.execute("CREATE TABLE t (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
    target = ResolvedTable(url, str(tmp_path), replace(ms.table("default.t"), metastore=None))
    kept, silent = ms.open_txns(2)
    with TxnKeepAlive(target, kept, interval=0.2):
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            ms.perform_timeouts()
            time.sleep(0.1)
    assert ms.get_txn_state(kept) is TxnStatus.OPEN
    assert ms.get_txn_state(silent) is not TxnStatus.OPEN  # aborted (and forgotten: it wrote nothing)
