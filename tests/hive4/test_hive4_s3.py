"""Hive 4 judges tables on S3: what we stream (an open batch's committed prefix too), merge, delete and
major-compact into a warehouse in the session's S3 server, Hive's reader (the referee's JVM, through Hadoop's
S3A filesystem) reads as ours does, row mode and vectorized, through its default and its footer-reading ETL
split generation; and what Hive's writer writes there, we read as Hive does.

The warehouse is named ``s3a://`` as Hive users write it; the referee reaches the server as a Hive job
configured for an S3-compatible store does (path-style requests, the endpoint and the keys as ``fs.s3a.*``
settings).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow.compute as pc
import pytest
from pyarrow import fs as pafs

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.storage import table_filesystem
from hive4.judge import judge, our_rows
from hive4.referee import Referee
from support.s3server import BUCKETS

pytestmark = pytest.mark.hive4

DDL = (
    "CREATE TABLE sales (id int, amount bigint) PARTITIONED BY (region string) CLUSTERED BY (id) INTO 2 BUCKETS "
    "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
)


@pytest.fixture
def on_s3(hive4: Referee, s3_endpoint: str, tmp_path: Path) -> Iterator[tuple[Metastore, Referee]]:
    """A SQLite metastore whose warehouse is a new ``s3a://`` prefix of the session's S3 server, and the referee
    reading and writing there with the keys the server's AWS environment holds."""
    referee = hive4.on_s3(s3_endpoint, os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
    warehouse = f"s3a://{BUCKETS[0]}/{uuid.uuid4().hex[:12]}/wh"
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=warehouse) as ms:
        yield ms, referee


def _rows_of(txn: int) -> list[tuple[int, int, str]]:
    """Three rows of txn ``txn``: ids ``10t .. 10t+2``, in both partitions."""
    return [(i, i * 100, "eu" if i % 2 else "us") for i in range(txn * 10, txn * 10 + 3)]


def test_hive_reads_what_we_stream_merge_and_compact(on_s3: tuple[Metastore, Referee]) -> None:
    ms, referee = on_s3
    ms.execute(DDL)
    committed = {}
    writer = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
    builder = StreamingConnection.builder().with_metastore(ms).with_database("default").with_table("sales")
    with builder.with_record_writer(writer).with_transaction_batch_size(3).connect() as conn:
        for t in (1, 2, 3):
            conn.begin_transaction()
            for row in _rows_of(t):
                conn.write(",".join(map(str, row)).encode())
                if t < 3:
                    committed[row[0]] = row
            if t < 3:
                conn.commit_transaction()
        # the batch's third txn is open, its rows written: Hive reads the two committed before it, only
        judge(referee, ms, "default.sales", expected=committed.values())
        conn.abort_transaction()
    changes = pd.DataFrame({"id": [10, 99], "amount": [-1, 9900], "region": ["us", "eu"]})
    ms.table("sales").merge(changes, on=["id"])
    ms.table("sales").delete(pc.field("id") == 21)
    committed |= {10: (10, -1, "us"), 99: (99, 9900, "eu")}
    del committed[21]
    judge(referee, ms, "default.sales", expected=committed.values())
    before = ms.snapshot()
    ms.compact("default.sales", "region=eu", kind="major", wait=True)
    [base] = [name for name in _listing(ms, "region=eu") if re.fullmatch(r"base_\d+_v\d+", name)]
    judge(referee, ms, "default.sales", expected=committed.values())
    # the base was written in place, under its txn's visibility suffix: Hive reads it now, and a snapshot from
    # before that txn committed still reads the deltas, alike
    eu = f"{ms.table('sales').location}/region=eu"
    for txns, chosen in ((ms.snapshot(), base), (before, None)):
        assert referee.select(eu, ms.get_valid_write_ids("default.sales", snapshot=txns), txns)[0] == chosen
    assert judge(referee, ms, "default.sales", before, expected=committed.values())


def _listing(ms: Metastore, partition: str) -> list[str]:
    filesystem, path = table_filesystem(ms.table("sales").location)
    return [i.base_name for i in filesystem.get_file_info(pafs.FileSelector(f"{path}/{partition}"))]


def test_we_read_what_hive_writes(on_s3: tuple[Metastore, Referee]) -> None:
    """Hive's writer (``OrcRecordUpdater`` through S3A) adds two rows and deletes one of ours in a txn of our
    metastore: both readers return the same rows and ROW__IDs, exactly those committed."""
    ms, referee = on_s3
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
