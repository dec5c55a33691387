"""Task retries inside one transaction: files of killed attempts never become visible (no Spark needed)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from acidstream.acid.names import base_dir, bucket_file
from acidstream.catalog import Metastore
from acidstream.compactor import CompactorConfig
from acidstream.compactor.cleaner import Cleaner
from acidstream.spark.batch_write import AcidBatchWriter
from acidstream.spark.commit import commit_write
from acidstream.spark.compact import staged_output
from acidstream.spark.options import ResolvedTable
from acidstream.spark.task_write import ATTEMPTS_DIR, write_task


def rows(ids: list[int], country: str) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "id": pa.array(ids, pa.int32()),
            "msg": [f"m{i}" for i in ids],
            "continent": ["Asia"] * len(ids),
            "country": [country] * len(ids),
        }
    )


def visible(ms: Metastore) -> list[tuple[int, str]]:
    table = ms.table("testing.alerts").scan(columns=["id", "country"]).to_arrow()
    return sorted(zip(table.column("id").to_pylist(), table.column("country").to_pylist(), strict=True))


def test_retry_and_zombie_attempt_files_are_removed_before_commit(
    ms: Metastore, sqlite_url: str, warehouse: Path
) -> None:
    target = ResolvedTable(sqlite_url, str(warehouse), replace(ms.table("testing.alerts"), metastore=None))
    (txn,) = ms.open_txns(1)
    ((_, wid),) = ms.allocate_table_write_ids([txn], "testing.alerts")

    # attempt 0 of statement 0 writes India and China, then its executor dies: no report
    write_task(target, wid, 0, [rows([1, 2], "India"), rows([3], "China")], attempt=0)
    # the retry reads different input (non-deterministic source) and only touches India
    retry = write_task(target, wid, 0, [rows([1, 2], "India")], attempt=1)
    other = write_task(target, wid, 1, [rows([7], "Japan")], attempt=0)
    # a zombie of the first attempt keeps writing after the retry cleaned up
    write_task(target, wid, 0, [rows([9], "Nepal")], attempt=0)

    commit_write(ms, "testing.alerts", txn, wid, [retry, other], partitioned=True)
    assert visible(ms) == [(1, "India"), (2, "India"), (7, "Japan")]
    assert not (Path(ms.table("testing.alerts").location) / ATTEMPTS_DIR).exists()  # removed once empty
    assert sorted(p.name for p in ms.list_partitions("testing.alerts")) == [
        "continent=Asia/country=India",
        "continent=Asia/country=Japan",
    ]
    ms.add_partition("testing.alerts", ["Asia", "Nepal"])  # registered later by another writer: still empty
    ms.add_partition("testing.alerts", ["Asia", "China"])
    assert visible(ms) == [(1, "India"), (2, "India"), (7, "Japan")]


def test_an_aborted_job_leaves_no_attempt_files(ms: Metastore, sqlite_url: str, warehouse: Path) -> None:
    """A job that fails after some tasks wrote: the abort deletes their attempts' files (no commit moves them)."""
    target = ResolvedTable(sqlite_url, str(warehouse), replace(ms.table("testing.alerts"), metastore=None))
    writer = AcidBatchWriter(target, "test-aborted-job")
    writer.write(iter([rows([1, 2], "India")]))  # outside Spark: statement 0, attempt 0
    attempts = Path(ms.table("testing.alerts").location.removeprefix("file://")) / ATTEMPTS_DIR
    assert [p for p in attempts.rglob("*") if p.is_file()]
    writer.abort([])
    assert not attempts.exists()  # nor the attempts' directory, once empty
    assert visible(ms) == []


def test_the_cleaner_removes_what_killed_drivers_tasks_left_once_their_txn_is_over(
    ms: Metastore, sqlite_url: str, warehouse: Path
) -> None:
    """Drivers killed outright leave their tasks' attempt directories (hidden, never read): a batch write's in
    the table's directory, a compaction's written in place in the partition's. The cleaner removes those whose
    txn is over (aborted by the metastore's housekeeping once the driver stopped heartbeating: here at once),
    and keeps those of a txn still open, whose commit may yet move them in."""
    target = ResolvedTable(sqlite_url, str(warehouse), replace(ms.table("testing.alerts"), metastore=None))

    def tasks_wrote(ids: list[int]) -> tuple[int, int]:
        (txn,) = ms.open_txns(1)
        ((_, wid),) = ms.allocate_table_write_ids([txn], "testing.alerts")
        write_task(target, wid, 0, [rows(ids, "India")])
        return txn, wid

    done_txn, done_wid = tasks_wrote([1, 2])
    commit_write(ms, "testing.alerts", done_txn, done_wid, [write_task(target, done_wid, 1, [rows([3], "India")])], partitioned=True)  # fmt: skip
    dead, _ = tasks_wrote([4])
    _, running = tasks_wrote([5])
    ms.abort_txn(dead)
    (compactor,) = ms.open_txns(1)
    ms.abort_txn(compactor)
    table_dir = Path(ms.table("testing.alerts").location.removeprefix("file://"))
    partition = table_dir / "continent=Asia" / "country=India"
    in_place = Path(staged_output(f"{partition}/{base_dir(1, compactor)}/{bucket_file(0)}", "t3"))
    in_place.parent.mkdir(parents=True)
    in_place.write_bytes(b"a losing attempt's partial file")

    ms.compact("testing.alerts", "continent=Asia/country=India", kind="major", wait=True)
    Cleaner(ms, CompactorConfig(retention=0)).run_once()
    assert [p.name for p in (table_dir / ATTEMPTS_DIR).iterdir()] == [f"w{running}_s0_a0"]
    assert not (partition / ATTEMPTS_DIR).exists()
    assert visible(ms) == [(3, "India")]
