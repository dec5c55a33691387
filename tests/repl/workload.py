"""A random source workload: streaming batches (commits, aborts, batches left open), mutations, compactions."""

from __future__ import annotations

import random
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.catalog import Metastore
from acidstream.compactor import Cleaner, CompactorConfig
from acidstream.errors import NoSuchObjectException

TABLES = ["db.flat", "db.parts"]


def create_tables(ms: Metastore) -> None:
    ms.execute("CREATE DATABASE db")
    ms.execute(
        "CREATE TABLE db.flat (id int, msg string) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    ms.execute(
        "CREATE TABLE db.parts (id int, msg string) PARTITIONED BY (ds string) STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )


def run_workload(ms: Metastore, seed: int, steps: int, after_step: Callable[[], None]) -> None:
    """``steps`` random actions on ``ms``; ``after_step`` runs after each (the caller records views)."""
    rng = random.Random(seed)
    writer = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
    next_id = 0
    for _ in range(steps):
        action = rng.choice(["batch", "batch", "batch", "update", "delete", "compact"])
        table = rng.choice(TABLES)
        if action == "batch":
            builder = (
                StreamingConnection.builder()
                .with_metastore(ms)
                .with_database("db")
                .with_table(table.split(".")[1])
                .with_record_writer(writer)
                .with_transaction_batch_size(rng.choice([1, 3, 5]))
            )
            if table == "db.parts":
                builder = builder.with_static_partition_values([rng.choice(["a", "b"])])
            conn = builder.connect()
            try:
                for _txn in range(rng.randint(1, 5)):
                    if _txn and conn.remaining_transactions() == 0:
                        break
                    conn.begin_transaction()
                    rows = rng.randint(1, 20)
                    conn.write_batch(
                        pa.table({"id": range(next_id, next_id + rows), "msg": [f"m{next_id}"] * rows})
                    )
                    next_id += rows
                    if rng.random() < 0.2:
                        conn.abort_transaction()
                    else:
                        conn.commit_transaction()
                    after_step()
            finally:
                conn.close()
        elif action in ("update", "delete") and next_id:
            low = rng.randrange(next_id)
            selected = (pc.field("id") >= low) & (pc.field("id") < low + 5)
            if action == "update":
                ms.table(table).update(selected, {"msg": f"u{low}"})
            else:
                ms.table(table).delete(selected)
        elif action == "compact":
            partition = {"ds": rng.choice(["a", "b"])} if table == "db.parts" else None
            try:
                cq_id = ms.compact(table, partition, rng.choice(["major", "minor"]), wait=True)
            except NoSuchObjectException as exc:  # a partition not written yet: nothing else may fail here
                assert "does not exist" in str(exc) and partition is not None, exc
                continue
            done = ms.get_compaction(cq_id)  # refused (nothing to compact) is an answer; failed is not
            assert done.state != "failed", done.error_message
            Cleaner(ms, CompactorConfig(retention=0)).run_once()
        after_step()
