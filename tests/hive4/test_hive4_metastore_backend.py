"""acidstream's transactions against a real Hive 4 metastore (``HiveMetastoreClient``): Hive's txn calls round
trip, Hive decides write conflicts, an unreachable or lost metastore is reported as such, and Hive's own reader
reads exactly the rows our client committed, at the snapshot our client takes."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.acid.writeids import ValidTxnList
from acidstream.errors import (
    InvalidObjectException,
    LockTimeoutException,
    MetastoreUnavailable,
    TransactionError,
    WriteConflictException,
)
from acidstream.metastore.hive import HiveMetastoreClient
from acidstream.metastore.hive.snapshots import read_txn_list_string
from acidstream.metastore.hive.transport import SaslRequired, ThriftConnection
from acidstream.metastore.models import (
    LockComponent,
    LockLevel,
    LockState,
    LockType,
    OperationType,
    TableWrite,
    TxnStatus,
)
from acidstream.storage import table_filesystem
from hive4.referee import Referee
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

hms = import_or_skip("hive_metastore.ttypes", reason="the hive extra (pyiceberg[hive]) is not installed")

COLUMNS = [("id", "int"), ("msg", "string")]


def create_table(
    uri: str, partition_keys: Sequence[str] = (), properties: dict[str, str] | None = None
) -> str:
    """A table created through the metastore's thrift ``create_table`` (full-ACID ORC unless ``properties``
    say otherwise); its ``db.name``."""
    name = f"t{uuid.uuid4().hex[:12]}"  # unique however many times this module is imported (other tests do)
    raw = ThriftConnection(uri)
    try:
        raw.call(
            "create_database",
            lambda c: c.create_database(hms.Database(name="hms", parameters={})),
            idempotent=False,
        )
    except Exception as exc:  # created by an earlier test
        assert "already exists" in str(exc).lower(), exc
    sd = hms.StorageDescriptor(
        cols=[hms.FieldSchema(c, t, None) for c, t in COLUMNS],
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        serdeInfo=hms.SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde", parameters={}),
        numBuckets=-1,
        bucketCols=[],
        sortCols=[],
        parameters={},
    )
    table = hms.Table(
        tableName=name,
        dbName="hms",
        owner="acidstream",
        tableType="MANAGED_TABLE",
        sd=sd,
        partitionKeys=[hms.FieldSchema(k, "string", None) for k in partition_keys],
        parameters={"transactional": "true", "transactional_properties": "default", **(properties or {})},
    )
    raw.call("create_table", lambda c: c.create_table(table), idempotent=False)
    raw.close()
    return f"hms.{name}"


@pytest.fixture
def client(hive4_metastore: str) -> Iterator[HiveMetastoreClient]:
    with HiveMetastoreClient(hive4_metastore, lock_wait_timeout=2) as c:
        yield c


def hive_snapshot(hive4: Referee, uri: str, table: str) -> tuple[str, str]:
    """The strings Hive's own ``HiveMetaStoreClient`` hands a query: ``ValidTxnList``, ``ValidWriteIdList``."""
    db, name = table.split(".")
    answer = hive4.metastore(uri, "snapshot", db=db, table=name)
    return answer["txns"], answer["writeids"]


def insert_lock(table: str, partition: str | None = None) -> LockComponent:
    db, name = table.split(".")
    level = LockLevel.PARTITION if partition else LockLevel.TABLE
    return LockComponent(LockType.SHARED_READ, level, db, name, partition, OperationType.INSERT)


