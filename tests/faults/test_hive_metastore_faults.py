"""A Hive Metastore that fails for real: a port that accepts and never answers, servers that are no metastore
(HTTP, PostgreSQL), a closed port, a bad host name, and a metastore of this module's own killed (SIGKILL) at
``commit_txn`` after acting on it, then restarted on its port with its database.

What holds: every thrift call is bounded; a server that is no metastore is named as such, not as a SASL one; an
unreachable metastore is one line from acidstream, nothing from thrift's logger; and a commit whose answer was
lost is never reported retryable: it is settled once the metastore answers again, and where it cannot be, the
error says its outcome is unknown and names the txn.
"""

from __future__ import annotations

import http.server
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.compactor.worker import Worker
from acidstream.errors import CommitOutcomeUnknown, MetastoreUnavailable, MetastoreUrlError
from acidstream.metastore.models import TxnStatus
from hive4.referee import BRISK_HOUSEKEEPING, hive_sh
from hive4.referee import start_brisk_metastore as start
from support.deps import import_or_skip
from support.dropproxy import DropProxy

import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- servers that are no metastore, or none at all ----------------------------------------------------------


@pytest.mark.timeout(120)  # the socket timeout (600 s) would be met without a bound of the connect's own
def test_a_port_that_accepts_and_never_answers_fails_the_connect_within_its_timeout() -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # the kernel accepts; nobody ever reads or answers
    url = f"thrift://127.0.0.1:{silent.getsockname()[1]}"
    try:
        with pytest.raises(MetastoreUnavailable, match=f"{url} did not answer getVersion within 2s"):
            Metastore.connect(url, connect_timeout=2)
    finally:
        silent.close()


@pytest.fixture
def http_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_an_http_port_is_no_metastore_not_a_sasl_one(http_port: int) -> None:
    url = f"thrift://127.0.0.1:{http_port}"
    with pytest.raises(
        MetastoreUrlError, match=f"the server at {url} did not answer .* as a Hive Metastore"
    ) as e:
        Metastore.connect(url, connect_timeout=5)
    assert "SASL" not in str(e.value)


@pytest.mark.postgres
def test_a_postgresql_port_is_no_metastore_not_a_sasl_one() -> None:
    pg = os.environ.get("ACIDSTREAM_TEST_PG_URL")
    if not pg:
        pytest.skip("ACIDSTREAM_TEST_PG_URL is not set")
    parsed = make_url(pg)
    url = f"thrift://{parsed.host or '127.0.0.1'}:{parsed.port or 5432}"
    # it closes the connection unanswered, as a proxy whose metastore is down does: retryable, saying either
    with pytest.raises(
        MetastoreUnavailable, match=r"as a Hive Metastore .*closed the connection without"
    ) as e:
        Metastore.connect(url, connect_timeout=5)
    # it may be a kerberized metastore (Hive 4 closes a plain call the same way), so the message offers that,
    # but never says SASL is required
    assert url in str(e.value) and "requires SASL" not in str(e.value)


def test_an_unreachable_metastore_logs_nothing_through_thrift(caplog: pytest.LogCaptureFixture) -> None:
    url = f"thrift://127.0.0.1:{closed_port()}"
    with caplog.at_level(logging.DEBUG), pytest.raises(MetastoreUnavailable, match=url):
        Metastore.connect(url, connect_timeout=2)
    assert [r for r in caplog.records if r.name.startswith("thrift")] == []


@pytest.mark.parametrize(
    ("url", "code", "error"),
    [
        (f"thrift://127.0.0.1:{closed_port()}", 4, "MetastoreUnreachable"),
        ("thrift://a..b:9083", 2, "MetastoreUrlError"),  # refused by the resolver's rules: no query is made
    ],
    ids=["closed-port", "bad-host-name"],
)
def test_the_cli_says_one_line_of_its_own_for_an_unreachable_metastore(
    url: str, code: int, error: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "acidstream.cli", "show", "txns", "--metastore", url],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == code, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("waiting for the metastore")]
    assert lines[0].startswith(f"error: {error}: ") and url in lines[0], done.stderr
    assert all(line.startswith("  ") for line in lines[1:]), done.stderr  # acidstream's notes, nothing else


