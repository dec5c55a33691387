"""Processes the mutation suite starts: bank transfers (multi-table mutation txns), a streaming writer, and
mutation jobs that stop at a given point to be killed.

Run as ``python mutatejobs.py COMMAND URL WAREHOUSE ARGS...``. Each job logs what a txn wrote *before* it
commits (one line per txn, txn id first), so a reader that took a snapshot, scanned, and then read the logs knows
every txn its snapshot can contain: the snapshot says which of them committed.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.acid.writeids import ValidTxnList
from acidstream.errors import LockException, TransactionException, WriteConflictException
from acidstream.mutate import AcidTable, BucketIdResolver, MutatorClient, MutatorCoordinator

#: The two account tables every transfer changes, and the table the streaming writer appends to.
ACCOUNTS = ("bank.checking", "bank.savings")
AUDIT = "bank.audit"
ACCOUNT_COLUMNS = ["id", "balance", "moves", "branch"]
#: Rows per streaming txn; every ``ABORT_EVERY``-th streaming txn is aborted.
STREAM_ROWS = 3
ABORT_EVERY = 5


def scan_accounts(ms: Metastore, table: str, snapshot: ValidTxnList) -> list[dict[str, Any]]:
    return (
        ms.table(table)
        .scan(columns=ACCOUNT_COLUMNS, with_row_id=True, snapshot=snapshot)
        .to_arrow()
        .to_pylist()
    )


def transfer_client(ms: Metastore, partition_conflicts: bool) -> MutatorClient:
    builder = MutatorClient.builder().with_metastore(ms).with_partition_level_conflicts(partition_conflicts)
    for name in ACCOUNTS:
        db, table = name.split(".")
        builder.add_sink_table(db, table)
    client = builder.build()
    client.connect()
    return client


def transfers(
    url: str, wh: str, log: str, seed: str, count: str, partition_conflicts: str, early_snapshot: str
) -> None:
    """``count`` committed transfers: each moves an amount from a savings account to a checking account (or
    back) in one txn over both tables, reading the balances at the txn's snapshot; a txn that loses a write
    conflict or waits too long for its locks is redone from the start. ``early_snapshot``: take the snapshot
    before the locks, so the balances read may be stale when the txn waited for them: only the write
    conflict check then keeps the transfer from losing another's update."""
    ms = Metastore.connect(url, warehouse=wh, lock_wait_timeout=30)
    client = transfer_client(ms, partition_conflicts == "1")
    rnd = random.Random(int(seed))
    committed = conflicts = lock_timeouts = 0
    with open(log, "a") as out:
        while committed < int(count):
            txn = client.new_transaction()
            tables = client.get_tables()
            try:
                if early_snapshot == "1":
                    txn.snapshot()
                txn.begin()
                snapshot = txn.snapshot()
                picks = [rnd.choice(scan_accounts(ms, t.qualified_name, snapshot)) for t in tables]
                amount = rnd.choice([-1, 1]) * rnd.randint(1, 30)
                for table, row, delta in zip(tables, picks, (amount, -amount), strict=True):
                    with MutatorCoordinator.builder().with_metastore(ms).with_table(table).build() as coord:
                        coord.update(
                            [row["branch"]],
                            {
                                "ROW__ID": row["ROW__ID"],
                                "id": row["id"],
                                "balance": row["balance"] + delta,
                                "moves": row["moves"] + 1,
                            },
                        )
                out.write(f"{txn.transaction_id} {picks[0]['id']} {amount} {picks[1]['id']} {-amount}\n")
                out.flush()
                txn.commit()
                committed += 1
            except WriteConflictException:
                conflicts += 1
                time.sleep(rnd.random() * 0.05)
            except LockException:
                lock_timeouts += 1
                txn.abort()
    client.close()
    ms.close()
    print("DONE", committed, conflicts, lock_timeouts, flush=True)


def stream(url: str, wh: str, log: str, stop_file: str, minimum: str) -> None:
    """Streaming txns of ``STREAM_ROWS`` rows into the audit table, in batches of 4 txns, until ``stop_file``
    exists (and at least ``minimum`` txns ran); every ``ABORT_EVERY``-th txn is aborted."""
    ms = Metastore.connect(url, warehouse=wh)
    db, table = AUDIT.split(".")
    conn = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database(db)
        .with_table(table)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .with_transaction_batch_size(4)
        .connect()
    )
    n = 0
    with open(log, "a") as out, conn:
        while n < int(minimum) or not Path(stop_file).exists():
            conn.begin_transaction()
            ids = [n * STREAM_ROWS + j for j in range(STREAM_ROWS)]
            aborted = n % ABORT_EVERY == ABORT_EVERY - 1
            out.write(f"{conn.current_transaction_id()} {' '.join(map(str, ids))}\n")
            out.flush()
            conn.write_batch(pa.table({"id": pa.array(ids, pa.int32()), "msg": [f"txn {n}"] * STREAM_ROWS}))
            if aborted:
                conn.abort_transaction()
            else:
                conn.commit_transaction()
            n += 1
            time.sleep(0.01)  # a steady stream, not one that takes the machine's cores from the transfers
    ms.close()
    print("DONE", n, flush=True)


