"""What Hive 4 judges alike on each store (HDFS, S3, and S3 under a Hive Metastore): a streamed table whose
batch is still open, and rows Hive's own writer adds to and deletes from a table of ours."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from hive4.judge import judge, our_rows
from hive4.referee import Referee

#: A partitioned, bucketed table ``sales`` of database ``{db}``.
SALES_DDL = (
    "CREATE TABLE {db}.sales (id int, amount bigint) PARTITIONED BY (region string) CLUSTERED BY (id) "
    "INTO 2 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
)


def rows_of(txn: int) -> list[tuple[int, int, str]]:
    """Three rows of txn ``txn``: ids ``10t .. 10t+2``, in both partitions."""
    return [(i, i * 100, "eu" if i % 2 else "us") for i in range(txn * 10, txn * 10 + 3)]


def stream_with_an_open_txn(
    ms: Metastore, referee: Referee, db: str, *, splits: Iterable[str] = ("hybrid", "etl")
) -> dict[int, tuple[int, int, str]]:
    """Streams three txns of one batch into ``db.sales``, two committed; with the third open and its rows
    written, Hive reads the two committed only (judged through ``splits``); the third is then aborted. The rows
    committed, by id."""
    committed = {}
    writer = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
    builder = StreamingConnection.builder().with_metastore(ms).with_database(db).with_table("sales")
    with builder.with_record_writer(writer).with_transaction_batch_size(3).connect() as conn:
        for t in (1, 2, 3):
            conn.begin_transaction()
            for row in rows_of(t):
                conn.write(",".join(map(str, row)).encode())
                if t < 3:
                    committed[row[0]] = row
            if t < 3:
                conn.commit_transaction()
        judge(referee, ms, f"{db}.sales", expected=committed.values(), splits=splits)
        conn.abort_transaction()
    return committed


def hive_writes_into_ours(ms: Metastore, referee: Referee) -> None:
    """Hive's writer (``OrcRecordUpdater``) adds two rows and deletes one of ours in a txn of our metastore, in
    the store the table lives in: both readers return the same rows and ROW__IDs, exactly those committed."""
    ms.execute("CREATE TABLE notes (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
    ms.table("notes").merge(pd.DataFrame({"id": [1, 2, 3], "msg": ["a", "b", "c"]}), on=["id"])
    [row_id] = [rid for rid, row in our_rows(ms, "default.notes", ms.snapshot()) if row[0] == 2]
    [txn] = ms.open_txns(1)
    [(_, write_id)] = ms.allocate_table_write_ids([txn], "default.notes")
    referee.write(
        ms.table("notes").location,
        [("id", "int"), ("msg", "string")],
        [
            ("insert", write_id, [4, "hive"]),
            ("insert", write_id, [5, "hive too"]),
            ("delete", write_id, list(row_id)),
        ],
        bucket=0,
        min_write_id=write_id,
        max_write_id=write_id,
        statement_id=0,
    )
    ms.commit_txn(txn)
    judge(referee, ms, "default.notes", expected=[(1, "a"), (3, "c"), (4, "hive"), (5, "hive too")])
