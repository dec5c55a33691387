"""acidstream's compactor as a remote worker of a real Hive 4 metastore's compaction queue: requests queued with
``compact2`` are claimed with ``find_next_compact2``, run under a COMPACTION txn recorded with
``update_compactor_state``, published under the txn's visibility suffix and marked compacted (or failed) in
Hive's queue, and Hive 4's reader reads exactly the committed rows from the output."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.compactor import CompactorConfig
from acidstream.compactor.jobs import BucketJob, BucketResult
from acidstream.compactor.worker import Worker, threaded_runner
from acidstream.errors import InvalidObjectException, NoSuchObjectException, UnsupportedCapability
from acidstream.metastore import MetastoreFacade
from acidstream.metastore.models import TxnStatus
from acidstream.spark.compact import run_requests
from acidstream.storage import table_filesystem
from hive4.referee import Referee, hive_sh
from hive4.test_hive4_metastore_backend import COLUMNS, create_table
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

import_or_skip("hive_metastore.ttypes", reason="the hive extra (pyiceberg[hive]) is not installed")


@pytest.fixture(scope="module")
def hive4_metastore(hive4_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A metastore of this module's own: Hive hands out requests oldest first, so a request another module
    left initiated on the session's metastore (where no Hive worker runs) would stand before every request
    here, and a worker asked for one request would wait for it without end."""
    state = tmp_path_factory.mktemp("hive4-remote-worker")
    uri = hive_sh("start", str(state))
    yield uri
    hive_sh("stop", str(state))


@pytest.fixture
def queue(hive4_metastore: str) -> Iterator[MetastoreFacade]:
    with MetastoreFacade.connect(hive4_metastore, lock_wait_timeout=5) as ms:
        yield ms


def stream(
    q: MetastoreFacade, table: str, rows: Sequence[tuple[Any, ...]], *, abort: Sequence[int] = ()
) -> None:
    """One txn (and so one delta) per row, through the Hive metastore; the rows at ``abort`` are aborted."""
    db, name = table.split(".")
    with (
        StreamingConnection.builder()
        .with_metastore(q)
        .with_database(db)
        .with_table(name)
        .with_transaction_batch_size(1)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    ) as conn:
        for n, row in enumerate(rows):
            conn.begin_transaction()
            conn.write(",".join(map(str, row)).encode())
            if n in abort:
                conn.abort_transaction()
            else:
                conn.commit_transaction()


def hive_view(
    hive4: Referee, q: MetastoreFacade, table: str
) -> tuple[str | None, list[str], list[tuple[Any, ...]]]:
    """What Hive 4 reads now: its base and deltas (``getAcidState``) and its rows."""
    txns = q.snapshot()
    write_ids = q.get_valid_write_ids(table, snapshot=txns)
    location = table_filesystem(q.table(table).location)[1]
    base, current, _ = hive4.select(location, write_ids, txns)
    return base, current, [row for _, row in hive4.read(location, COLUMNS, write_ids, txns)]


def test_a_minor_then_a_major_compaction_of_hive_queue(
    hive4: Referee, hive4_metastore: str, queue: MetastoreFacade
) -> None:
    table = create_table(hive4_metastore)
    stream(queue, table, [(1, "a"), (2, "b"), (3, "c")], abort=[1])
    minor = queue.compact(table, kind="minor")
    assert queue.compact(table, kind="minor") == minor  # Hive answers the initiated request again
    assert queue.get_compaction(minor).state == "initiated"

    # the Spark driver's path (every request claimed, planned, its jobs run together, published)
    [done] = run_requests(queue, [minor], threaded_runner(1), CompactorConfig())
    info = queue.get_compaction(minor)
    assert (done.info.state, info.state, info.kind) == ("ready for cleaning", "ready for cleaning", "minor")
    assert info.txn_id is not None and info.highest_write_id == 3 and info.commit_time is not None
    assert (
        info.next_reader_id is not None
    )  # Hive's CQ_NEXT_TXN_ID, set by the commit: its cleaner waits on it
    assert queue.get_txn_state(info.txn_id) is TxnStatus.COMMITTED
    base, current, rows = hive_view(hive4, queue, table)
    assert (base, current) == (None, [f"delta_0000001_0000003_v{info.txn_id:07d}"])
    assert rows == [(1, "a"), (3, "c")]

    stream(queue, table, [(4, "d")])
    major = queue.compact(table, kind="major")
    outcome = Worker(queue).run_next()  # in-process
    assert outcome is not None and outcome.info.id == major and outcome.rows_written == 3
    info = queue.get_compaction(major)
    assert (info.state, info.kind, info.highest_write_id) == ("ready for cleaning", "major", 4)
    assert info.error_message is None and info.worker_id is None  # Hive forgets the worker once it is done
    base, current, rows = hive_view(hive4, queue, table)
    assert (base, current) == (f"base_0000004_v{info.txn_id:07d}", [])
    assert rows == [(1, "a"), (3, "c"), (4, "d")]
    shown = {c.id: (c.kind, c.state) for c in queue.show_compactions()}
    assert shown[minor] == ("minor", "ready for cleaning") and shown[major] == ("major", "ready for cleaning")


