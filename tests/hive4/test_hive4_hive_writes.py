"""We read what Hive 4 writes: a table of a standalone Hive Metastore, its transactions and write ids taken
from that metastore and its files written by Hive's ``OrcRecordUpdater`` — the writer under Hive's streaming
API (a transaction batch in one delta, flushed per commit, an aborted transaction, a batch left open with its
side files) and its DML (split updates and deletes in ``delete_delta`` directories). Our directory-level read
path (``read.planning``, no acidstream metastore) at the Hive Metastore's snapshot returns exactly the rows and
ROW__IDs Hive's own reader returns, and the rows the committed transactions wrote.

Hive 4's streaming client itself (``org.apache.hive:hive-streaming``) is not published on Maven Central: here
its metastore calls are made one by one, as it makes them (each txn locks the table before it writes, which
records its write; a dynamic-partition commit adds its partitions); ``test_hive4_hive_streaming`` runs Hive
3.1.3's. After Hive's txn cleaner has run, the aborted txns' rows stay unread.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from acidstream import Metastore
from acidstream.acid.codec import BucketCodec
from acidstream.metastore.models import LockComponent, LockLevel, LockType, OperationType
from hive4.hivetables import COLUMNS, HiveTable
from hive4.referee import Referee
from hive4.txncleaner import cleaner_pass
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4


@pytest.fixture
def ms(hive4_metastore: str) -> Iterator[Metastore]:
    import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")
    with Metastore.connect(hive4_metastore) as metastore:
        yield metastore


def lock(ms: Metastore, table: HiveTable, txn: int, operation: OperationType = OperationType.INSERT) -> None:
    """The lock Hive's writer takes for ``txn`` before it writes: its streaming connection's shared-read
    insert (a dynamic-partition write into a partitioned table), its DML's shared write. The metastore records
    the txn's write with it, so that an aborted txn keeps its record through Hive's txn cleaner."""
    insert = operation is OperationType.INSERT
    component = LockComponent(
        LockType.SHARED_READ if insert else LockType.SHARED_WRITE,
        LockLevel.TABLE,
        "hive",
        table.name,
        operation=operation,
        is_dynamic_partition_write=table.partitioned,
    )
    ms.lock([component], txn_id=txn)


def stream(
    ms: Metastore,
    table: HiveTable,
    size: int,
    used: int,
    *,
    abort: int | None = None,
    leave_open: bool = False,
) -> None:
    """One transaction batch of ``size`` as Hive's streaming connection writes it: one delta of the batch's
    write ids per directory, a flush (stripe, side file) per commit, ``used`` transactions used (``abort``
    aborted, a last one left open without commit when ``leave_open``), the unused ones aborted at close."""
    txns = table.open_batch(size)
    first, last = txns[0][1], txns[-1][1]
    for k, (txn, write_id) in enumerate(txns[:used]):
        lock(ms, table, txn)
        for part, location in table.dirs.items():
            rows = [(write_id * 100 + i, f"{part} w{write_id}") for i in range(k + 1)]
            table.hive4.write(
                location,
                COLUMNS,
                [("insert", write_id, list(r)) for r in rows],
                bucket=0,
                min_write_id=first,
                max_write_id=last,
                statement_id=-1,  # streaming: delta_<first>_<last>, no statement suffix
                flush="open",
                handle=f"{table.name}/{part}/{first}",
            )
            if k != abort and not (leave_open and k == used - 1):
                table.committed[part] |= set(rows)
        if not (leave_open and k == used - 1):
            if k != abort and table.partitioned:
                names = [f"part={p}" for p in table.dirs]
                ms.add_dynamic_partitions(txn, write_id, f"hive.{table.name}", names)
            table.end(txn, commit=k != abort)
        table.judge()
    if leave_open:
        return
    for part in table.dirs:
        table.hive4.call(op="write", close=f"{table.name}/{part}/{first}")
    for txn, _ in txns[used:]:
        table.end(txn, commit=False)
    table.judge()


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 10])
def test_transaction_batches(hive4: Referee, hive4_metastore: str, ms: Metastore, batch: int) -> None:
    table = HiveTable(hive4, hive4_metastore, partitions=["a", "b"])
    if batch == 1:
        for k in range(3):
            stream(ms, table, 1, 1, abort=0 if k == 1 else None)
        stream(ms, table, 1, 1, leave_open=True)
    else:
        stream(ms, table, batch, 3, abort=1)
        stream(ms, table, batch, 3, leave_open=True)
    # Hive's updater keeps a side file for batches of several write ids only (one of one closes or aborts whole)
    assert any(Path(table.location).rglob("*_flush_length")) == (batch > 1)
    assert sum(len(rows) for rows in table.committed.values()) == 2 * (2 if batch == 1 else 1 + 3 + 1 + 2)
    cleaner_pass(ms)
    table.judge()


def test_split_updates_and_deletes(hive4: Referee, hive4_metastore: str, ms: Metastore) -> None:
    table = HiveTable(hive4, hive4_metastore)
    location = table.location
    codec = BucketCodec.V1.encode(0, 0)
    [(txn, w1)] = table.open_batch(1)
    lock(ms, table, txn)
    hive4.write(
        location,
        COLUMNS,
        [("insert", w1, [i, f"r{i}"]) for i in range(10)],
        bucket=0,
        min_write_id=w1,
        max_write_id=w1,
        statement_id=0,
    )
    table.end(txn, commit=True)
    table.committed[""] = {(i, f"r{i}") for i in range(10)}
    table.judge()
    [(txn, w2)] = table.open_batch(1)
    lock(ms, table, txn, OperationType.UPDATE)
    ops: list[Sequence[Any]] = [("delete", w2, [w1, codec, 1]), ("delete", w2, [w1, codec, 2])]
    ops += [("update", w2, [w1, codec, 5], [5, "updated"]), ("insert", w2, [100, "new"])]
    hive4.write(location, COLUMNS, ops, bucket=0, min_write_id=w2, max_write_id=w2, statement_id=0)
    table.end(txn, commit=True)
    table.committed[""] = {r for r in table.committed[""] if r[0] not in (1, 2, 5)} | {
        (5, "updated"),
        (100, "new"),
    }
    table.judge()
    [(txn, w3)] = table.open_batch(1)
    lock(ms, table, txn, OperationType.DELETE)
    hive4.write(
        location,
        COLUMNS,
        [("delete", w3, [w1, codec, 0])],
        bucket=0,
        min_write_id=w3,
        max_write_id=w3,
        statement_id=0,
    )
    table.end(txn, commit=False)
    table.judge()
    cleaner_pass(ms)
    table.judge()
    assert {p.name for p in Path(location).iterdir()} >= {
        f"delete_delta_{w2:07d}_{w2:07d}_0000",
        f"delta_{w2:07d}_{w2:07d}_0000",
    }
