"""A transaction batch's timeline with a concurrent update, replayed event by event on a replica.

A source batch of 10 txns; txns 1–3 commit (write ids 19, 20, 21; rows 100–102, 103–106, 107); a concurrent txn
updates row 101 and commits; txns 4–10 commit. After every replayed event a replica reader sees exactly what a
source reader saw at that event: same rows, same ROW__IDs. Batch sizes 1, 10 and 100.
"""

from __future__ import annotations

import pyarrow.compute as pc
import pytest
from replhelpers import Timeline, stream, view

from acidstream import repl
from acidstream.catalog import Metastore

TABLE = "default.alerts"
SEED_ROWS = {1: [100, 101, 102], 2: [103, 104, 105, 106], 3: [107]}


def _rows(txn: int) -> list[int]:
    return SEED_ROWS.get(txn, [100 + 10 * txn + i for i in range(txn % 3 + 1)])


@pytest.mark.parametrize("batch_size", [1, 10, 100])
def test_seed_timeline(source: Metastore, replica: Metastore, batch_size: int) -> None:
    source.execute(
        f"CREATE TABLE {TABLE} (id int, msg string) CLUSTERED BY (id) INTO 4 BUCKETS STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    for _ in range(18):  # write ids 1..18 go to earlier txns: the batch starts at 19
        txn = source.open_txns()[0]
        source.allocate_table_write_ids([txn], TABLE)
        source.commit_txn(txn)
    assert repl.sync(source, replica).bootstrapped
    timeline = Timeline(source, [TABLE])
    timeline.record()
    conn = stream(source, "default.alerts", batch_size)
    try:
        for txn in range(1, 11):
            conn.begin_transaction()
            timeline.record()
            for row in _rows(txn):
                conn.write(f"{row},txn {txn}".encode())
            conn.commit_transaction()
            timeline.record()
            if txn == 3:  # the concurrent txn 11 updates row 101 and commits
                assert source.table(TABLE).update(pc.field("id") == 101, {"msg": "updated"})["updated"] == 1
                timeline.record()
    finally:
        conn.close()
    timeline.record()

    final = view(source, [TABLE])[TABLE]
    by_id = {dict(r)["id"]: dict(r) for r in final}
    if batch_size == 10:
        for txn, wid in ((1, 19), (2, 20), (3, 21)):
            for row in SEED_ROWS[txn]:
                if row != 101:
                    assert by_id[row]["ROW__ID"]["writeid"] == wid
        assert by_id[101]["ROW__ID"]["writeid"] == 29 and by_id[101]["msg"] == "updated"
    assert len(final) == sum(len(_rows(t)) for t in range(1, 11))

    applied = timeline.replay_checking(replica)
    assert applied > 0
    assert view(replica, [TABLE]) == view(source, [TABLE])