def test_a_failed_compaction_is_marked_failed_in_hive_queue(
    hive4: Referee, hive4_metastore: str, queue: MetastoreFacade
) -> None:
    table = create_table(hive4_metastore)
    stream(queue, table, [(1, "a"), (2, "b")])
    request = queue.compact(table, kind="major")

    def disk_full(jobs: Sequence[BucketJob]) -> list[BucketResult]:
        for job in jobs:  # the output the job would have written, half there
            fs, _ = table_filesystem(job.location)
            fs.create_dir(job.insert_path.rsplit("/", 1)[0])
        raise OSError("No space left on device")

    outcome = Worker(queue, run_jobs=disk_full).run_next(request)
    assert outcome is not None
    info = queue.get_compaction(request)
    assert (outcome.info.state, info.state) == ("failed", "failed")
    assert info.error_message is not None and "No space left on device" in info.error_message
    assert [c.state for c in queue.show_compactions() if c.id == request] == ["failed"]
    assert info.txn_id is not None and queue.get_txn_state(info.txn_id) is TxnStatus.ABORTED
    suffix = f"_v{info.txn_id:07d}"  # the output written in place was removed
    fs, location = table_filesystem(queue.table(table).location)
    assert not [i for i in fs.get_file_info(pafs.FileSelector(location)) if i.base_name.endswith(suffix)]
    base, current, rows = hive_view(hive4, queue, table)
    assert base is None and len(current) == 2 and rows == [(1, "a"), (2, "b")]


def test_a_request_behind_another_table_s_runs_after_it(
    hive4: Referee, hive4_metastore: str, queue: MetastoreFacade
) -> None:
    """Hive hands requests out oldest first: the Spark driver, a worker or a user's wait asked for one request
    runs the ones ahead of it first, as Hive's worker would, rather than wait for a worker that may never run."""
    ahead_table, table = create_table(hive4_metastore), create_table(hive4_metastore)
    stream(queue, ahead_table, [(1, "a"), (2, "b")])
    stream(queue, table, [(3, "c"), (4, "d")])
    ahead = queue.compact(ahead_table, kind="major")
    request = queue.compact(table, kind="major")
    done = ("ready for cleaning", "succeeded")  # (succeeded once Hive's cleaner has run)

    [outcome] = run_requests(
        queue, [request], threaded_runner(1), CompactorConfig()
    )  # the Spark driver's path
    assert outcome.info.id == request and outcome.info.state in done
    assert queue.get_compaction(ahead).state in done
    for name, rows in ((ahead_table, [(1, "a"), (2, "b")]), (table, [(3, "c"), (4, "d")])):
        base, current, read = hive_view(hive4, queue, name)
        assert base is not None and current == [] and read == rows

    stream(queue, ahead_table, [(5, "e")])
    stream(queue, table, [(6, "f")])
    ahead = queue.compact(ahead_table, kind="major")
    request = queue.compact(table, kind="major")
    with Metastore.connect(hive4_metastore) as user:  # ALTER TABLE ... COMPACT ... AND WAIT, in process
        assert user.wait_for_compaction(request).state in done
    assert queue.get_compaction(ahead).state in done
    assert hive_view(hive4, queue, ahead_table)[2] == [(1, "a"), (2, "b"), (5, "e")]
    assert hive_view(hive4, queue, table)[2] == [(3, "c"), (4, "d"), (6, "f")]


