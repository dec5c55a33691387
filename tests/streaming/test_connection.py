"""Behaviours of Hive's TestStreaming / TestStreamingDynamicPartitioning, ported."""

from __future__ import annotations

import contextlib
import errno
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from acidstream import (
    Metastore,
    StreamingConnection,
    StrictDelimitedInputWriter,
    StrictJsonWriter,
    StrictRegexWriter,
    faults,
)
from acidstream.acid.orc.compression import CompressionKind
from acidstream.acid.orc.tail import read_tail
from acidstream.errors import (
    ConnectionError,
    InvalidPartition,
    InvalidTable,
    MetastoreUnavailable,
    SerializationError,
    StreamingIOFailure,
    TransactionError,
)
from acidstream.faults import armed
from acidstream.metastore import LockComponent, LockLevel, LockState, LockType
from acidstream.runtime import DEFAULT_SWITCH_INTERVAL
from acidstream.streaming.records import buffer as buffer_module
from acidstream.streaming.records import text_values
from acidstream.txn.state import TxnState
from support.faultinjection import sqlite_write_lock_held

DELIM = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()


@pytest.fixture
def ms(metastore_url: str, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(metastore_url, warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE testing")
        m.execute(
            "CREATE TABLE testing.alerts (id int, msg string) PARTITIONED BY (continent string, country string) "
            "CLUSTERED BY (id) INTO 5 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        m.execute(
            "CREATE TABLE testing.flat (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        yield m


@pytest.fixture(params=["c", "python"])
def native(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test runs with the C extension's record buffer and split, then with their Python forms (as without
    the extension)."""
    if request.param == "c" and buffer_module.C_RECORD_BUFFER is None:
        pytest.skip("the C extension is not built")
    if request.param == "python":
        monkeypatch.setattr(buffer_module, "C_RECORD_BUFFER", None)
        monkeypatch.setattr(text_values, "native_split_uniform", None)
    return str(request.param)


def connect(ms: Metastore, table: str = "flat", **kw: object) -> StreamingConnection:
    b = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("testing")
        .with_table(table)
        .with_agent_info("agent-1")
        .with_record_writer(kw.pop("writer", DELIM))  # type: ignore[arg-type]
    )
    if "static" in kw:
        b = b.with_static_partition_values(kw.pop("static"))  # type: ignore[arg-type]
    if "batch" in kw:
        b = b.with_transaction_batch_size(kw.pop("batch"))  # type: ignore[arg-type]
    if kw:
        b = b.with_configuration(kw)
    return b.connect()


def rows(ms: Metastore, table: str = "flat", **kw: object) -> list[dict[str, object]]:
    out = ms.table(f"testing.{table}").scan(**kw).to_arrow().to_pylist()  # type: ignore[arg-type]
    return sorted(out, key=lambda r: (r.get("id") or 0, str(r)))


def test_commit_makes_rows_visible_and_writes_hive_layout(ms: Metastore) -> None:
    conn = connect(ms)
    conn.begin_transaction()
    conn.write(b"1,Hello streaming")
    conn.write("2,Welcome to streaming")
    assert rows(ms) == []  # uncommitted rows are never visible
    conn.commit_transaction()
    assert rows(ms) == [{"id": 1, "msg": "Hello streaming"}, {"id": 2, "msg": "Welcome to streaming"}]
    conn.close()
    table_dir = Path(ms.table("testing.flat").location)
    assert (table_dir / "delta_0000001_0000001" / "bucket_00000").is_file()
    assert not list(table_dir.rglob("*_flush_length"))  # batch size 1: no side file
    assert conn.current_transaction_state() is TxnState.COMMITTED


def test_orc_compress_table_property_picks_the_codec_as_in_hive(ms: Metastore) -> None:
    ms.execute(
        "CREATE TABLE testing.snappy (id int, msg string) STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true', 'orc.compress'='snappy')"
    )

    def codec_of_new_file(**config: object) -> CompressionKind:
        before = set(Path(ms.table("testing.snappy").location).rglob("bucket_*"))
        with connect(ms, "snappy", **config) as conn, conn.transaction():
            conn.write(b"1,compressed")
        (path,) = set(Path(ms.table("testing.snappy").location).rglob("bucket_*")) - before
        with pa.OSFile(str(path)) as f:
            return read_tail(f, f.size()).compression

    assert codec_of_new_file() is CompressionKind.SNAPPY
    assert codec_of_new_file(compression="zlib") is CompressionKind.ZLIB  # the connection's setting wins
    assert rows(ms, "snappy") == [{"id": 1, "msg": "compressed"}] * 2
    assert connect(ms).writer_options.compression == "ZLIB"  # Hive's default without the property

    ms.execute(
        "CREATE TABLE testing.lzo (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true', 'orc.compress'='LZO')"
    )
    with pytest.raises(ConnectionError, match=r"testing.lzo: table property 'orc.compress' = 'LZO'"):
        connect(ms, "lzo")


def test_abort_hides_rows_and_row_ids_restart_per_write_id(ms: Metastore) -> None:
    with connect(ms, batch=3) as conn:
        conn.begin_transaction()
        conn.write(b"1,aborted")
        conn.abort_transaction()
        conn.begin_transaction()
        conn.write(b"2,kept")
        conn.write(b"3,kept")
        conn.commit_transaction()
        got = rows(ms, with_row_id=True)
    assert [r["msg"] for r in got] == ["kept", "kept"]
    assert [r["ROW__ID"] for r in got] == [
        {"writeid": 2, "bucketid": 536870912, "rowid": 0},
        {"writeid": 2, "bucketid": 536870912, "rowid": 1},
    ]


def test_batch_of_ten_interleaved_commits_and_aborts_read_while_open(ms: Metastore) -> None:
    conn = connect(ms, batch=10)
    for i in range(1, 5):
        conn.begin_transaction()
        conn.write(f"{i},txn{i}".encode())
        if i == 2:
            conn.abort_transaction()
        elif i < 4:
            conn.commit_transaction()
    # txn 4 is still open and has rows buffered/flushed; the batch's file is still open.
    assert conn.remaining_transactions() == 6
    table_dir = Path(ms.table("testing.flat").location)
    assert (table_dir / "delta_0000001_0000010" / "bucket_00000_flush_length").is_file()
    assert [r["id"] for r in rows(ms)] == [1, 3]
    conn.commit_transaction()
    assert [r["id"] for r in rows(ms)] == [1, 3, 4]
    conn.close()
    assert not list(table_dir.rglob("*_flush_length"))  # deleted when the batch closes
    assert [r["id"] for r in rows(ms)] == [1, 3, 4]


def test_stats_count_records_and_their_bytes_however_they_arrive(ms: Metastore, native: str) -> None:
    import io

    with connect(ms) as conn:
        conn.begin_transaction()
        conn.write(b"1,abc")  # 5 bytes
        conn.write("2,é")  # 4 bytes in UTF-8
        conn.write_stream(io.BytesIO(b"3,x\n4,yz\n"))  # 3 + 4 bytes, delimiters not counted
        conn.commit_transaction()
        stats = conn.stats()
    assert stats["records_written"] == 4 and stats["bytes_written"] == 16
    assert stats["committed_txns"] == 1 and stats["aborted_txns"] == 0


def test_each_txn_holds_a_shared_read_lock_with_the_agent_info(ms: Metastore) -> None:
    with connect(ms, table="alerts", static=["Asia", "India"], batch=2) as conn:
        for _ in range(2):
            conn.begin_transaction()
            [lock] = ms.show_locks("testing.alerts")
            txn = conn.current_transaction_id()
            assert (lock.txn_id, lock.type, lock.state) == (txn, LockType.SHARED_READ, LockState.ACQUIRED)
            assert (lock.partition, lock.agent_info) == ("continent=Asia/country=India", "agent-1")
            conn.write(b"1,a")
            conn.commit_transaction()
            assert ms.show_locks("testing.alerts") == []  # released with its txn


def test_begin_fails_while_an_exclusive_lock_is_held(ms: Metastore) -> None:
    held = ms.lock([LockComponent(LockType.EXCLUSIVE, LockLevel.TABLE, "testing", "flat")])
    with connect(ms) as conn:
        with pytest.raises(TransactionError, match=r"Unable to acquire lock on testing\.flat"):
            conn.begin_transaction()
        with pytest.raises(TransactionError):
            conn.begin_transaction()  # the batch is dead, as Hive marks it
    ms.unlock(held.lock_id)
    with connect(ms) as conn:
        conn.begin_transaction()
        conn.write(b"1,a")
        conn.commit_transaction()
    assert rows(ms) == [{"id": 1, "msg": "a"}]


def test_auto_roll_to_next_batch(ms: Metastore) -> None:
    with connect(ms, batch=2) as conn:
        seen = []
        for i in range(5):
            conn.begin_transaction()
            seen.append(conn.remaining_transactions())
            conn.write(f"{i},m".encode())
            conn.commit_transaction()
        assert seen == [1, 0, 1, 0, 1]
        assert conn.stats()["committed_txns"] == 5
    names = sorted(p.name for p in Path(ms.table("testing.flat").location).iterdir() if p.is_dir())
    assert names == ["delta_0000001_0000002", "delta_0000003_0000004", "delta_0000005_0000006"]
    assert len(rows(ms)) == 5


def test_state_machine_errors_use_hive_messages(ms: Metastore, native: str) -> None:
    conn = connect(ms)
    with pytest.raises(
        TransactionError, match=re.escape("Transaction batch is null. Missing beginTransaction?")
    ):
        conn.write(b"1,x")
    with pytest.raises(TransactionError, match="Transaction batch is null"):
        conn.commit_transaction()
    conn.begin_transaction()
    conn.write(b"1,x")
    conn.commit_transaction()
    with pytest.raises(
        TransactionError, match=re.escape("Transaction state is not OPEN. Missing beginTransaction?")
    ):
        conn.write(b"2,y")
    with pytest.raises(TransactionError, match="Transaction state is not OPEN"):
        conn.abort_transaction()
    conn.close()
    conn.close()  # idempotent
    for call in (conn.begin_transaction, lambda: conn.write(b"3,z"), conn.commit_transaction):
        with pytest.raises(ConnectionError, match=re.escape("Streaming connection is closed already.")):
            call()
    assert "TxnStatus[C]" in conn.to_transaction_string()


def test_close_aborts_unused_transactions_of_the_batch(ms: Metastore) -> None:
    conn = connect(ms, batch=5)
    conn.begin_transaction()
    conn.write(b"1,a")
    conn.commit_transaction()
    conn.begin_transaction()
    conn.write(b"2,b")
    txn = conn.current_transaction_id()
    conn.close()
    assert str(ms.get_txn_state(txn).name) == "ABORTED"
    assert [r["id"] for r in rows(ms)] == [1]
    assert "TxnStatus[CAAAA]" in conn.to_transaction_string()


def test_commit_with_key_value_is_atomic_table_property(ms: Metastore) -> None:
    with connect(ms) as conn:
        conn.begin_transaction()
        conn.write(b"1,a")
        conn.commit_transaction(key="_meta_offsets", value="topic-0:42")
    assert ms.table("testing.flat").properties["_meta_offsets"] == "topic-0:42"


def test_static_partition_created_and_delta_path(ms: Metastore) -> None:
    with connect(ms, table="alerts", static=["Asia", "India"]) as conn:
        conn.begin_transaction()
        for i in range(20):
            conn.write(f"{i},msg{i}".encode())
        conn.commit_transaction()
    parts = ms.list_partitions("testing.alerts")
    assert [p.name for p in parts] == ["continent=Asia/country=India"]
    part_dir = Path(parts[0].location)
    delta = part_dir / "delta_0000001_0000001"
    files = sorted(p.name for p in delta.iterdir())
    assert "_orc_acid_version" in files and (delta / "_orc_acid_version").read_bytes() == b"2"
    assert {f for f in files if f.startswith("bucket_")} <= {f"bucket_0000{b}" for b in range(5)}
    got = rows(ms, "alerts")
    assert len(got) == 20
    assert {(r["continent"], r["country"]) for r in got} == {("Asia", "India")}


def test_static_partition_errors(ms: Metastore) -> None:
    with pytest.raises(ConnectionError, match="specifies partitions for un-partitioned table"):
        connect(ms, static=["x"])
    with pytest.raises(InvalidPartition):
        connect(ms, table="alerts", static=["Asia"])
    with pytest.raises(InvalidTable, match="does not exist"):
        connect(ms, table="nope")
    ms.execute("CREATE TABLE testing.plain (id int) STORED AS ORC")
    with pytest.raises(InvalidTable, match="is not an Acid table"):
        connect(ms, table="plain")


def test_dynamic_partitions_and_default_partition(ms: Metastore) -> None:
    with connect(ms, table="alerts") as conn:
        conn.begin_transaction()
        conn.write(b"1,a,Asia,India")
        conn.write(b"2,b,Europe,Germany")
        conn.write(b"3,c,Asia,")  # empty value → default partition
        conn.write(b"4,d")  # missing trailing fields → default partitions
        conn.commit_transaction()
    names = sorted(p.name for p in ms.list_partitions("testing.alerts"))
    assert names == [
        "continent=Asia/country=India",
        "continent=Asia/country=__HIVE_DEFAULT_PARTITION__",
        "continent=Europe/country=Germany",
        "continent=__HIVE_DEFAULT_PARTITION__/country=__HIVE_DEFAULT_PARTITION__",
    ]
    got = {r["id"]: (r["continent"], r["country"]) for r in rows(ms, "alerts")}
    assert got == {1: ("Asia", "India"), 2: ("Europe", "Germany"), 3: ("Asia", None), 4: (None, None)}
    asia = rows(ms, "alerts", partition_filter={"continent": "Asia"})
    assert [r["id"] for r in asia] == [1, 3]


def test_bucketing_matches_hive(ms: Metastore) -> None:
    ms.execute(
        "CREATE TABLE testing.bucketed (key1 string, key2 int, data string) CLUSTERED BY (key1, key2) "
        "INTO 4 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    with connect(ms, table="bucketed") as conn:
        conn.begin_transaction()
        for rec in (b"name0,1,Hello", b"name2,2,Welcome", b"name4,2,more", b"name5,2,even more"):
            conn.write(rec)
        conn.commit_transaction()
    got = rows(ms, "bucketed", with_row_id=True)
    buckets = {r["key1"]: (r["ROW__ID"]["bucketid"] >> 16) & 0xFFF for r in got}
    assert buckets == {"name0": 1, "name2": 2, "name4": 2, "name5": 3}
    delta = Path(ms.table("testing.bucketed").location) / "delta_0000001_0000001"
    assert sorted(p.name for p in delta.glob("bucket_*")) == ["bucket_00001", "bucket_00002", "bucket_00003"]


def test_json_and_regex_writers(ms: Metastore) -> None:
    json_writer = StrictJsonWriter.builder().build()
    with connect(ms, table="alerts", writer=json_writer) as conn:
        conn.begin_transaction()
        conn.write(b'{"ID": 1, "Msg": "hi", "continent": "Asia", "country": "India", "extra": 5}')
        conn.commit_transaction()
    assert rows(ms, "alerts") == [{"id": 1, "msg": "hi", "continent": "Asia", "country": "India"}]
    regex_writer = StrictRegexWriter.builder().with_regex(r"^(\d+)\|(.*)$").build()
    with connect(ms, writer=regex_writer) as conn:
        conn.begin_transaction()
        conn.write(b"7|seven")
        conn.commit_transaction()
    assert rows(ms) == [{"id": 7, "msg": "seven"}]


def test_bad_record_names_index_and_field_and_keeps_good_rows(ms: Metastore, native: str) -> None:
    with connect(ms) as conn:
        conn.begin_transaction()
        conn.write(b"1,good")
        conn.write(b"x,bad id")
        conn.write(b"3,good")
        with pytest.raises(SerializationError) as info:
            conn.commit_transaction()
        assert info.value.record_index == 1 and info.value.field == "id"
        conn.write(b"4,after")
        conn.commit_transaction()  # the txn stayed usable
    assert [r["id"] for r in rows(ms)] == [1, 3, 4]
    # rows 1 and 3 were already encoding when the commit failed: they come first, with their own row ids
    assert [(r["id"], r["ROW__ID"]["rowid"]) for r in rows(ms, with_row_id=True)] == [(1, 0), (3, 1), (4, 2)]


def test_a_full_buffer_is_parsed_at_the_record_that_fills_it(ms: Metastore, native: str) -> None:
    with connect(ms, parse_batch_records=3) as conn:
        conn.begin_transaction()
        conn.write(b"1,a")
        conn.write(b"x,bad")
        with pytest.raises(SerializationError) as info:
            conn.write(b"3,c")  # the third record fills the buffer: parsed now, not at the commit
        assert info.value.record_index == 1
        for i in range(4, 10):  # later buffers fill and parse the same way
            conn.write(f"{i},d".encode())
        assert conn.stats()["records_written"] == 8  # 9 parsed (6 of them at the two later fills), 1 bad
        conn.commit_transaction()
    assert [r["id"] for r in rows(ms)] == [1, 3, 4, 5, 6, 7, 8, 9]


def test_a_buffer_full_of_bytes_is_parsed_at_the_record_that_fills_it(ms: Metastore, native: str) -> None:
    with connect(ms, parse_batch_bytes=12) as conn:
        conn.begin_transaction()
        conn.write(b"1,aaa")  # 5 bytes
        conn.write(b"x,bad")  # 10
        with pytest.raises(SerializationError) as info:
            conn.write(b"3,c")  # 13: the buffer is full, parsed now
        assert info.value.record_index == 1
        conn.write(b"4," + b"d" * 20)  # one record over the threshold on its own: parsed at once
        assert conn.stats()["records_written"] == 3
        conn.write(b"5,e")
        conn.commit_transaction()
    assert [r["id"] for r in rows(ms)] == [1, 3, 4, 5]


def test_configuration_refuses_unknown_keys_and_values_out_of_range(ms: Metastore) -> None:
    with pytest.raises(ConnectionError, match="unknown configuration keys \\['parse_batch'\\]"):
        connect(ms, parse_batch=5)
    for key, value in (("parse_batch_records", 0), ("parse_batch_bytes", -1), ("max_buffered_bytes", "x")):
        with pytest.raises(ConnectionError, match=f"configuration '{key}'"):
            connect(ms, **{key: value})
    with connect(ms, parse_batch_records="2", parse_batch_bytes=1 << 10, max_buffered_bytes=0) as conn:
        assert (conn.config.parse_batch_records, conn.config.max_buffered_bytes) == (2, 0)


def test_write_copies_mutable_buffers_and_refuses_other_types(ms: Metastore, native: str) -> None:
    with connect(ms) as conn:
        conn.begin_transaction()
        buf = bytearray(b"1,first")
        conn.write(buf)
        buf[:] = b"2,reused"  # a caller reusing its buffer must not change the buffered record
        conn.write(buf)
        conn.write(memoryview(b"3,view"))
        conn.write(memoryview(b"4x,xsxtxrxixdxexd")[::2])  # not contiguous: "4,strided"
        with pytest.raises(TypeError, match="write\\(\\) takes bytes or str, not int"):
            conn.write(4)  # type: ignore[arg-type]
        conn.commit_transaction()
    assert [(r["id"], r["msg"]) for r in rows(ms)] == [
        (1, "first"),
        (2, "reused"),
        (3, "view"),
        (4, "strided"),
    ]


def test_rows_of_a_commit_that_failed_then_aborted_never_show(ms: Metastore, native: str) -> None:
    with connect(ms, batch=2) as conn:
        conn.begin_transaction()
        conn.write(b"1,doomed")
        conn.write(b"x,bad id")
        with pytest.raises(SerializationError):
            conn.commit_transaction()
        conn.abort_transaction()
        conn.begin_transaction()
        conn.write(b"2,kept")
        conn.commit_transaction()
        assert rows(ms) == [{"id": 2, "msg": "kept"}]
    assert rows(ms) == [{"id": 2, "msg": "kept"}]


def _metastore_state(ms: Metastore, txn: int | None) -> str:
    assert txn is not None
    return ms.get_txn_state(txn).name


@pytest.mark.parametrize("batch", [1, 3])
def test_an_io_error_in_the_commits_last_parse_kills_the_batch(
    ms: Metastore, native: str, batch: int
) -> None:
    """Regression: the final parse inside commit_transaction failed with an I/O error, the buffered records
    were gone, and a second commit_transaction() succeeded without them. Any failure but a bad record kills the
    batch (Hive's markDead): the txn is aborted in the metastore and every later call raises."""
    with connect(ms, batch=batch, max_buffered_bytes=1) as conn:  # every routed row is flushed at once
        conn.begin_transaction()
        for i in range(1000):
            conn.write(b"%d,row" % i)
        txn = conn.current_transaction_id()
        with armed("orc.flush.tail", faults.os_error(errno.ENOSPC)), pytest.raises(StreamingIOFailure):
            conn.commit_transaction()
        assert conn.current_transaction_state() is TxnState.ABORTED
        assert _metastore_state(ms, txn) == "ABORTED"
        with pytest.raises(TransactionError):
            conn.commit_transaction()
        with pytest.raises(TransactionError):
            conn.write(b"1,late")
        if batch > 1:  # the rest of the batch was aborted with it (a batch of one is simply used up)
            with pytest.raises(TransactionError, match="closed streaming connection"):
                conn.begin_transaction()
    assert rows(ms) == []
    with connect(ms, batch=batch) as conn:  # the table takes new transactions
        conn.begin_transaction()
        conn.write(b"7,after")
        conn.commit_transaction()
    assert rows(ms) == [{"id": 7, "msg": "after"}]


def test_an_io_error_at_an_intermediate_parse_kills_the_batch(ms: Metastore, native: str) -> None:
    """Regression: write() raised an I/O error at an intermediate parse point, the caller carried on, and the
    commit succeeded with 700 of 1,000 rows."""
    with connect(ms, batch=2, parse_batch_records=100, max_buffered_bytes=1) as conn:
        conn.begin_transaction()
        txn = conn.current_transaction_id()
        failures: list[Exception] = []
        with armed("orc.flush.tail", faults.os_error(errno.EIO), at=4):
            for i in range(1000):
                try:
                    conn.write(b"%d,row" % i)
                except (StreamingIOFailure, TransactionError) as exc:
                    failures.append(exc)
        assert isinstance(failures[0], StreamingIOFailure)
        assert failures[1:] and all(isinstance(f, TransactionError) for f in failures[1:])
        with pytest.raises(TransactionError):
            conn.commit_transaction()
        assert conn.current_transaction_state() is TxnState.ABORTED
        assert _metastore_state(ms, txn) == "ABORTED"
    assert rows(ms) == []


@pytest.mark.timeout(120)
def test_a_commit_the_metastore_cannot_take_leaves_client_and_metastore_agreeing(
    tmp_path: Path, warehouse: Path
) -> None:
    """Regression: another process held SQLite's write lock; the commit waited ~50 busy timeouts, then the
    client said ABORTED while the metastore said OPEN. Now the wait is bounded, each txn's state on the client is the
    metastore's, and the abort the failure could not make is retried (heartbeats, close) until it is made."""
    db = tmp_path / "ms.db"
    with Metastore.connect(f"sqlite:///{db}", warehouse=str(warehouse), db_wait_timeout=0.5) as m:
        m.execute("CREATE TABLE flat (id int, msg string) TBLPROPERTIES ('transactional'='true')")
        conn = (
            StreamingConnection.builder()
            .with_metastore(m)
            .with_database("default")
            .with_table("flat")
            .with_record_writer(DELIM)
            .with_transaction_batch_size(3)
            .with_configuration({"heartbeat_interval": 0.1})
            .connect()
        )
        with conn:
            conn.begin_transaction()
            conn.write(b"1,lost")
            txn = conn.current_transaction_id()
            with sqlite_write_lock_held(db):
                with pytest.raises(MetastoreUnavailable):
                    conn.commit_transaction()
                assert conn.current_transaction_state() is TxnState.OPEN  # the abort could not be made either
                assert _metastore_state(m, txn) == "OPEN"
                with pytest.raises(TransactionError, match="dead"):
                    conn.commit_transaction()
            for _ in range(200):  # the next heartbeats abort it now that the lock is free
                if conn.current_transaction_state() is TxnState.ABORTED:
                    break
                time.sleep(0.05)
            assert conn.current_transaction_state() is TxnState.ABORTED
            assert _metastore_state(m, txn) == "ABORTED"
            assert conn.to_transaction_string().endswith("TxnStatus[AAA] LastUsed txnid:1")
        assert m.table("default.flat").scan().to_arrow().num_rows == 0


def test_bad_records_at_intermediate_parses_keep_every_good_record(ms: Metastore, native: str) -> None:
    """A SerializationError never loses the transaction's other records, wherever the parse happens."""
    with connect(ms, batch=2, parse_batch_records=100) as conn:
        conn.begin_transaction()
        bad = 0
        for i in range(1000):
            try:
                conn.write(b"%d,row" % i if i % 150 else b"x%d,bad" % i)
            except SerializationError:
                bad += 1
        with contextlib.suppress(SerializationError):
            conn.commit_transaction()
        if conn.current_transaction_state() is TxnState.OPEN:
            conn.commit_transaction()
        assert bad >= 1
    assert [r["id"] for r in rows(ms)] == [i for i in range(1000) if i % 150]


def test_dead_letter_file_collects_bad_records(ms: Metastore, tmp_path: Path) -> None:
    dead = tmp_path / "dead.jsonl"
    conn = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("testing")
        .with_table("flat")
        .with_record_writer(DELIM)
        .with_dead_letter_file(dead)
        .connect()
    )
    with conn:
        conn.begin_transaction()
        conn.write(b"1,ok")
        conn.write(b"nope,bad")
        conn.commit_transaction()
        assert conn.stats()["records_rejected"] == 1
    assert [r["id"] for r in rows(ms)] == [1]
    assert '"field": "id"' in dead.read_text() and "nope,bad" in dead.read_text()


def test_write_batch_arrow_and_pandas(ms: Metastore) -> None:
    with connect(ms, table="alerts") as conn:
        conn.begin_transaction()
        conn.write_batch(
            pa.table({"ID": [1, 2], "msg": ["a", "b"], "continent": ["EU", "EU"], "country": ["FR", "DE"]})
        )
        conn.write_batch(pd.DataFrame({"id": [3], "msg": ["c"], "continent": ["EU"], "country": ["FR"]}))
        with pytest.raises(SerializationError, match="id") as info:
            conn.write_batch(
                pa.table(
                    {"id": [1, 2**40], "msg": ["x", "y"], "continent": ["a", "a"], "country": ["b", "b"]}
                )
            )
        assert info.value.record_index == 4
        conn.commit_transaction()
    got = {(r["id"], r["country"]) for r in rows(ms, "alerts")}
    assert got == {(1, "FR"), (2, "DE"), (3, "FR")}


def test_write_stream_splits_records(ms: Metastore) -> None:
    import io

    with connect(ms) as conn:
        conn.begin_transaction()
        conn.write_stream(io.BytesIO(b"1,a\n2,b\r\n3,c\n"))
        conn.commit_transaction()
    assert [r["msg"] for r in rows(ms)] == ["a", "b", "c"]


def test_unmanaged_mode_joins_a_transaction_owned_elsewhere(ms: Metastore) -> None:
    txn = ms.open_txns(1)[0]
    [(_, wid)] = ms.allocate_table_write_ids([txn], "testing.alerts")
    conn = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("testing")
        .with_table("alerts")
        .with_record_writer(DELIM)
        .with_write_id(wid)
        .with_statement_id(3)
        .connect()
    )
    conn.begin_transaction()
    conn.write(b"1,a,Asia,India")
    conn.commit_transaction()
    assert conn.current_transaction_state() is TxnState.PREPARED_FOR_COMMIT
    with pytest.raises(TransactionError, match="No more transactions available"):
        conn.begin_transaction()
    assert conn.partitions() == ["continent=Asia/country=India"]
    conn.close()
    part = Path(ms.table("testing.alerts").location) / "continent=Asia" / "country=India"
    assert (part / f"delta_{wid:07d}_{wid:07d}_0003").is_dir()
    assert rows(ms, "alerts") == []  # the owner has not committed yet
    for name in conn.partitions():
        ms.add_partition("testing.alerts", [v.split("=")[1] for v in name.split("/")])
    ms.add_dynamic_partitions(txn, wid, "testing.alerts", conn.partitions())
    ms.commit_txn(txn)
    assert [r["id"] for r in rows(ms, "alerts")] == [1]


def test_transaction_context_manager_aborts_on_error(ms: Metastore) -> None:
    with connect(ms, batch=2) as conn:
        with pytest.raises(RuntimeError), conn.transaction():
            conn.write(b"1,a")
            raise RuntimeError("boom")
        assert conn.current_transaction_state() is TxnState.ABORTED
        with conn.transaction():
            conn.write(b"2,b")
    assert [r["id"] for r in rows(ms)] == [2]


def test_heartbeats_keep_a_batch_alive_past_the_timeout(metastore_url: str, warehouse: Path) -> None:
    with Metastore.connect(metastore_url, warehouse=str(warehouse), txn_timeout=2) as m:
        m.execute("CREATE DATABASE testing")
        m.execute(
            "CREATE TABLE testing.flat (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        alive = connect(m, heartbeat_interval=0.3)
        alive.begin_transaction()
        alive.write(b"1,a")
        silent = connect(m, heartbeat_interval=600)
        silent.begin_transaction()
        silent.write(b"2,b")
        time.sleep(3)
        m.perform_timeouts()
        alive.commit_transaction()
        with pytest.raises(TransactionError, match="Aborted transaction cannot be committed"):
            silent.commit_transaction()
        alive.close()
        silent.close()
        assert [r["id"] for r in rows(m)] == [1]


def test_close_from_another_thread_is_safe(ms: Metastore) -> None:
    conn = connect(ms, batch=4)
    conn.begin_transaction()
    conn.write(b"1,a")
    t = threading.Thread(target=conn.close)
    t.start()
    t.join(10)
    assert conn.is_closed
    with pytest.raises(ConnectionError):
        conn.write(b"2,b")
    assert rows(ms) == []


@pytest.mark.slow
def test_two_thousand_dynamic_partitions_in_one_transaction(ms: Metastore) -> None:
    """Memory stays bounded (auto-flush past the buffer bound) and every partition is registered."""
    n = 2000
    table = pa.table(
        {
            "id": pa.array(range(n * 3), pa.int32()),
            "msg": pa.array(["x" * 50] * (n * 3)),
            "continent": pa.array(["EU"] * (n * 3)),
            "country": pa.array([f"c{i % n:04d}" for i in range(n * 3)]),
        }
    )
    with connect(ms, table="alerts", max_buffered_bytes=256 << 10) as conn:
        conn.begin_transaction()
        conn.write_batch(table)
        conn.commit_transaction()
        assert conn.stats()["auto_flushes"] >= 1
    assert len(ms.list_partitions("testing.alerts")) == n
    got = ms.table("testing.alerts").scan(columns=["id", "country"]).to_arrow()
    assert sorted(got.column("id").to_pylist()) == list(range(n * 3))


def test_a_forked_child_streams_with_its_own_io_pool(ms: Metastore) -> None:
    """Files of a commit are flushed by a thread pool; a fork must not inherit a pool without threads."""
    import os

    with connect(ms, table="alerts", static=["EU", "FR"]) as conn:  # 5 buckets: the pool is used
        conn.begin_transaction()
        for i in range(50):
            conn.write(f"{i},parent".encode())
        conn.commit_transaction()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child: report through the exit status
        code = 1
        try:
            with connect(ms, table="alerts", static=["EU", "DE"]) as child:
                child.begin_transaction()
                for i in range(50, 100):
                    child.write(f"{i},child".encode())
                child.commit_transaction()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert sorted(r["id"] for r in rows(ms, "alerts")) == list(range(100))


def test_bulk_calls_shorten_the_switch_interval_against_the_gil_convoy(
    ms: Metastore, monkeypatch: pytest.MonkeyPatch, tuned: None
) -> None:
    """Beside a busy Python thread each GIL-releasing call of a commit could wait 5 ms for the GIL back."""
    seen: list[float] = []
    real_commit = ms.commit_txn

    def observed_commit(*args: object, **kwargs: object) -> object:
        seen.append(sys.getswitchinterval())
        return real_commit(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ms, "commit_txn", observed_commit)
    before = sys.getswitchinterval()
    for config, expected in (({}, DEFAULT_SWITCH_INTERVAL), ({"gil_switch_interval": None}, before)):
        with connect(ms, **config) as conn, conn.transaction():
            conn.write(b"1,a")
        assert seen.pop() == pytest.approx(expected)
        assert sys.getswitchinterval() == before
    assert [r["id"] for r in rows(ms)] == [1, 1]
    for bad in ("-1", "soon"):
        with pytest.raises(ConnectionError, match="gil_switch_interval"):
            connect(ms, gil_switch_interval=bad)