def test_txn_calls_round_trip(hive4: Referee, hive4_metastore: str, client: HiveMetastoreClient) -> None:
    table = create_table(hive4_metastore)
    definition = client.get_table(table)
    assert [(c.name, str(c.type)) for c in definition.columns] == COLUMNS
    assert definition.is_transactional and definition.location.startswith("file:///")
    assert client.txn_timeout == 60  # the metastore's metastore.txn.timeout (scripts/hive.sh sets it)

    pairs = client.open_txns_with_write_ids(10, table, agent_info="acidstream-test")
    txns, write_ids = [t for t, _ in pairs], [w for _, w in pairs]
    assert txns == list(range(txns[0], txns[0] + 10))
    assert write_ids == list(range(1, 11))  # a new table's first write ids
    lock = client.lock([insert_lock(table)], txn_id=txns[0], agent_info="acidstream-test")
    assert lock.state is LockState.ACQUIRED
    assert client.heartbeat_txn_range(txns[0], txns[-1]).aborted == []

    client.commit_txn(txns[0])
    client.abort_txns([txns[1]])
    assert [client.get_txn_state(t) for t in txns[:3]] == [
        TxnStatus.COMMITTED,
        TxnStatus.ABORTED,
        TxnStatus.OPEN,
    ]
    beat = client.heartbeat_txn_range(txns[0], txns[-1])
    assert beat.aborted == [txns[1]] and beat.nosuch == [txns[0]]  # a committed txn is gone from TXNS

    ours_txns, ours_ids = client.snapshot(), client.get_valid_write_ids(table)
    assert ours_txns.is_txn_valid(txns[0]) and not ours_txns.is_txn_valid(txns[1])
    assert ours_ids.is_write_id_valid(1) and ours_ids.is_write_id_aborted(2)
    assert ours_ids.open_ids == tuple(range(3, 11))
    # exactly the strings Hive's own client builds for its readers (runs of open txns as first-last)
    hive_txns, hive_ids = hive_snapshot(hive4, hive4_metastore, table)
    open_txns = client.connection.call("get_open_txns", lambda c: c.get_open_txns(), idempotent=True)
    assert read_txn_list_string(open_txns) == hive_txns  # other tests' txns of the session's metastore too
    assert f"{txns[2]}-{txns[-1]}" in hive_txns  # our eight open txns as one run, as Hive writes it
    assert ValidTxnList.parse(hive_txns) == ours_txns
    assert str(ours_ids) == hive_ids
    assert str(client.get_valid_write_ids(table, snapshot=ours_txns)) == str(ours_ids)
    client.abort_txns(txns[2:])
    assert client.get_txn_state(txns[0] + 10_000) is TxnStatus.UNKNOWN


def test_a_table_that_is_not_full_acid_is_refused_naming_it(
    hive4_metastore: str, client: HiveMetastoreClient
) -> None:
    table = create_table(hive4_metastore, properties={"transactional": "false"})
    with pytest.raises(InvalidObjectException, match=f"{table} is not a full-ACID table"):
        client.get_table(table)
    table = create_table(hive4_metastore, properties={"transactional_properties": "insert_only"})
    with pytest.raises(InvalidObjectException, match=f"{table} is not a full-ACID table"):
        client.get_table(table)


def test_a_commit_stores_its_key_value_in_the_table_parameter(
    hive4_metastore: str, client: HiveMetastoreClient
) -> None:
    """As Hive does (exactly-once sinks): the parameter must exist; the commit updates it atomically."""
    table = create_table(hive4_metastore, properties={"_meta.offset": "0"})
    [(txn, _)] = client.open_txns_with_write_ids(1, table)
    client.commit_txn(txn, key="_meta.offset", value="42")
    assert client.get_table(table).properties["_meta.offset"] == "42"
    [(txn, _)] = client.open_txns_with_write_ids(1, table)
    with pytest.raises(InvalidObjectException, match=r"has no '_meta\.other'"):
        client.commit_txn(txn, key="_meta.other", value="1")
    assert client.get_txn_state(txn) is TxnStatus.OPEN  # refused before the metastore saw it
    client.abort_txns([txn])


def test_a_waiting_lock_is_polled_until_granted_or_timed_out(
    hive4_metastore: str, client: HiveMetastoreClient
) -> None:
    table = create_table(hive4_metastore)
    db, name = table.split(".")
    exclusive = LockComponent(LockType.EXCLUSIVE, LockLevel.TABLE, db, name, None, OperationType.UPDATE)
    (holder, _), (waiter, _), (late, _) = client.open_txns_with_write_ids(3, table)
    assert client.lock([exclusive], txn_id=holder).state is LockState.ACQUIRED
    with pytest.raises(LockTimeoutException, match=r"not acquired within 0\.5s"):
        client.lock([insert_lock(table)], txn_id=late, timeout=0.5)
    threading.Timer(0.5, client.commit_txn, args=(holder,)).start()
    assert client.lock([insert_lock(table)], txn_id=waiter, timeout=10).state is LockState.ACQUIRED
    client.abort_txns([waiter, late])