# --- a metastore of this module's own, killed at a chosen call -------------------------------------------------

COLUMNS = [("id", "int"), ("msg", "string")]
#: How often the module's metastore runs its housekeeping (times out txns), in seconds
HOUSEKEEPER_INTERVAL = float(BRISK_HOUSEKEEPING["ACIDSTREAM_HIVE_HOUSEKEEPER_INTERVAL"].removesuffix("s"))


def kill(state: Path) -> None:
    os.kill(int((state / "pid").read_text()), signal.SIGKILL)
    (state / "pid").unlink()


@pytest.fixture(scope="module")
def own(hive4_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The state directory of a metastore started for this module (the session's is shared)."""
    state = tmp_path_factory.mktemp("hms-faults")
    start(state)
    yield state
    hive_sh("stop", str(state))


@pytest.fixture
def proxy(own: Path) -> Iterator[DropProxy]:
    p = DropProxy(("127.0.0.1", int((own / "port").read_text())), settle=1.0)
    yield p
    p.close()


class Restarter:
    """Kills the metastore once the proxy forwarded the armed call to it; restarts it after ``after`` s."""

    def __init__(self, state: Path, after: float | None) -> None:
        self.state, self.after = state, after
        self.thread: threading.Thread | None = None

    def __call__(self) -> None:
        kill(self.state)
        if self.after is not None:
            self.thread = threading.Thread(target=self._restart, daemon=True)
            self.thread.start()

    def _restart(self) -> None:
        time.sleep(self.after or 0)
        start(self.state)

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()


def connection(ms: Metastore, table: str, batch: int = 1) -> StreamingConnection:
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


def create(ms: Metastore, table: str) -> None:
    ms.execute(
        f"CREATE TABLE {table} (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )


def test_a_commit_answer_lost_to_a_killed_metastore_is_settled_once_it_is_back(
    own: Path, proxy: DropProxy
) -> None:
    with Metastore.connect(f"thrift://127.0.0.1:{proxy.port}", connect_timeout=2) as ms:
        create(ms, "lost_commit")
        conn = connection(ms, "lost_commit")
        conn.begin_transaction()
        for i in range(10):
            conn.write(f"{i},m{i}".encode())
        txn = conn.current_transaction_id()
        restarter = Restarter(own, after=2)
        proxy.lose_answer_to(b"commit_txn", then=restarter)
        conn.commit_transaction()  # the metastore acted, died, and came back: committed, once
        restarter.join()
        assert proxy.dropped == 1
        conn.close()
        assert txn is not None and ms.get_txn_state(txn) is TxnStatus.COMMITTED
        assert rows(ms, "lost_commit") == [(i, f"m{i}") for i in range(10)]


def test_a_commit_answer_never_settled_is_an_unknown_outcome_naming_the_txn(
    own: Path, proxy: DropProxy
) -> None:
    with Metastore.connect(f"thrift://127.0.0.1:{proxy.port}", connect_timeout=2, settle_timeout=3) as ms:
        create(ms, "unknown_commit")
        conn = connection(ms, "unknown_commit")
        conn.begin_transaction()
        for i in range(10):
            conn.write(f"{i},m{i}".encode())
        txn = conn.current_transaction_id()
        proxy.lose_answer_to(b"commit_txn", then=Restarter(own, after=None))
        with pytest.raises(CommitOutcomeUnknown) as unknown:
            conn.commit_transaction()
        assert not unknown.value.retryable and unknown.value.txn_id == txn
        assert f"txnid:{txn}" in str(unknown.value) and "show txns" in str(unknown.value)
        start(own)
        conn.close()
        # it had committed: re-sending its records on a retryable error would have written them twice
        assert txn is not None and ms.get_txn_state(txn) is TxnStatus.COMMITTED
        assert rows(ms, "unknown_commit") == [(i, f"m{i}") for i in range(10)]


def test_a_compaction_whose_recording_meets_a_killed_metastore_does_not_stay_working(
    own: Path, proxy: DropProxy
) -> None:
    with Metastore.connect(f"thrift://127.0.0.1:{proxy.port}", connect_timeout=2) as ms:
        create(ms, "recorded")
        with connection(ms, "recorded") as conn:
            for i in range(3):
                conn.begin_transaction()
                conn.write(f"{i},m{i}".encode())
                conn.commit_transaction()
        request = ms.compact("default.recorded")
        restarter = Restarter(own, after=2)
        proxy.lose_answer_to(b"update_compactor_state", then=restarter)
        outcome = Worker(ms).run_next(request)
        restarter.join()
        assert proxy.dropped == 1 and outcome is not None
        info = ms.get_compaction(request)
        # done (the recording was repeated once the metastore answered), or given back as failed (Hive's
        # housekeeping aborted the compactor txn while the metastore was down): never left working
        assert info.state in ("ready for cleaning", "succeeded", "failed"), info
        assert [t for t in ms.show_txns() if t.state is TxnStatus.OPEN] == []
        assert rows(ms, "recorded") == [(i, f"m{i}") for i in range(3)]


def test_a_claim_whose_txn_meets_a_killed_metastore_is_given_back(own: Path, proxy: DropProxy) -> None:
    with Metastore.connect(f"thrift://127.0.0.1:{proxy.port}", connect_timeout=2) as ms:
        create(ms, "given_back")
        with connection(ms, "given_back") as conn:
            conn.begin_transaction()
            conn.write(b"1,m1")
            conn.commit_transaction()
        request = ms.compact("default.given_back")
        restarter = Restarter(own, after=2)
        proxy.lose_answer_to(b"\x00\x00\x00\x09open_txns", then=restarter)  # the compactor txn's open
        with pytest.raises(MetastoreUnavailable):
            Worker(ms).run_next(request)
        restarter.join()
        info = ms.get_compaction(request)
        assert info.state == "failed" and "lost the Hive Metastore" in (info.error_message or ""), info


def test_an_aborted_txn_the_cleaner_deleted_is_never_taken_for_committed(own: Path) -> None:
    with Metastore.connect(start(own)) as ms:
        aborted, later = ms.open_txns(2)
        ms.abort_txn(aborted)
        ms.commit_txn(later)  # Hive's cleaner keeps the highest txn id
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # until Hive's txn cleaner deleted it
            try:
                if not any(t.txn_id == aborted for t in ms.show_txns()):
                    break
            except MetastoreUnavailable:  # retryable: a call the metastore dropped is asked again
                pass
            time.sleep(1)
        assert ms.get_txn_state(aborted) is TxnStatus.UNKNOWN


@pytest.mark.slow
def test_the_house_keeper_aborts_a_silent_txn_and_heartbeats_keep_a_live_one(own: Path) -> None:
    with Metastore.connect(start(own)) as ms:
        assert ms.txn_timeout == 20
        create(ms, "kept")
        (silent,) = ms.open_txns(1)  # a client that died: never heartbeated
        conn = connection(ms, "kept")
        conn.begin_transaction()
        # past here, the live batch without heartbeats would have been aborted (five housekeeping rounds late)
        kept_until = time.monotonic() + ms.txn_timeout + 5 * HOUSEKEEPER_INTERVAL
        conn.write(b"1,kept")
        while ms.get_txn_state(silent) is TxnStatus.OPEN:
            time.sleep(1)
        # aborted, and then deleted by Hive's txn cleaner (it wrote nothing): never taken for committed
        assert ms.get_txn_state(silent) in (TxnStatus.ABORTED, TxnStatus.UNKNOWN)
        time.sleep(max(0.0, kept_until - time.monotonic()))  # the live batch's heartbeats keep it
        conn.commit_transaction()
        conn.close()
        assert rows(ms, "kept") == [(1, "kept")]
