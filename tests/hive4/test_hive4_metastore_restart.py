"""A Hive 4 metastore killed (SIGKILL) and restarted under acidstream's streaming clients: a metastore of this
test's own (the session's is shared), restarted on its port with its database.

While it is down, heartbeats fail and are retried, so an open batch outlives the outage; a commit that meets the
outage fails with a retryable error and nothing of it is committed; once the metastore is back the batch goes on,
a new connection re-sends what failed, and Hive 4's reader and ours see every committed record exactly once.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.errors import AcidStreamError, MetastoreUnavailable
from acidstream.metastore.models import TxnStatus
from acidstream.storage import table_filesystem
from hive4.referee import Referee, hive_sh
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

COLUMNS = [("id", "int"), ("msg", "string")]


@pytest.fixture
def own_metastore(hive4_home: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A metastore started for this test: its URI and state directory."""
    state = tmp_path / "hms"
    uri = hive_sh("start", str(state))
    yield uri, state
    hive_sh("stop", str(state))


def kill(state: Path) -> None:
    os.kill(int((state / "pid").read_text()), signal.SIGKILL)
    (state / "pid").unlink()


def connection(ms: Metastore, table: str) -> StreamingConnection:
    return (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("default")
        .with_table(table)
        .with_transaction_batch_size(10)
        .with_configuration({"heartbeat_interval": 0.5})
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    )


def txn(conn: StreamingConnection, ids: range) -> None:
    conn.begin_transaction()
    for i in ids:
        conn.write(f"{i},m{i}".encode())
    conn.commit_transaction()


@pytest.mark.slow
def test_streaming_survives_a_killed_and_restarted_metastore(
    hive4: Referee, own_metastore: tuple[str, Path]
) -> None:
    import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")
    uri, state = own_metastore
    with Metastore.connect(uri, connect_timeout=2) as ms:
        ms.execute(
            "CREATE TABLE restarted (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        survivor = connection(ms, "restarted")
        txn(survivor, range(0, 10))

        kill(state)  # down while no call is made: only heartbeats meet it
        time.sleep(2)  # several failed heartbeats
        hive_sh("start", str(state))
        txn(survivor, range(10, 20))  # the batch outlived the outage

        doomed = connection(ms, "restarted")
        doomed.begin_transaction()
        for i in range(20, 30):
            doomed.write(f"{i},m{i}".encode())
        failed_txn = doomed.current_transaction_id()
        kill(state)  # down at the commit
        with pytest.raises(AcidStreamError) as failure:
            doomed.commit_transaction()
        assert isinstance(failure.value, MetastoreUnavailable) or failure.value.retryable, failure.value
        hive_sh("start", str(state))
        doomed.close()  # aborts what it left open, now that the metastore answers
        assert failed_txn is not None and ms.get_txn_state(failed_txn) is TxnStatus.ABORTED

        with connection(ms, "restarted") as again:  # the caller re-sends what failed
            txn(again, range(20, 30))
        txn(survivor, range(30, 40))
        survivor.close()

        expected = {(i, f"m{i}") for i in range(40)}
        scanned = ms.table("restarted").scan().to_arrow()
        ours = list(zip(scanned["id"].to_pylist(), scanned["msg"].to_pylist(), strict=True))
        assert sorted(ours) == sorted(expected)  # each exactly once
        txns = ms.snapshot()
        location = table_filesystem(ms.table("restarted").location)[1]
        rows = hive4.read(location, COLUMNS, ms.get_valid_write_ids("default.restarted", snapshot=txns), txns)
        assert sorted(row for _, row in rows) == sorted(expected)
