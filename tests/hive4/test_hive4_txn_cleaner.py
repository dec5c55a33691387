"""Hive's txn cleaner never shows an aborted txn's rows: on a Hive 4 metastore running its housekeeping as
production metastores do (``AcidTxnCleanerService`` on, which deletes aborted txns that recorded no write, and
``AcidHouseKeeperService`` timing out silent txns), rows our writers wrote under a txn that was then aborted —
by the writer, or by the metastore after the writer was SIGKILLed — stay invisible to Hive 4's reader and to
ours once the cleaner has run: the txn keeps its record (its write is recorded when it locks, before any row
reaches disk) and ``get_valid_write_ids`` still lists its write id as aborted.

Each test first checks that the aborted rows are on disk (read with every write id taken as valid), so the
reads afterwards show a snapshot's work, not an empty file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.acid.writeids import ValidWriteIdList
from acidstream.errors import TransactionError, TxnAbortedException
from acidstream.metastore.models import TxnStatus
from acidstream.mutate import BucketIdResolver, MutatorClient, MutatorCoordinator, RecordIdentifier
from acidstream.storage import table_filesystem
from hive4.hivetables import COLUMNS, read_directory
from hive4.judge import judge
from hive4.referee import Referee, hive_sh, start_brisk_metastore
from hive4.txncleaner import PATIENCE, cleaner_pass
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

LAYOUTS = {
    "dynamic": "PARTITIONED BY (part string) ",
    "static": "PARTITIONED BY (part string) ",
    "unpartitioned": "",
}


@pytest.fixture(scope="module")
def uri(hive4_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Hive Metastore of this module's own, its txn cleaner on with short intervals."""
    import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")
    state = tmp_path_factory.mktemp("hms-cleaner")
    yield start_brisk_metastore(state)
    hive_sh("stop", str(state))


@pytest.fixture
def ms(uri: str) -> Iterator[Metastore]:
    with Metastore.connect(uri) as metastore:
        yield metastore


_names = iter(range(1_000_000))


def create(ms: Metastore, layout: str, buckets: str = "") -> str:
    name = f"default.cleaned{next(_names)}"
    ms.execute(
        f"CREATE TABLE {name} (id int, msg string) {LAYOUTS[layout]}{buckets}STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    return name


def on_disk(ms: Metastore, table: str) -> set[tuple[Any, ...]]:
    """Every row in the table's files, whatever txn wrote it (each write id taken as valid), in its
    directories on disk (partitions registered or not), partition value last."""
    location = table_filesystem(ms.table(table).location)[1]
    dirs = (
        {"": location}
        if not ms.table(table).partition_keys
        else {p.name.split("=", 1)[1]: str(p) for p in Path(location).glob("part=*")}
    )
    everything = str(ValidWriteIdList(2**62, table=table)), f"{2**62}:{2**63 - 1}::"
    return {
        (*row, *([part] if part else []))
        for part, where in dirs.items()
        for _, row in read_directory(where, COLUMNS, everything[1], everything[0])
    }


def assert_still_aborted(ms: Metastore, table: str, txn: int, write_id: int) -> None:
    """The cleaner kept the aborted txn's record: it is aborted, and its write id is invalid (aborted)."""
    assert ms.get_txn_state(txn) is TxnStatus.ABORTED, f"txnid:{txn} lost its record"
    assert ms.get_valid_write_ids(table).is_write_id_aborted(write_id), ms.get_valid_write_ids(table)


def streaming(ms: Metastore, table: str, layout: str, batch: int) -> StreamingConnection:
    builder = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("default")
        .with_table(table.split(".")[1])
        .with_transaction_batch_size(batch)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        # each record parsed and flushed to disk as it is written (Hive's writer flushes when its buffer fills)
        .with_configuration({"parse_batch_records": 1, "max_buffered_bytes": 0})
    )
    if layout == "static":
        builder = builder.with_static_partition_values(["a"])
    return builder.connect()


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_streaming_txn_aborted_after_writing_stays_invisible_after_the_cleaner(
    hive4: Referee, ms: Metastore, layout: str
) -> None:
    table = create(ms, layout)

    def rows(k: int, parts: str) -> list[tuple[Any, ...]]:
        made = [(k * 100 + i, f"t{k}", parts[i % len(parts)]) for i in range(4)]
        return [r[:2] for r in made] if layout == "unpartitioned" else made

    def record(row: tuple[Any, ...]) -> bytes:
        return ",".join(map(str, row if layout == "dynamic" else row[:2])).encode()

    committed: list[tuple[Any, ...]] = []
    conn = streaming(ms, table, layout, batch=3)
    try:
        for k, (parts, commit) in enumerate([("a", True), ("ab" if layout == "dynamic" else "a", False)]):
            conn.begin_transaction()
            for row in rows(k, parts):
                conn.write(record(row))
            if commit:
                conn.commit_transaction()
                committed += rows(k, parts)
            else:
                aborted = (conn.current_transaction_id(), conn.current_write_id(), rows(k, parts))
                conn.abort_transaction()
        conn.begin_transaction()  # the batch goes on
        conn.write(record(rows(2, "a")[0]))
        conn.commit_transaction()
        committed.append(rows(2, "a")[0])
    finally:
        conn.close()
    txn, write_id, lost = aborted
    assert {r for r in lost if r[-1] == "a" or layout == "unpartitioned"} <= on_disk(ms, table)
    cleaner_pass(ms)
    judge(hive4, ms, table, expected=committed)
    assert_still_aborted(ms, table, txn, write_id)