def test_second_committer_of_an_update_gets_a_write_conflict(
    hive4_metastore: str, client: HiveMetastoreClient
) -> None:
    table = create_table(hive4_metastore, partition_keys=["part"])
    db, name = table.split(".")
    update = LockComponent(
        LockType.SHARED_WRITE, LockLevel.PARTITION, db, name, "part=a", OperationType.UPDATE
    )
    (first, _), (second, _) = client.open_txns_with_write_ids(2, table)
    for txn in (first, second):  # shared writes: both granted, the metastore decides at commit
        assert client.lock([update], txn_id=txn).state is LockState.ACQUIRED
    client.commit_txn(first)
    with pytest.raises(WriteConflictException, match="write conflict"):
        client.commit_txn(second)
    assert client.get_txn_state(second) is TxnStatus.ABORTED


def test_an_unreachable_metastore_is_unavailable_naming_its_url() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"thrift://127.0.0.1:{s.getsockname()[1]}"
    started = time.monotonic()
    with (
        HiveMetastoreClient(url, connect_timeout=60) as c,
        pytest.raises(MetastoreUnavailable, match=url) as err,
    ):
        c.snapshot()
    # a refused connection is not waited for until the connect timeout (it fails in well under 1 s)
    assert err.value.retryable and time.monotonic() - started < 30


