"""A disk that fills up in the middle of a transaction batch.

A tmpfs of a few hundred KiB when the tests run as root, else a filesystem refusing writes past a budget (it
cannot truncate, so the writer keeps side files instead of cutting files back): committed rows stay readable,
the txn that hit the full disk is aborted, and once space is freed the table takes new transactions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acidstream import Metastore, repl
from acidstream.errors import StreamingIOFailure
from support.faultinjection import DISK_KINDS, full_disk, skip_unless_possible
from support.streamcheck import Ledger, assert_batch_killed, check_table, create_table, stream, visible_seqs

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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("disk_kind", DISK_KINDS)
def test_a_full_replica_disk_stops_the_sync_and_a_retry_completes_it(
    tmp_path: Path, metastore_url: str, disk_kind: str
) -> None:
    """The replica's disk fills up while a sync copies the source's new files: a storage error naming the
    replica's file, the replica shows a committed prefix of the source's history, and once space is freed the
    next sync brings it level with the source."""
    skip_unless_possible(disk_kind)
    ledger, config = Ledger(), {"compression": "NONE"}
    with (
        Metastore.connect(
            f"sqlite:///{tmp_path / 'source.db'}", warehouse=str(tmp_path / "source-wh")
        ) as source,
        full_disk(tmp_path / "disk", 8 << 20, disk_kind) as disk,
        Metastore.connect(metastore_url, warehouse=str(disk.path)) as replica,
    ):
        create_table(source, "t")
        stream(source, "t", range(2), PER_TXN, ledger, config=config)
        repl.sync(source, replica)  # the bootstrap fits
        stream(source, "t", range(2, 30), PER_TXN, ledger, config=config)
        disk.fill_up(64 << 10)
        with pytest.raises(StreamingIOFailure, match=f"{disk.path}/t/.*No space left on device"):
            repl.sync(source, replica)
        seen = visible_seqs(replica, "t")
        assert sorted(seen) == list(range(len(seen))) and set(seen.values()) == {PER_TXN}
        assert len(seen) < 30
        disk.make_room(8 << 20)
        repl.sync(source, replica)
        assert visible_seqs(replica, "t") == visible_seqs(source, "t")
