"""A disk that fills up in the middle of a transaction batch (issue 19, defect 1).

A tmpfs of a few hundred KiB when the tests run as root, else a filesystem refusing writes past a budget (it
cannot truncate, so the writer keeps side files instead of cutting files back): committed rows stay readable,
the txn that hit the full disk is aborted, and once space is freed the table takes new transactions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acidstream import Metastore
from acidstream.errors import StreamingIOFailure
from support.faultinjection import DISK_KINDS, full_disk, skip_unless_possible
from support.streamcheck import Ledger, assert_batch_killed, check_table, create_table, stream

PER_TXN = 2000


@pytest.mark.timeout(120)
@pytest.mark.parametrize("partitioned", [False, True], ids=["table", "new-partitions"])
@pytest.mark.parametrize("batch", [1, 10])
@pytest.mark.parametrize("disk_kind", DISK_KINDS)
def test_a_full_disk_loses_no_committed_row_and_the_table_takes_writes_again(
    tmp_path: Path, disk_kind: str, batch: int, partitioned: bool
) -> None:
    skip_unless_possible(disk_kind)
    with (
        full_disk(tmp_path / "disk", 384 << 10, disk_kind) as disk,
        Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(disk.path)) as ms,
    ):
        create_table(ms, "t", partitioned=partitioned)
        ledger, killed = Ledger(), assert_batch_killed(ms)
        config = {"compression": "NONE", "max_buffered_bytes": 16 << 10}  # auto-flushes mid-txn too
        with pytest.raises(StreamingIOFailure, match="No space left on device"):
            stream(
                ms,
                "t",
                range(1000),
                PER_TXN,
                ledger,
                batch=batch,
                config=config,
                partitioned=partitioned,
                check_failure=killed,
            )
        assert ledger.committed and len(ledger.begun) == len(ledger.committed) + 1
        check_table(ms, "t", ledger, PER_TXN)  # a full read: every committed row, nothing else
        disk.make_room(8 << 20)
        check_table(ms, "t", ledger, PER_TXN)
        stream(ms, "t", range(1000, 1003), PER_TXN, ledger, batch=batch, partitioned=partitioned)
        assert check_table(ms, "t", ledger, PER_TXN)[1002] == PER_TXN
