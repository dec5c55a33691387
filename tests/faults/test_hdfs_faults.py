"""HDFS (Hadoop's MiniDFSCluster, through WebHDFS) under load and under a namenode that never answers.

A store's error answer is never a file's bytes: scans and merges beside a streaming writer and the compactor
see whole committed transactions and never a :class:`CorruptFileError`. A namenode that accepts connections
and never answers fails a request within its timeout, as a retryable :class:`StorageUnavailable` naming it.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from acidstream import Metastore, repl
from acidstream.compactor import Compactor, CompactorConfig
from acidstream.errors import StorageUnavailable
from acidstream.storage import configure_stores, table_filesystem
from support.cutproxy import CutProxy, cut_proxy
from support.hdfscluster import MiniHdfs
from support.streamcheck import Ledger, check_table, create_table, start_writer, stream, visible_seqs

PER_TXN = 100
SECONDS = 40.0  # of scans and merges beside the writer, once it has committed
FIRST_COMMIT = 90.0  # at most, for the writer's first commit to appear on a loaded machine


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port whose kernel accepts connections that nothing ever reads or answers."""
    with socket.create_server(("127.0.0.1", 0), backlog=64) as listener:
        yield listener.getsockname()[1]


@pytest.fixture
def short_timeouts() -> Iterator[None]:
    previous = configure_stores(hdfs={"connect_timeout": 1, "read_timeout": 1})
    yield
    configure_stores(**previous)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_scans_and_merges_beside_a_writer_and_the_compactor_never_see_false_corruption(
    hdfs_namenode: MiniHdfs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer keeps files open across commits (batches of 10, each commit a flush and a side-file append),
    a thread compacts and cleans in a loop, another merges (a DELETE reads every file), another and this thread
    scan: every scan, merge and compaction succeeds, scans see whole transactions, and the table ends as
    the writer's ledger says."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_namenode.conf_dir))
    url = f"sqlite:///{tmp_path / 'm.db'}"
    warehouse = f"{hdfs_namenode.uri}/{uuid.uuid4().hex[:12]}/wh"
    failures: list[BaseException] = []
    stop = threading.Event()

    def loop(step: Callable[[Metastore], object]) -> None:
        with Metastore.connect(url, warehouse=warehouse) as own:
            while not stop.is_set():
                try:
                    step(own)
                except BaseException as exc:  # every failure is the test's to report
                    failures.append(exc)
                    return

    # inputs stay 10 s after a compaction for the readers of this process that do not register (merges)
    config = CompactorConfig(delta_num_threshold=2, retention=10.0)
    with Metastore.connect(url, warehouse=warehouse) as ms:
        create_table(ms, "t")
        writer = start_writer(
            url,
            warehouse,  # type: ignore[arg-type]
            "t",
            batch=10,
            txns=0,
            per_txn=PER_TXN,
            config={"max_buffered_bytes": 1 << 10, "parse_batch_records": 50, "heartbeat_interval": 600},
        )
        assert writer.stdout is not None
        first = writer.stdout.readline()
        assert first.startswith("BEGIN"), writer.communicate(timeout=30)[1]
        threads = [
            threading.Thread(target=loop, args=(lambda own: Compactor(own, config).run_once(),)),
            threading.Thread(target=loop, args=(lambda own: own.execute("DELETE FROM t WHERE id = -1"),)),
            threading.Thread(target=loop, args=(lambda own: visible_seqs(own, "t"),)),
        ]
        for thread in threads:
            thread.start()
        scans, last, started = 0, 0, time.monotonic()
        try:
            while not failures and (
                time.monotonic() < started + SECONDS
                or (last == 0 and time.monotonic() < started + FIRST_COMMIT)
            ):
                seen = visible_seqs(ms, "t")
                torn = {seq: n for seq, n in seen.items() if n != PER_TXN}
                assert not torn, f"scan {scans}: transactions seen in part: {torn}"
                assert sum(seen.values()) >= last, f"scan {scans} saw fewer rows than the one before"
                last = sum(seen.values())
                scans += 1
        finally:
            stop.set()
            for thread in threads:
                thread.join()
            writer.send_signal(signal.SIGKILL)
            out, _ = writer.communicate(timeout=30)
        assert not failures, failures
        assert last > 0 and scans >= 3
        check_table(ms, "t", Ledger().read([first, *out.splitlines()]), PER_TXN)


def test_a_file_replaced_while_it_is_read_fails_the_read_instead_of_returning_less(
    hdfs_namenode: MiniHdfs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader opened a file of 1000 bytes; the file is replaced by one of 10 (a writer's rename, a
    cleaner's delete and a new file) before its bytes are read: the read fails (the ORC reader's
    :class:`StorageUnavailable`, retried by its caller), where returning the 10 bytes would read as a damaged
    file."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_namenode.conf_dir))
    fs, path = table_filesystem(f"{hdfs_namenode.uri}/{uuid.uuid4().hex[:12]}/file")
    with fs.open_output_stream(path) as out:
        out.write(b"x" * 1000)
    reader = fs.open_input_file(path)
    with fs.open_output_stream(path) as out:
        out.write(b"y" * 10)
    with pytest.raises(OSError, match="the file changed while it was read"):
        reader.read()
    assert fs.open_input_file(path).read() == b"y" * 10


def test_a_namenode_that_never_answers_fails_create_table_in_time_naming_it(
    silent_port: int, short_timeouts: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACIDSTREAM_WEBHDFS_PORT", str(silent_port))
    location = f"hdfs://127.0.0.1:{silent_port}/wh"
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=location) as ms:
        with pytest.raises(StorageUnavailable, match=rf"hdfs://127\.0\.0\.1:{silent_port}/wh") as caught:
            create_table(ms, "t")
        assert caught.value.retryable
        assert ms.show_txns() == []


@pytest.fixture
def behind_proxy(hdfs_namenode: MiniHdfs, monkeypatch: pytest.MonkeyPatch) -> Iterator[CutProxy]:
    """The session's namenode reached through a proxy that can vanish (its DataNode directly, as it says)."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_namenode.conf_dir))
    with cut_proxy(f"http://127.0.0.1:{hdfs_namenode.webhdfs_port}") as proxy:
        monkeypatch.setenv("ACIDSTREAM_WEBHDFS_PORT", str(proxy.port))
        yield proxy


def test_the_daemons_report_a_lost_namenode_as_storage_unavailable_and_clean_once_it_answers(
    behind_proxy: CutProxy, hdfs_namenode: MiniHdfs, tmp_path: Path
) -> None:
    """While the namenode is away the initiator and replication raise :class:`StorageUnavailable` (not the
    client's ``ConnectionError``, nor a "file is gone"), and a cleaning waits in "ready for cleaning" instead
    of being marked failed; once the namenode answers, the cleaner removes what the compaction replaced."""
    warehouse = f"{hdfs_namenode.uri}/{uuid.uuid4().hex[:12]}/wh"
    config = CompactorConfig(delta_num_threshold=1, retention=0.0)
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=warehouse, txn_timeout=2.0) as ms:
        create_table(ms, "t")
        stream(ms, "t", range(3), 10, Ledger())
        compactor = Compactor(ms, config)
        assert compactor.compact("t").info.state == "ready for cleaning"
        stream(ms, "t", range(3, 5), 10, Ledger())  # two new deltas: the initiator has a candidate
        fs, path = table_filesystem(ms.table("t").location)
        before = {i.base_name for i in fs.get_file_info(pafs.FileSelector(path))}
        behind_proxy.cut()
        try:
            with pytest.raises(StorageUnavailable, match=str(behind_proxy.port)):
                compactor.run_once()
            assert [c.state for c in compactor.clean()] == ["ready for cleaning"]
            replica_url, replica_warehouse = f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "r"
            with (
                Metastore.connect(replica_url, warehouse=replica_warehouse) as replica,
                pytest.raises(StorageUnavailable, match=str(behind_proxy.port)),
            ):
                repl.sync(ms, replica)
        finally:
            behind_proxy.restore()
        assert [c.state for c in ms.show_compactions()] == ["ready for cleaning"]
        time.sleep(2.0)  # the claim of the cleaning that waited lapses with the txn timeout
        assert [c.state for c in compactor.clean()] == ["succeeded"]
        after = {i.base_name for i in fs.get_file_info(pafs.FileSelector(path))}
        assert len(after) < len(before) and any(n.startswith("base_") for n in after)
        assert visible_seqs(ms, "t") == dict.fromkeys(range(5), 10)


class HangProxy:
    """Forwards loopback connections to ``target`` until a request line matches the armed pattern: from then
    on nothing more is forwarded either way, and new connections are taken and never answered (a namenode
    that hangs)."""

    def __init__(self, target: tuple[str, int], pattern: bytes) -> None:
        self.target, self.pattern = target, pattern
        self.hung = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.hung.is_set():
                continue  # taken, never answered (and kept open by the thread's frame until the test ends)
            server = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, upstream: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if upstream and self.pattern in data:
                    self.hung.set()
                if self.hung.is_set():
                    self.hung.wait()  # forever: the connection stays open, silent
                sink.sendall(data)


@pytest.mark.timeout(300)
def test_a_merge_whose_namenode_hangs_fails_in_time_and_ends_its_txn(
    hdfs_namenode: MiniHdfs, short_timeouts: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The namenode stops answering in the middle of a merge (at its first listing, its txn open): the merge
    fails as StorageUnavailable within the request timeout instead of hanging with its txn kept alive by
    heartbeats, and its txn and locks end, so other writers of the table are not held back."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_namenode.conf_dir))
    warehouse = f"{hdfs_namenode.uri}/{uuid.uuid4().hex[:12]}/wh"
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=warehouse) as ms:
        create_table(ms, "t")
        stream(ms, "t", range(2), 10, Ledger())
        proxy = HangProxy(("127.0.0.1", hdfs_namenode.webhdfs_port), b"op=LISTSTATUS")
        monkeypatch.setenv("ACIDSTREAM_WEBHDFS_PORT", str(proxy.port))
        try:
            with pytest.raises(StorageUnavailable, match=str(proxy.port)):
                ms.execute("DELETE FROM t WHERE id = 1")
            assert proxy.hung.is_set()
        finally:
            proxy.close()
        assert [t.state.name for t in ms.show_txns() if t.state.name == "OPEN"] == []
        monkeypatch.setenv("ACIDSTREAM_WEBHDFS_PORT", str(hdfs_namenode.webhdfs_port))
        ms.execute("DELETE FROM t WHERE id = 1")
        assert visible_seqs(ms, "t") == {0: 9, 1: 10}


def test_reads_after_the_first_go_to_its_datanode_and_back_to_the_namenode_when_it_fails(
    behind_proxy: CutProxy, hdfs_namenode: MiniHdfs
) -> None:
    """A read is the namenode's redirect and the DataNode's bytes; the namenode's redirect serves every read
    after it (of any file) at that DataNode: with the namenode away, a planned file (its length known from a
    listing) still reads whole. When the DataNode it named fails (here: a closed port), the namenode is asked
    for one again and the read succeeds."""
    fs, root = table_filesystem(f"{hdfs_namenode.uri}/{uuid.uuid4().hex[:12]}")
    contents = {f"{root}/f{i}": bytes([65 + i]) * (1000 + i) for i in range(3)}
    for path, data in contents.items():
        with fs.open_output_stream(path) as out:
            out.write(data)
    first, second, third = contents
    handler = fs.handler
    assert handler.read_prefix(first, len(contents[first])) == contents[first]
    behind_proxy.cut()
    try:
        assert handler.read_prefix(second, len(contents[second])) == contents[second]
        with pytest.raises(OSError):  # what has no known length asks the namenode first
            fs.open_input_file(second)
    finally:
        behind_proxy.restore()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        gone = closed.getsockname()[1]
    _, query = handler.client._datanode
    handler.client._datanode = (f"http://127.0.0.1:{gone}/webhdfs/v1", query)
    assert handler.read_prefix(third, len(contents[third])) == contents[third]
    assert handler.client._datanode is not None and str(gone) not in handler.client._datanode[0]
