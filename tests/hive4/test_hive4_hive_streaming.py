"""We read what Hive's own streaming client writes into a table of the Hive 4 metastore: ``HiveStreamingConnection``
with ``StrictDelimitedInputWriter`` and ``StrictJsonWriter``, batches of 1 and 10, static and dynamic
partitions, an aborted transaction and a batch left open (side files). At the metastore's snapshot after each
step, our directory-level read path returns Hive 4's rows and ROW__IDs and exactly the committed records.

The client is Hive 3.1.3's (``interop/hive/streaming3``): Hive 4 publishes no ``hive-streaming`` artifact, and
3.1.3's is the same API over the same metastore calls.
"""

from __future__ import annotations

import json

import pytest

from hive4.hivetables import HiveTable
from hive4.referee import Referee, Streamer

pytestmark = pytest.mark.hive4


def record(writer: str, row_id: int, msg: str, part: str | None) -> str:
    if writer == "json":
        return json.dumps({"id": row_id, "msg": msg, **({"part": part} if part is not None else {})})
    return ",".join([str(row_id), msg, *([part] if part is not None else [])])


@pytest.mark.parametrize("writer", ["delimited", "json"])
@pytest.mark.parametrize("batch", [1, 10])
def test_hive_streaming(
    hive4: Referee, hive4_streamer: Streamer, hive4_metastore: str, writer: str, batch: int
) -> None:
    table = HiveTable(hive4, hive4_metastore, partitioned=True)
    n = 0

    def txn(part: str, dynamic: bool, commit: bool | None, count: int = 2) -> None:
        nonlocal n
        rows = [(n + i, f"{writer} {part}") for i in range(count)]
        n += count
        hive4_streamer.transaction(
            [record(writer, *r, part if dynamic else None) for r in rows], commit=commit
        )
        if commit:
            table.committed.setdefault(part, set()).update(rows)
        table.committed.setdefault(part, set())
        table.judge()

    hive4_streamer.connect(hive4_metastore, "hive", table.name, batch=batch, writer=writer, static=["s"])
    txn("s", False, True)
    txn("s", False, False)
    txn("s", False, True, count=3)
    hive4_streamer.close_connection()
    hive4_streamer.connect(hive4_metastore, "hive", table.name, batch=batch, writer=writer, static=None)
    txn("d1", True, True)
    txn("d2", True, False)
    txn("d1", True, True)
    try:
        txn(
            "d2", True, None
        )  # left open: in a batch of 10, the batch's files stay open with their side files
    finally:
        hive4_streamer.close_connection()  # aborts it
    table.judge()
    assert {p: len(rows) for p, rows in table.committed.items()} == {"s": 5, "d1": 4, "d2": 0}