def insert_accounts(ms: Metastore, accounts: dict[int, str], balance: int) -> None:
    """Open every account of both tables (``id -> branch``) in one mutation txn."""
    client = transfer_client(ms, False)
    with client.new_transaction() as txn:
        txn.begin()
        for table in client.get_tables():
            write_accounts(ms, table, accounts, balance)
    client.close()


def write_accounts(ms: Metastore, table: AcidTable, accounts: dict[int, str], balance: int) -> None:
    resolver = BucketIdResolver(table)
    with MutatorCoordinator.builder().with_metastore(ms).with_table(table).build() as coord:
        for branch in sorted(set(accounts.values())):
            rows = pa.table(
                {
                    "id": pa.array([i for i, b in accounts.items() if b == branch], pa.int32()),
                    "balance": pa.array([balance] * sum(b == branch for b in accounts.values()), pa.int64()),
                }
            )
            rows = rows.append_column("moves", pa.array([0] * rows.num_rows, pa.int32()))
            attached = resolver.attach_batch(rows)
            order = pc.sort_indices(attached.column("ROW__ID").combine_chunks().field("bucketid"))
            coord.insert_batch([branch], attached.take(order))


# --- jobs killed mid-mutation ------------------------------------------------------------------------------------

#: The table the crash jobs mutate (partitioned, rows in p0..p2) and the second sink of their txn.
CRASH = "crash.t"
CRASH_OTHER = "crash.u"
NEW_PARTITION = "p9"
#: Rows inserted into the new partition: enough for a full stripe (8 MiB) per bucket, so a coordinator stopped
#: mid-group has a data file on disk with a stripe and no footer.
BIG_ROWS = 100_000
Piece = tuple[list[str], str, pa.Table]  # partition values, operation, rows of one bucket with their ROW__ID


def big_message(i: int) -> str:
    return f"{i:08d}" + "x" * 192


def plan(ms: Metastore, table: AcidTable, snapshot: ValidTxnList) -> list[Piece]:
    """The crash jobs' mutation of ``CRASH``, from its rows at ``snapshot``, grouped and ordered as the API
    requires: every row of p0 updated, the even ids of p1 deleted, ``BIG_ROWS`` rows inserted into a new
    partition. Deterministic, so a retried task writes the same."""
    rows = ms.table(CRASH).scan(columns=["id", "msg", "p"], with_row_id=True, snapshot=snapshot).to_arrow()
    pieces: list[Piece] = []
    for part, op in (("p0", "update"), ("p1", "delete")):
        chosen = rows.filter(pc.field("p") == part)
        if op == "update":
            updated = pc.binary_join_element_wise("updated ", pc.cast(chosen["id"], pa.string()), "")
            chosen = chosen.set_column(chosen.schema.get_field_index("msg"), "msg", updated)
        else:
            chosen = chosen.filter(pc.equal(pc.bit_wise_and(chosen["id"], 1), 0))
        pieces += by_bucket([part], op, chosen.drop_columns(["p"]))
    ids = pa.array(range(1000, 1000 + BIG_ROWS), pa.int32())
    new = pa.table({"id": ids, "msg": [big_message(i) for i in ids.to_pylist()]})
    pieces += by_bucket([NEW_PARTITION], "insert", BucketIdResolver(table).attach_batch(new))
    return pieces


def by_bucket(partition: list[str], op: str, rows: pa.Table) -> list[Piece]:
    """One piece per bucket, ascending by bucket, rows ascending by ROW__ID within it."""
    row_id = rows.column("ROW__ID").combine_chunks()
    bucket = pc.shift_right(pc.bit_wise_and(row_id.field("bucketid"), 0x0FFF0000), 16)
    keys = pa.table(
        {
            "bucket": bucket,
            "w": row_id.field("writeid"),
            "b": row_id.field("bucketid"),
            "r": row_id.field("rowid"),
        }
    )
    order = pc.sort_indices(keys, [(k, "ascending") for k in keys.column_names])
    rows, bucket = rows.take(order), bucket.take(order)
    return [(partition, op, rows.filter(pc.equal(bucket, b))) for b in sorted(set(bucket.to_pylist()))]


