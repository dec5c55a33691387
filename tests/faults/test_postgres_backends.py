"""PostgreSQL backends terminated under a streaming client (``pg_terminate_backend``).

Inside the commit's DB transaction (a fault point), and at random moments while several batches stream: the
client replaces the lost connection and retries the whole DB transaction, so every commit happens exactly
once (one COMMIT_TXN event, rows visible once) and the table's invariants hold throughout.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from acidstream import Metastore, faults
from support.streamcheck import Ledger, check_table, create_table, stream

POSTGRES = [pytest.param("postgresql", marks=pytest.mark.postgres)]
PER_TXN = 200


@pytest.fixture
def app_url(metastore_url: str) -> Iterator[tuple[str, str, str]]:
    """(metastore URL whose connections carry a unique application_name, that name, a plain server URL)."""
    app = f"acidstream-faults-{uuid.uuid4().hex[:8]}"
    yield f"{metastore_url}&application_name={app}", app, metastore_url.split("?")[0]


def _terminate(server: str, app: str, states: tuple[str, ...]) -> int:
    """Terminate our backends in one of ``states`` and wait until they are gone; how many there were."""
    with psycopg.connect(server, autocommit=True) as c:
        pids = [
            pid
            for (pid,) in c.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND state = ANY(%s)",
                (app, list(states)),
            )
        ]
        for pid in pids:
            c.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(500):
            if not c.execute("SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)).fetchone():
                break
            time.sleep(0.01)
    return len(pids)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("metastore_url", POSTGRES, indirect=True)
def test_backend_terminated_inside_the_commit_is_retried_once_and_commits_once(
    app_url: tuple[str, str, str], warehouse: Path
) -> None:
    url, app, server = app_url
    terminated: list[int] = []

    def terminate_committer(_subject: Any) -> None:
        terminated.append(_terminate(server, app, ("idle in transaction",)))

    with Metastore.connect(url, warehouse=str(warehouse)) as ms:
        create_table(ms, "t")
        start = ms.current_notification_event_id()
        ledger = Ledger()
        with faults.armed("metastore.commit", terminate_committer, times=3):  # the first commit, three times
            stream(ms, "t", range(6), PER_TXN, ledger, batch=3)
        assert terminated == [1, 1, 1]
        assert ledger.committed == set(range(6))
        check_table(ms, "t", ledger, PER_TXN)
        commits = [e.txn_id for e in ms.notifications(start) if e.event_type == "COMMIT_TXN"]
        assert sorted(commits) == sorted(ledger.begun.values())  # each once: the killed attempts rolled back


@pytest.mark.timeout(120)
@pytest.mark.parametrize("metastore_url", POSTGRES, indirect=True)
def test_backends_terminated_at_random_while_batches_stream(
    app_url: tuple[str, str, str], warehouse: Path
) -> None:
    """Terminations land anywhere: opening batches, creating partitions, pipelined inserts of a commit's
    notifications, heartbeats, reads. Every call is retried on a new connection: nothing fails."""
    url, app, server = app_url
    stop = threading.Event()
    kills = [0]

    def killer() -> None:
        while not stop.is_set():
            kills[0] += _terminate(server, app, ("active", "idle in transaction"))
            stop.wait(0.02)

    with Metastore.connect(url, warehouse=str(warehouse)) as ms:
        create_table(ms, "t", partitioned=True)
        ledger = Ledger()
        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        try:
            for round_ in range(6):
                seqs = range(round_ * 10, round_ * 10 + 5)
                stream(ms, "t", seqs, PER_TXN, ledger, batch=5, partitioned=True)
        finally:
            stop.set()
            thread.join(30)
        assert kills[0] > 0
        assert len(ledger.committed) == 30
        check_table(ms, "t", ledger, PER_TXN)
