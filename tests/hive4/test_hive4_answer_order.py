"""A Hive 4 metastore's answers, reordered or lost on the way (a relay between our client and the session's
metastore): ``open_txns`` answering its ids out of order, as Hive at times does ([49, 50, 51, 52, 48]), still
makes a batch of consecutive write ids that Hive's reader reads; a lost ``find_next_compact2`` answer does not
leave the request it claimed working for nobody."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator

import pyarrow.fs as pafs
import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.compactor.worker import Worker
from acidstream.storage import table_filesystem
from hive4.referee import Referee
from support.deps import import_or_skip
from support.dropproxy import DropProxy

pytestmark = pytest.mark.hive4

import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")

COLUMNS = [("id", "int"), ("msg", "string")]


def create(ms: Metastore) -> str:
    table = f"t{uuid.uuid4().hex[:12]}"
    ms.execute(
        f"CREATE TABLE {table} (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    return table


def connection(ms: Metastore, table: str, batch: int) -> StreamingConnection:
    return (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("default")
        .with_table(table)
        .with_transaction_batch_size(batch)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    )


def rows(ms: Metastore, table: str) -> list[tuple[int, str]]:
    scanned = ms.table(table).scan().to_arrow()
    return sorted(zip(scanned["id"].to_pylist(), scanned["msg"].to_pylist(), strict=True))


class ReorderingProxy:
    """A relay to the metastore that hands the client ``open_txns``'s ids rotated by one (``[49, 50, 51, 52,
    48]``), as Hive at times answers them."""

    CALL = b"\x00\x00\x00\x09open_txns"  # the method name as the call's message header carries it
    IDS = b"\x0f\x00\x01\x0a"  # OpenTxnsResponse's field 1: a list of i64

    def __init__(self, uri: str) -> None:
        host, port = uri.removeprefix("thrift://").split(":")
        self.target = (host, int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"thrift://127.0.0.1:{self.server.getsockname()[1]}"
        self.reordered: list[list[int]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            asked = threading.Event()
            threading.Thread(target=self._up, args=(client, upstream, asked), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client, asked), daemon=True).start()

    def _up(self, client: socket.socket, upstream: socket.socket, asked: threading.Event) -> None:
        with client, upstream:
            while data := _recv(client):
                if data[4:17] == self.CALL:
                    asked.set()
                upstream.sendall(data)

    def _down(self, upstream: socket.socket, client: socket.socket, asked: threading.Event) -> None:
        while data := _recv(upstream):
            if asked.is_set() and (at := data.find(self.IDS)) >= 0:
                asked.clear()
                count = int.from_bytes(data[at + 4 : at + 8], "big")
                ids = data[at + 8 : at + 8 + 8 * count]
                rotated = ids[8:] + ids[:8]
                self.reordered.append(
                    [int.from_bytes(rotated[i : i + 8], "big") for i in range(0, len(ids), 8)]
                )
                data = data[: at + 8] + rotated + data[at + 8 + 8 * count :]
            try:
                client.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.server.close()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def test_txn_ids_answered_out_of_order_make_a_well_named_batch(hive4: Referee, hive4_metastore: str) -> None:
    proxy = ReorderingProxy(hive4_metastore)
    try:
        with Metastore.connect(proxy.url) as ms:
            table = create(ms)
            with connection(ms, table, batch=5) as conn:
                for i in range(5):
                    conn.begin_transaction()
                    conn.write(f"{i},a{i}".encode())
                    conn.write(f"{i + 5},b{i}".encode())
                    conn.commit_transaction()
            answered = proxy.reordered[0]
            ids = sorted(answered)
            assert answered == [*ids[1:], ids[0]] and ids == list(range(ids[0], ids[0] + 5))  # lowest last
            location = ms.table(table).location
            fs, path = table_filesystem(location)
            deltas = [
                i.base_name
                for i in fs.get_file_info(pafs.FileSelector(path))
                if i.base_name.startswith("delta_")
            ]
            [(low, high)] = [tuple(int(n) for n in d.split("_")[1:3]) for d in deltas]
            assert high - low == 4, deltas
            expected = sorted([(i, f"a{i}") for i in range(5)] + [(i + 5, f"b{i}") for i in range(5)])
            assert rows(ms, table) == expected
            txns = ms.snapshot()
            write_ids = ms.get_valid_write_ids(f"default.{table}", snapshot=txns)
            assert sorted(tuple(row) for _, row in hive4.read(path, COLUMNS, write_ids, txns)) == expected
    finally:
        proxy.close()


@pytest.fixture
def drop(hive4_metastore: str) -> Iterator[DropProxy]:
    host, port = hive4_metastore.removeprefix("thrift://").split(":")
    proxy = DropProxy((host, int(port)))
    yield proxy
    proxy.close()


def test_a_lost_claim_answer_is_recovered_by_the_worker_id(drop: DropProxy) -> None:
    with Metastore.connect(f"thrift://127.0.0.1:{drop.port}") as ms:
        table = create(ms)
        with connection(ms, table, batch=1) as conn:
            for i in range(2):
                conn.begin_transaction()
                conn.write(f"{i},m{i}".encode())
                conn.commit_transaction()
        request = ms.compact(f"default.{table}")
        drop.lose_answer_to(b"find_next_compact2")
        outcome = Worker(ms).run_next(request)  # Hive claimed it for this worker; the answer never came
        assert drop.dropped == 1 and outcome is not None and outcome.info.id == request
        assert ms.get_compaction(request).state in ("ready for cleaning", "succeeded")
        assert rows(ms, table) == [(0, "m0"), (1, "m1")]
