"""I/O errors at each write and flush of a transaction batch, and in a scan's listings and reads.

The table's filesystem fails from its k-th write or flush call on, for every k a clean run makes (data files,
side files, version files; intermediate and final footers): whichever call fails, no transaction commits
partially, every committed row stays readable, the failed txn is aborted and later calls on it raise, and the
table takes new transactions afterwards. Then each named flush point fails in turn (acidstream.faults). A scan
on a disk that fails its reads says so with ``StorageUnavailable``, never a bare ``OSError`` or a corrupt file.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as po
import pytest

from acidstream import Metastore, faults
from acidstream.errors import StorageUnavailable, StreamingException, StreamingIOFailure
from support.faultinjection import WriteBudget, failing_reads, failing_writes
from support.streamcheck import Ledger, assert_batch_killed, check_table, create_table, stream

PER_TXN = 1000
TXNS = 4
#: auto-flushes inside each txn, so that failures also hit flushes of uncommitted rows
CONFIG = {"max_buffered_bytes": 2 << 10, "parse_batch_records": 250}


def _run(ms: Metastore, table: str, batch: int, budget: WriteBudget) -> Ledger:
    ledger, killed = Ledger(), assert_batch_killed(ms)
    create_table(ms, table)
    with failing_writes(budget):
        try:
            stream(ms, table, range(TXNS), PER_TXN, ledger, batch=batch, config=CONFIG, check_failure=killed)
        except StreamingException as exc:
            assert isinstance(exc, StreamingIOFailure) or isinstance(exc.__cause__, OSError), exc
    return ledger


@pytest.mark.timeout(150)
@pytest.mark.parametrize("batch", [1, 3])
def test_an_io_error_at_any_write_or_flush_call_commits_nothing_partially(
    tmp_path: Path, warehouse: Path, batch: int
) -> None:
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as ms:
        clean = WriteBudget()
        assert _run(ms, "clean", batch, clean).committed == set(range(TXNS))
        assert clean.calls > 50
        for k in range(1, clean.calls + 1):
            table = f"t{k}"
            ledger = _run(ms, table, batch, WriteBudget(fail_call=k, code=errno.EIO))
            assert len(ledger.committed) < TXNS, f"call {k} of {clean.calls} did not fail"
            check_table(ms, table, ledger, PER_TXN)
            stream(ms, table, [TXNS], PER_TXN, ledger, batch=batch)  # the same table takes new txns
            assert check_table(ms, table, ledger, PER_TXN)[TXNS] == PER_TXN, f"call {k}"


@pytest.mark.parametrize("point", ["orc.flush.stripes", "orc.flush.tail", "orc.flush.published"])
@pytest.mark.parametrize("hit", [1, 4])
def test_an_io_error_at_each_named_flush_point(tmp_path: Path, warehouse: Path, point: str, hit: int) -> None:
    """The same through the fault points of ``AcidWriter.flush_encoded``, on the local filesystem (files are
    cut back to what the side file published)."""
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as ms:
        create_table(ms, "t")
        ledger, killed = Ledger(), assert_batch_killed(ms)
        with faults.armed(point, faults.os_error(errno.EIO), at=hit), pytest.raises(StreamingIOFailure):
            stream(ms, "t", range(TXNS), PER_TXN, ledger, batch=3, config=CONFIG, check_failure=killed)
        check_table(ms, "t", ledger, PER_TXN)
        stream(ms, "t", [TXNS], PER_TXN, ledger, batch=3)
        assert check_table(ms, "t", ledger, PER_TXN)[TXNS] == PER_TXN


@pytest.mark.parametrize(
    ("fails", "named"), [("listing", "t"), ("reading", "t/delta_0000001_0000003/bucket_0000")]
)
def test_a_disk_failing_a_scan_is_storage_unavailable_naming_the_location(
    tmp_path: Path, warehouse: Path, fails: str, named: str
) -> None:
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as ms:
        create_table(ms, "t")
        ledger = Ledger()
        stream(ms, "t", range(3), 10, ledger, batch=3)
        with failing_reads(fails), pytest.raises(StorageUnavailable, match=f"{warehouse}/{named}") as failure:
            ms.table("t").scan().to_arrow()
        assert failure.value.retryable and "Input/output error (injected" in str(failure.value)
        assert check_table(ms, "t", ledger, 10) == {seq: 10 for seq in range(3)}  # the disk is well again


def test_a_disk_failing_the_read_of_an_original_file_is_no_corrupt_file(
    tmp_path: Path, warehouse: Path
) -> None:
    """Files from before the table was transactional are read apart from event files."""
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as ms:
        ms.execute("CREATE TABLE o (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
        location = Path(ms.table("o").location)
        location.mkdir(parents=True, exist_ok=True)
        po.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int32())}), str(location / "000000_0"))
        with failing_reads("reading"), pytest.raises(StorageUnavailable, match=f"{location}/000000_0"):
            ms.table("o").scan().to_arrow()
        assert ms.table("o").scan().to_arrow().column("id").to_pylist() == [1, 2, 3]