class Proxy:
    """A TCP relay to the metastore that can drop the connection after the next request reached it, before
    its answer reaches the client: a commit whose answer is lost."""

    def __init__(self, uri: str) -> None:
        host, port = uri.removeprefix("thrift://").split(":")
        self.target = (host, int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"thrift://127.0.0.1:{self.server.getsockname()[1]}"
        self.drop_next_answer = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        with conn, socket.create_connection(self.target) as upstream:
            while data := conn.recv(65536):
                drop = self.drop_next_answer.is_set()
                upstream.sendall(data)
                answer = upstream.recv(65536)
                if drop:
                    self.drop_next_answer.clear()
                    return  # the metastore answered; the client never hears it
                conn.sendall(answer)

    def close(self) -> None:
        self.server.close()


def test_a_commit_whose_answer_was_lost_is_settled_by_the_txn_state(hive4_metastore: str) -> None:
    table = create_table(hive4_metastore)
    proxy = Proxy(hive4_metastore)
    try:
        with (
            HiveMetastoreClient(proxy.url, socket_timeout=20) as c,
            HiveMetastoreClient(hive4_metastore) as other,
        ):
            committed, aborted = (t for t, _ in c.open_txns_with_write_ids(2, table))
            proxy.drop_next_answer.set()
            c.commit_txn(committed)  # the answer was lost: the metastore says committed
            assert other.get_txn_state(committed) is TxnStatus.COMMITTED
            other.abort_txns([aborted])
            proxy.drop_next_answer.set()
            with pytest.raises(TransactionError, match=f"txnid:{aborted}.*aborted"):
                c.commit_txn(aborted)
    finally:
        proxy.close()


def test_a_sasl_metastore_asks_for_kerberos_settings() -> None:
    """A SASL (Kerberos) metastore reads a plain thrift call as a SASL frame with a bad status, answers a SASL
    ERROR frame and closes the connection (``TSaslTransport.sendAndThrowMessage``)."""
    server = socket.create_server(("127.0.0.1", 0))

    def sasl_server() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(5)  # status byte and payload length
            message = b"Invalid status -128"
            conn.sendall(bytes([4]) + len(message).to_bytes(4, "big") + message)  # NegotiationStatus.ERROR

    threading.Thread(target=sasl_server, daemon=True).start()
    url = f"thrift://127.0.0.1:{server.getsockname()[1]}"
    try:
        with (
            HiveMetastoreClient(url, socket_timeout=10) as c,
            pytest.raises(SaslRequired, match=r"requires SASL/Kerberos.*connect with Kerberos settings"),
        ):
            c.snapshot()
    finally:
        server.close()


def write_rows(table: Any, write_id: int, rows: Sequence[tuple[int, str]]) -> None:
    """One txn's rows as acidstream's streaming writer writes them for a txn owned elsewhere (unmanaged mode:
    a table definition and a write id, no metastore)."""
    with (
        StreamingConnection.builder()
        .with_table_object(table)
        .with_write_id(write_id)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    ) as conn:
        conn.begin_transaction()
        for i, msg in rows:
            conn.write(f"{i},{msg}".encode())
        conn.commit_transaction()


def test_hive_reads_what_our_client_committed(
    hive4: Referee, hive4_metastore: str, client: HiveMetastoreClient
) -> None:
    table = create_table(hive4_metastore)
    definition = client.get_table(table)
    location = table_filesystem(definition.location)[1]
    (kept, kept_wid), (lost, lost_wid) = client.open_txns_with_write_ids(2, table)
    for txn in (kept, lost):
        assert client.lock([insert_lock(table)], txn_id=txn).state is LockState.ACQUIRED
    write_rows(definition, kept_wid, [(1, "one"), (2, "two")])
    write_rows(definition, lost_wid, [(3, "three")])
    files = [f"{location}/delta_{kept_wid:07d}_{kept_wid:07d}/bucket_00000"]
    client.commit_txn(kept, writes=[TableWrite(table, kept_wid, files={None: files})])
    client.abort_txns([lost])

    txns = client.snapshot()
    write_ids = client.get_valid_write_ids(table, snapshot=txns)
    rows = hive4.read(location, COLUMNS, write_ids, txns)
    assert [row for _, row in rows] == [(1, "one"), (2, "two")]
    assert {rid[0] for rid, _ in rows} == {kept_wid}


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "dynamic-partitions"])
def test_a_streaming_connection_runs_on_the_hive_metastore(
    hive4: Referee, hive4_metastore: str, client: HiveMetastoreClient, partitioned: bool
) -> None:
    """Managed streaming (batches, locks, heartbeats, partitions, commit, abort) with the Hive client as its
    metastore."""
    table = create_table(hive4_metastore, partition_keys=["part"] if partitioned else [])
    db, name = table.split(".")
    with (
        StreamingConnection.builder()
        .with_metastore(client)  # type: ignore[arg-type]
        .with_database(db)
        .with_table(name)
        .with_transaction_batch_size(3)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    ) as conn:
        for n in range(3):
            conn.begin_transaction()
            for i in (n, n + 10):
                conn.write(f"{i},m{i},p{i // 10}".encode() if partitioned else f"{i},m{i}".encode())
            if n == 1:
                conn.abort_transaction()
            else:
                conn.commit_transaction()
    txns = client.snapshot()
    write_ids = client.get_valid_write_ids(table, snapshot=txns)
    location = table_filesystem(client.get_table(table).location)[1]
    dirs = [f"{location}/part=p0", f"{location}/part=p1"] if partitioned else [location]
    rows = sorted(row for d in dirs for _, row in hive4.read(d, COLUMNS, write_ids, txns))
    assert rows == [(0, "m0"), (2, "m2"), (10, "m10"), (12, "m12")]
    hive_txns, hive_ids = hive_snapshot(hive4, hive4_metastore, table)
    assert (txns, str(client.get_valid_write_ids(table))) == (ValidTxnList.parse(hive_txns), hive_ids)


def test_threads_calling_at_once_each_get_a_socket(hive4_metastore: str) -> None:
    """A call in one thread does not wait for another's: each runs on a socket of its own, and the sockets are
    reused afterwards (at most IDLE_SOCKETS stay open)."""
    from acidstream.metastore.hive import transport

    connection = ThriftConnection(hive4_metastore)
    inside = threading.Barrier(3, timeout=30)

    def call() -> list[str]:
        def both_inside(client: Any) -> list[str]:
            inside.wait()  # all three calls are in flight at once: three sockets
            return list(client.get_all_databases())

        return connection.call("get_all_databases", both_inside, idempotent=True)

    try:
        threads = [threading.Thread(target=call) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not inside.broken
        assert len(connection._idle) == 3
        assert "default" in connection.call(
            "get_all_databases", lambda c: c.get_all_databases(), idempotent=True
        )
        assert len(connection._idle) == 3  # reused, not a fourth
        assert transport.IDLE_SOCKETS >= 3
    finally:
        connection.close()
    assert connection._idle == []
