"""What must hold of a table after any failure, for tables whose rows say which transaction wrote them.

Transaction ``seq`` writes ids ``seq * 100000 + i`` with ``msg = "s<seq>"`` (see ``streaming_writer.py``); a
:class:`Ledger` records which txn each ``seq`` got and which commits returned. :func:`check_table` then asserts
Hive's guarantees: every row of every txn the metastore committed is visible exactly once (nothing committed
lost or duplicated), no row of any other txn is (nothing uncommitted visible), and every commit the writer saw
return is committed in the metastore.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.errors import TransactionError
from acidstream.faults import FAULTS_ENV

WRITER_PROGRAM = Path(__file__).with_name("streaming_writer.py")
SEQ_STRIDE = 100000


def create_table(ms: Metastore, name: str, buckets: int = 2, *, partitioned: bool = False) -> None:
    """``(id int, msg string)`` in ``buckets`` buckets; ``partitioned``: by ``p string`` too (dynamic)."""
    partitions = "PARTITIONED BY (p string) " if partitioned else ""
    ms.execute(
        f"CREATE TABLE {name} (id int, msg string) {partitions}CLUSTERED BY (id) INTO {buckets} BUCKETS "
        "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )


def records(seq: int, per_txn: int, *, partitioned: bool = False) -> list[bytes]:
    """The records of ``seq``; ``partitioned``: into two partitions of its own (files created at each txn)."""
    if partitioned:
        return [b"%d,s%d,%d-%d" % (seq * SEQ_STRIDE + i, seq, seq, i % 2) for i in range(per_txn)]
    return [b"%d,s%d" % (seq * SEQ_STRIDE + i, seq) for i in range(per_txn)]


@dataclass
class Ledger:
    """What a writer reported: the txn id of each ``seq`` it began, and the seqs whose commit returned."""

    begun: dict[int, int] = field(default_factory=dict)
    committed: set[int] = field(default_factory=set)

    def read(self, lines: Iterable[str]) -> Ledger:
        for line in lines:
            parts = line.split()
            if len(parts) == 3 and parts[0] in ("BEGIN", "COMMITTED"):
                seq, txn = int(parts[1]), int(parts[2])
                self.begun[seq] = txn
                if parts[0] == "COMMITTED":
                    self.committed.add(seq)
        return self


def visible_seqs(ms: Metastore, table: str) -> Counter[int]:
    """Rows per ``seq`` in a full read (every column decoded, as a user's read would)."""
    rows = ms.table(table).scan().to_arrow().to_pylist()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "a row is visible twice"
    for r in rows:
        assert r["msg"] == f"s{r['id'] // SEQ_STRIDE}", f"row {r} is not one the writer wrote"
    return Counter(i // SEQ_STRIDE for i in ids)


def check_table(ms: Metastore, table: str, ledger: Ledger, per_txn: int) -> Counter[int]:
    """Assert the guarantees above; returns the visible rows per seq."""
    seen = visible_seqs(ms, table)
    unknown = set(seen) - set(ledger.begun)
    assert not unknown, f"rows of transactions never begun are visible: {sorted(unknown)}"
    for seq, txn in sorted(ledger.begun.items()):
        state = ms.get_txn_state(txn).name
        expected = per_txn if state == "COMMITTED" else 0
        assert seen[seq] == expected, (
            f"seq {seq} (txn {txn}, {state}): {seen[seq]} rows visible, not {expected}"
        )
        if seq in ledger.committed:
            assert state == "COMMITTED", f"seq {seq}: its commit returned but txn {txn} is {state}"
    return seen


def stream(
    ms: Metastore,
    table: str,
    seqs: Iterable[int],
    per_txn: int,
    ledger: Ledger,
    *,
    batch: int = 1,
    config: Mapping[str, Any] | None = None,
    partitioned: bool = False,
    check_failure: Callable[[StreamingConnection, Exception], None] | None = None,
) -> None:
    """Write one txn per seq in this process, recording them in ``ledger``; the first failure propagates
    (``check_failure`` sees the connection and the failure first, before the connection is closed)."""
    conn = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database(table.split(".")[0] if "." in table else "default")
        .with_table(table.split(".")[-1])
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .with_transaction_batch_size(batch)
        .with_configuration(dict(config or {}))
        .connect()
    )
    failed = True
    try:
        for seq in seqs:
            conn.begin_transaction()
            txn = conn.current_transaction_id()
            assert txn is not None
            ledger.begun[seq] = txn
            for record in records(seq, per_txn, partitioned=partitioned):
                conn.write(record)
            conn.commit_transaction()
            ledger.committed.add(seq)
        failed = False
    except Exception as exc:
        if check_failure is not None:
            check_failure(conn, exc)
        raise
    finally:
        try:
            conn.close()
        except Exception:
            if not failed:  # after a failure, close's own failure is a consequence: the first one propagates
                raise


def assert_batch_killed(ms: Metastore) -> Callable[[StreamingConnection, Exception], None]:
    """A ``check_failure`` for failures that are not bad records: Hive's rule kills the batch, so the txn is
    aborted, here and in the metastore, before anything else happens, and committing it again raises."""

    def check(conn: StreamingConnection, exc: Exception) -> None:
        txn = conn.current_transaction_id()
        assert txn is not None
        assert conn.current_transaction_state().name == "ABORTED", f"after {exc!r}"
        assert ms.get_txn_state(txn).name == "ABORTED", f"after {exc!r}"
        with pytest.raises(TransactionError):
            conn.commit_transaction()

    return check


def start_writer(
    url: str,
    warehouse: Path,
    table: str,
    *,
    batch: int,
    txns: int,
    per_txn: int,
    first_seq: int = 0,
    config: Mapping[str, Any] | None = None,
    faults: str | None = None,
    txn_timeout: float = 300.0,
) -> subprocess.Popen[str]:
    """``streaming_writer.py`` in a new process (its stdout: the ledger lines); its txns time out
    ``txn_timeout`` s after its last heartbeat."""
    env = {k: v for k, v in os.environ.items() if k != FAULTS_ENV}
    if faults:
        env[FAULTS_ENV] = faults
    args = [url, str(warehouse), table, str(batch), str(txns), str(per_txn), str(first_seq)]
    return subprocess.Popen(
        [sys.executable, str(WRITER_PROGRAM), *args, json.dumps(dict(config or {})), str(txn_timeout)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