def apply(coord: MutatorCoordinator, pieces: list[Piece], *, pause: bool) -> None:
    """Write the pieces; ``pause``: stop in the first insert group, its data file holding a stripe and no footer,
    print READY and wait to be killed."""
    calls = {"insert": coord.insert_batch, "update": coord.update_batch, "delete": coord.delete_batch}
    for partition, op, rows in pieces:
        calls[op](partition, rows)
        if pause and op == "insert":
            print("READY", flush=True)
            time.sleep(600)


def mutation(url: str, wh: str, txn_timeout: str, stage: str) -> None:
    """A client and its coordinators in one process, over ``CRASH`` and ``CRASH_OTHER``; stops (prints READY
    and the txn id, then sleeps) at ``stage``: ``writing`` (a coordinator in the middle of a group) or
    ``closed`` (every coordinator closed, before the commit)."""
    ms = Metastore.connect(url, warehouse=wh, txn_timeout=float(txn_timeout))
    builder = MutatorClient.builder().with_metastore(ms)
    for name in (CRASH, CRASH_OTHER):
        builder.add_sink_table(*name.split("."))
    client = builder.build()
    client.connect()
    txn = client.new_transaction()
    table, other = client.get_tables()
    txn.begin()
    print("TXN", txn.transaction_id, flush=True)
    with MutatorCoordinator.builder().with_metastore(ms).with_table(other).build() as coord:
        rows = pa.table({"id": pa.array(range(500, 510), pa.int32()), "msg": ["lost"] * 10})
        rows = BucketIdResolver(other).attach_batch(rows)
        coord.insert_batch(
            [], rows.take(pc.sort_indices(rows.column("ROW__ID").combine_chunks().field("bucketid")))
        )
    with MutatorCoordinator.builder().with_metastore(ms).with_table(table).build() as coord:
        apply(coord, plan(ms, table, txn.snapshot()), pause=stage == "writing")
    print("READY", flush=True)
    time.sleep(600)


def coordinator(url: str, wh: str, table_json: str, snapshot: str, statement_id: str, mode: str) -> None:
    """A worker's coordinator for a txn its driver opened: the plan at the driver's ``snapshot``; ``pause``
    stops mid-group (to be killed), ``retry`` replaces what an earlier attempt of the statement left and
    prints the summary for the driver's commit."""
    ms = Metastore.connect(url, warehouse=wh)
    table = AcidTable.from_json(Path(table_json).read_text())
    builder = (
        MutatorCoordinator.builder().with_metastore(ms).with_table(table).with_statement_id(int(statement_id))
    )
    if mode == "retry":
        builder = builder.delete_delta_if_exists()
    coord = builder.build()
    apply(coord, plan(ms, table, ValidTxnList.parse(snapshot)), pause=mode == "pause")
    print("SUMMARY", coord.close().to_json(), flush=True)


def listener(url: str, wh: str, heartbeat_interval: str, txn_timeout: str) -> None:
    """A live client whose txn is aborted under it (it heartbeats less often than its own txn timeout): the
    listener is called from the heartbeat thread, then the commit fails with TransactionException. Prints READY
    (txn id), LISTENER and the commit's outcome."""
    ms = Metastore.connect(url, warehouse=wh, txn_timeout=float(txn_timeout))
    called = threading.Event()

    def on_failure(txn_id: int, error: BaseException) -> None:
        print("LISTENER", txn_id, type(error).__name__, flush=True)
        called.set()

    client = (
        MutatorClient.builder()
        .with_metastore(ms)
        .add_sink_table(*CRASH.split("."))
        .with_lock_failure_listener(on_failure)
        .with_heartbeat_interval(float(heartbeat_interval))
        .build()
    )
    client.connect()
    txn = client.new_transaction()
    [table] = client.get_tables()
    txn.begin()
    with MutatorCoordinator.builder().with_metastore(ms).with_table(table).build() as coord:
        apply(coord, [p for p in plan(ms, table, txn.snapshot()) if p[1] != "insert"], pause=False)
    print("READY", txn.transaction_id, flush=True)
    if not called.wait(60):
        print("LISTENER NOT CALLED", flush=True)
    try:
        txn.commit()
        print("COMMITTED", flush=True)
    except TransactionException as exc:
        print("COMMIT-FAILED", txn.state.name, exc, flush=True)
    client.close()
    ms.close()


JOBS = {
    "transfers": transfers,
    "stream": stream,
    "mutation": mutation,
    "coordinator": coordinator,
    "listener": listener,
}

if __name__ == "__main__":
    JOBS[sys.argv[1]](*sys.argv[2:])
