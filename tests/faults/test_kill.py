"""``kill -9`` of streaming writers: at each named point of the commit path, and at random times.

After every kill: every row of every txn the metastore committed is readable exactly once, no row of any other
txn is, every commit the writer saw return is committed; then, once the dead writer's txns timed out, the
table takes new transactions. SQLite and PostgreSQL metastores, batches of 1 and 10.
"""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import pytest

from acidstream import Metastore
from support.streamcheck import Ledger, check_table, create_table, start_writer, stream

PER_TXN = 500
#: auto-flushes inside each txn: a kill finds uncommitted rows already in the files (and side files)
CONFIG = {"max_buffered_bytes": 4 << 10, "parse_batch_records": 200}
#: the writers' own txn timeout (they heartbeat at half of it): their txns end this long after the kill
WRITER_TXN_TIMEOUT = 2.0
#: between a flush's stripes and its footer, the footer and its side-file entry, the entry and the metastore
#: commit, and inside the commit's DB transaction
POINTS = ["orc.flush.stripes", "orc.flush.tail", "orc.flush.published", "metastore.commit"]


def _after_timeouts(url: str, warehouse: Path, ledger: Ledger, first_seq: int) -> None:
    """The killed writers' open txns time out; the table is still whole, and takes a new txn."""
    with Metastore.connect(url, warehouse=str(warehouse)) as ms:
        time.sleep(WRITER_TXN_TIMEOUT + 0.1)
        ms.perform_timeouts()
        assert all(ms.get_txn_state(t).name != "OPEN" for t in ledger.begun.values())
        check_table(ms, "t", ledger, PER_TXN)
        stream(ms, "t", [first_seq], PER_TXN, ledger, batch=3)
        assert check_table(ms, "t", ledger, PER_TXN)[first_seq] == PER_TXN


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("batch", [1, 10])
def test_kill_at_each_point_of_the_commit_path(metastore_url: str, warehouse: Path, batch: int) -> None:
    ledger = Ledger()
    with Metastore.connect(metastore_url, warehouse=str(warehouse)) as ms:
        create_table(ms, "t")
        for n, point in enumerate(POINTS):
            writer = start_writer(
                metastore_url, warehouse, "t", batch=batch, txns=50, per_txn=PER_TXN,
                first_seq=n * 100, config=CONFIG, faults=f"{point}=kill@7", txn_timeout=WRITER_TXN_TIMEOUT,
            )  # fmt: skip
            out, err = writer.communicate(timeout=60)
            assert writer.returncode == -signal.SIGKILL, f"{point}: {err}"
            assert "DONE" not in out
            ledger.read(out.splitlines())
            assert ledger.committed, f"{point}: nothing committed before the kill"
            check_table(ms, "t", ledger, PER_TXN)
    _after_timeouts(metastore_url, warehouse, ledger, 1000)


@pytest.mark.timeout(150)
def test_kill_at_random_times(metastore_url: str, warehouse: Path) -> None:
    """Writers of batches of 10 txns, killed at random times: a kill lands between or inside txns of a batch,
    inside or between its files' writes. Batches of one txn are killed at each point of the commit path above;
    random kills of them, once a second case here, took a minute of the suite for a path both tests cover."""
    batch = 10
    rnd = random.Random(19 + batch)
    ledger = Ledger()
    with Metastore.connect(metastore_url, warehouse=str(warehouse)) as ms:
        create_table(ms, "t")
        for n in range(4):
            writer = start_writer(
                metastore_url, warehouse, "t", batch=batch, txns=0, per_txn=PER_TXN,
                first_seq=n * 1000, config=CONFIG, txn_timeout=WRITER_TXN_TIMEOUT,
            )  # fmt: skip
            assert writer.stdout is not None
            first = writer.stdout.readline()
            assert first.startswith("BEGIN"), writer.communicate(timeout=30)[1]
            time.sleep(rnd.uniform(0.05, 0.6))
            writer.send_signal(signal.SIGKILL)
            out, _ = writer.communicate(timeout=30)
            ledger.read([first, *out.splitlines()])
            check_table(ms, "t", ledger, PER_TXN)
    _after_timeouts(metastore_url, warehouse, ledger, 10_000)