def test_the_initiator_and_cleaner_calls_name_hive_own_services(queue: MetastoreFacade) -> None:
    with pytest.raises(UnsupportedCapability, match=r"find_ready_to_clean.*metastore.compactor.cleaner.on"):
        queue.find_ready_to_clean(0)
    with pytest.raises(UnsupportedCapability, match=r"find_potential_compactions.*initiator"):
        queue.find_potential_compactions(10)


def test_a_partition_is_compacted_by_alter_table(
    hive4: Referee, hive4_metastore: str, queue: MetastoreFacade
) -> None:
    table = create_table(hive4_metastore, partition_keys=["part"])
    with pytest.raises(InvalidObjectException, match="You must specify a partition"):
        queue.compact(table)
    with pytest.raises(NoSuchObjectException):
        queue.compact(table, {"part": "p0"})
    stream(queue, table, [(1, "a", "p0"), (2, "b", "p0"), (3, "c", "p1")])
    [(request, state)] = queue.execute(f"ALTER TABLE {table} PARTITION (part='p0') COMPACT 'minor'") or []
    assert state == "initiated" and queue.compact(table, "part=p0", "minor") == request
    [shown] = [row for row in queue.execute("SHOW COMPACTIONS") or [] if row[0] == request]
    assert shown[1:6] == (*table.split("."), "part=p0", "MINOR", "initiated")

    major = queue.compact(table, {"part": "p1"}, "major")
    assert queue.find_next_compaction("w", major) is None  # Hive claims in queue order: p0's request first
    outcome = Worker(queue).run_next(request)
    assert outcome is not None and outcome.info.state == "ready for cleaning"
    info = queue.get_compaction(request)
    assert (info.table_name, info.partition, info.kind, info.state) == (
        table,
        "part=p0",
        "minor",
        "ready for cleaning",
    )
    txns = queue.snapshot()
    write_ids = queue.get_valid_write_ids(table, snapshot=txns)
    location = table_filesystem(queue.table(table).location)[1]
    assert hive4.select(f"{location}/part=p0", write_ids, txns)[1] == [
        f"delta_0000001_0000002_v{info.txn_id:07d}"
    ]
    rows = [
        row for d in ("p0", "p1") for _, row in hive4.read(f"{location}/part={d}", COLUMNS, write_ids, txns)
    ]
    assert rows == [(1, "a"), (2, "b"), (3, "c")]

    queue.mark_failed(major, "not wanted")  # by id, as an operator would: no worker holds it
    assert (queue.get_compaction(major).state, queue.get_compaction(major).error_message) == (
        "failed",
        "not wanted",
    )


def test_spark_compacts_every_partition_from_hive_queue(
    spark: Any, hive4: Referee, hive4_metastore: str, queue: MetastoreFacade
) -> None:
    from acidstream.spark import compact

    table = create_table(hive4_metastore, partition_keys=["part"])
    stream(queue, table, [(1, "a", "p0"), (2, "b", "p1"), (3, "c", "p0"), (4, "d", "p1")])
    outcomes = compact(spark, table, "major", metastore=hive4_metastore)
    assert [(o.info.partition, o.info.state) for o in outcomes] == [
        ("part=p0", "ready for cleaning"),
        ("part=p1", "ready for cleaning"),
    ]
    txns = queue.snapshot()
    write_ids = queue.get_valid_write_ids(table, snapshot=txns)
    location = table_filesystem(queue.table(table).location)[1]
    expected = {"p0": [(1, "a"), (3, "c")], "p1": [(2, "b"), (4, "d")]}
    for info in (o.info for o in outcomes):
        directory = f"{location}/{info.partition}"
        base = hive4.select(directory, write_ids, txns)[0]
        assert base is not None and base.startswith("base_") and base.endswith(f"_v{info.txn_id:07d}")
        rows = [row for _, row in hive4.read(directory, COLUMNS, write_ids, txns)]
        assert rows == expected[(info.partition or "").split("=")[1]]
