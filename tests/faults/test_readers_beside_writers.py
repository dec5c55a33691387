"""Readers scanning in a loop beside a live writer.

A scan must never fail because the writer moved on (a flush, a side-file entry, a commit, the batch's close
between the reader's listing and its reads), and must see whole committed transactions only, never fewer rows
than the scan before. Writers with batches of 1 (a delta per txn) and of 10 (files kept open across commits,
with side files), auto-flushing uncommitted rows into them all the time.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from acidstream import Metastore
from support.streamcheck import Ledger, check_table, create_table, start_writer, visible_seqs

PER_TXN = 100
SCANS = 150
SECONDS = 6.0  # at most, per test, once the writer has committed
FIRST_COMMIT = 60.0  # at most, for the writer's first commit to appear (a loaded machine starts it slowly)


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("batch", [1, 10])
def test_scans_beside_a_writer_never_fail_and_see_whole_transactions(
    metastore_url: str, warehouse: Path, batch: int
) -> None:
    with Metastore.connect(metastore_url, warehouse=str(warehouse)) as ms:
        create_table(ms, "t")
        config = {"max_buffered_bytes": 1 << 10, "parse_batch_records": 50, "heartbeat_interval": 600}
        writer = start_writer(
            metastore_url, warehouse, "t", batch=batch, txns=0, per_txn=PER_TXN, config=config
        )
        assert writer.stdout is not None
        first = writer.stdout.readline()
        assert first.startswith("BEGIN"), writer.communicate(timeout=30)[1]
        scans, last = 0, 0
        started = time.monotonic()
        deadline = started + SECONDS
        try:
            while (scans < SCANS and time.monotonic() < deadline) or (
                last == 0 and time.monotonic() < started + FIRST_COMMIT
            ):
                seen = visible_seqs(ms, "t")  # a full read; raises if the scan fails
                torn = {seq: n for seq, n in seen.items() if n != PER_TXN}
                assert not torn, f"scan {scans}: transactions seen in part: {torn}"
                assert sum(seen.values()) >= last, f"scan {scans} saw fewer rows than the one before"
                last = sum(seen.values())
                scans += 1
        finally:
            writer.send_signal(signal.SIGKILL)
            out, _ = writer.communicate(timeout=30)
        assert last > 0 and scans >= 10
        check_table(ms, "t", Ledger().read([first, *out.splitlines()]), PER_TXN)