WRITER = """
import sys
from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
uri, table, dynamic = sys.argv[1], sys.argv[2], sys.argv[3] == "dynamic"
with Metastore.connect(uri) as ms:
    conn = (
        StreamingConnection.builder().with_metastore(ms).with_database("default").with_table(table)
        .with_transaction_batch_size(3)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    )
    for k in range(3):
        conn.begin_transaction()
        print("BEGIN", k, conn.current_transaction_id(), conn.current_write_id(), flush=True)
        for i in range(4):
            conn.write(f"{k * 100 + i},t{k}{',a' if dynamic else ''}".encode())
        conn.commit_transaction()
        print("COMMITTED", k, flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["dynamic", "unpartitioned"])
def test_a_killed_writers_txn_timed_out_stays_invisible_after_the_cleaner(
    hive4: Referee, ms: Metastore, layout: str
) -> None:
    table = create(ms, layout)
    # SIGKILLed by itself once its second txn's rows are flushed (published in the side file), uncommitted
    done = subprocess.run(
        [sys.executable, "-c", WRITER, ms.url, table.split(".")[1], layout],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "ACIDSTREAM_FAULTS": "orc.flush.published=kill@2"},
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    begun = [line.split() for line in done.stdout.splitlines() if line.startswith("BEGIN")]
    assert [b[1] for b in begun] == ["0", "1"] and "COMMITTED 1" not in done.stdout, done.stdout
    txn, write_id = int(begun[1][2]), int(begun[1][3])
    part = ("a",) if layout == "dynamic" else ()
    committed = [(i, "t0", *part) for i in range(4)]
    assert {(100 + i, "t1", *part) for i in range(4)} <= on_disk(ms, table)
    deadline = time.monotonic() + PATIENCE
    while ms.get_txn_state(txn) is TxnStatus.OPEN:  # until Hive's housekeeping times it out
        assert time.monotonic() < deadline, f"txnid:{txn} of the killed writer still open after {PATIENCE}s"
        time.sleep(1)
    cleaner_pass(ms)
    judge(hive4, ms, table, expected=committed)
    assert_still_aborted(ms, table, txn, write_id)


def test_an_aborted_mutation_stays_invisible_after_the_cleaner(hive4: Referee, ms: Metastore) -> None:
    table = create(ms, "dynamic", "CLUSTERED BY (id) INTO 2 BUCKETS ")
    db, name = table.split(".")
    conn = streaming(ms, table, "dynamic", batch=1)
    with conn:
        conn.begin_transaction()
        for i in range(4):
            conn.write(f"{i},m{i},a".encode())
        conn.commit_transaction()
    committed = [(i, f"m{i}", "a") for i in range(4)]
    client = (
        MutatorClient.builder().with_metastore(ms).add_sink_table(db, name, create_partitions=True).build()
    )
    client.connect()
    txn = client.new_transaction()
    (sink,) = client.get_tables()
    txn.begin()
    rows = ms.table(table).scan(with_row_id=True, snapshot=txn.snapshot()).to_arrow().to_pylist()
    by_id = {r["id"]: r for r in rows}
    with MutatorCoordinator.builder().with_metastore(ms).with_table(sink).build() as coordinator:
        coordinator.update(
            ["a"], {"ROW__ID": RecordIdentifier.of(by_id[1]["ROW__ID"]), "id": 1, "msg": "new"}
        )
        coordinator.delete(["a"], {"ROW__ID": RecordIdentifier.of(by_id[2]["ROW__ID"]), "id": 2, "msg": "m2"})
        coordinator.insert(["b"], BucketIdResolver(sink).attach({"id": 9, "msg": "inserted"}))
    write_id = sink.write_id
    assert write_id is not None
    txn.abort()
    client.close()
    assert (1, "new", "a") in on_disk(ms, table)
    cleaner_pass(ms)
    judge(hive4, ms, table, expected=committed)
    assert_still_aborted(ms, table, txn.transaction_id, write_id)


def spark_rows(n: int, tag: str) -> pa.RecordBatch:
    return pa.record_batch({"id": pa.array(range(n), pa.int32()), "msg": pa.array([tag] * n)})


@pytest.mark.parametrize("layout", ["dynamic", "unpartitioned"])
def test_a_spark_job_whose_txn_timed_out_stays_invisible_after_the_cleaner(
    hive4: Referee, ms: Metastore, layout: str
) -> None:
    """Spark's calls of the batch writer: a task writes, then the job's commit moves its files into the table
    after the metastore timed the txn out (a stalled driver): the commit fails and the files stay."""
    import_or_skip("pyspark", reason="the spark extra is not installed")
    from acidstream.spark.batch_write import AcidBatchWriter
    from acidstream.spark.options import resolve

    table = create(ms, layout)
    batch = spark_rows(5, "lost")
    if layout == "dynamic":
        batch = batch.append_column("part", pa.array(["a"] * 5))
    writer = AcidBatchWriter(resolve({"metastore": ms.url, "path": table}, writable=True), "cleaner-test")
    message = writer.write(iter([batch]))
    ms.abort_txn(writer.txn_id)  # as Hive's housekeeping does to a txn whose heartbeats stopped
    with pytest.raises(TransactionError):
        writer.commit([message])
    assert {tuple(r.values()) for r in batch.to_pylist()} <= on_disk(ms, table)
    cleaner_pass(ms)
    committed = []
    if layout == "dynamic":  # a later write to the partition, so that readers list it whatever it holds
        with streaming(ms, table, layout, batch=1) as conn:
            conn.begin_transaction()
            conn.write(b"7,kept,a")
            conn.commit_transaction()
        committed = [(7, "kept", "a")]
    judge(hive4, ms, table, expected=committed)
    assert_still_aborted(ms, table, writer.txn_id, writer.write_id)


def test_a_spark_sinks_micro_batch_whose_txn_timed_out_stays_invisible_after_the_cleaner(
    hive4: Referee, ms: Metastore
) -> None:
    """The streaming sink's steps: a task elects the micro-batch's txn and writes under it; the batch's commit
    moves the files into the table after the metastore timed the txn out: the commit fails, the files stay."""
    import_or_skip("pyspark", reason="the spark extra is not installed")
    from acidstream.spark.options import resolve
    from acidstream.spark.stream_write import (
        AcidStreamWriter,
        StreamMessage,
        batch_label,
        batch_tag,
        elect_batch_txn,
    )
    from acidstream.spark.task_write import write_task

    table = create(ms, "unpartitioned")
    target = resolve({"metastore": ms.url, "path": table}, writable=True)
    txn, write_id = elect_batch_txn(
        ms, target.table, batch_tag("cleaner", 0, "run"), batch_label("cleaner", 0, "run")
    )
    result = write_task(target, write_id, 0, iter([spark_rows(5, "lost")]))
    ms.abort_txn(txn)  # as Hive's housekeeping does to a txn whose heartbeats stopped
    with pytest.raises(TxnAbortedException):
        AcidStreamWriter(target, {"sinkId": "cleaner"}).commit([StreamMessage("q", txn, write_id, result)], 0)
    assert {(i, "lost") for i in range(5)} <= on_disk(ms, table)
    cleaner_pass(ms)
    judge(hive4, ms, table, expected=[])
    assert_still_aborted(ms, table, txn, write_id)
