"""acidstream beside Hive's own writers: Hive's Java ``HiveStreamingConnection`` and acidstream's
``StreamingConnection``, both with open batches of 10, stream into one table of one Hive 4 metastore at the
same time, into the same and different partitions, committing and aborting in turn. After every step, at the
metastore's snapshot, Hive 4's reader and ours return the same rows and ROW__IDs, exactly the committed records of
both writers, and acidstream's snapshot scan through ``Metastore.connect("thrift://...")`` sees them too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from hive4.hivetables import HiveTable
from hive4.referee import Referee, Streamer
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4


@pytest.fixture
def ms(hive4_metastore: str) -> Iterator[Metastore]:
    import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")
    with Metastore.connect(hive4_metastore) as metastore:
        yield metastore


def test_hive_and_acidstream_stream_into_one_table_at_once(
    hive4: Referee, hive4_streamer: Streamer, hive4_metastore: str, ms: Metastore
) -> None:
    table = HiveTable(hive4, hive4_metastore, partitioned=True)
    hive4_streamer.connect(hive4_metastore, "hive", table.name, batch=10, writer="delimited", static=None)
    ours = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("hive")
        .with_table(table.name)
        .with_transaction_batch_size(10)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    )
    next_id = iter(range(1_000_000))

    def step(writer: str, part: str, commit: bool) -> None:
        rows = [(next(next_id), f"{writer} {part}") for _ in range(3)]
        records = [f"{i},{msg},{part}" for i, msg in rows]
        if writer == "hive":
            hive4_streamer.transaction(records, commit=commit)
        else:
            ours.begin_transaction()
            for record in records:
                ours.write(record.encode())
            if commit:
                ours.commit_transaction()
            else:
                ours.abort_transaction()
        table.committed.setdefault(part, set())
        if commit:
            table.committed[part].update(rows)
        table.judge()  # Hive 4's reader == ours == the committed rows, per partition
        scanned = ms.table(f"hive.{table.name}").scan(["id", "msg"]).to_arrow()
        assert set(zip(scanned["id"].to_pylist(), scanned["msg"].to_pylist(), strict=True)) == set().union(
            *table.committed.values()
        )

    try:
        for writer, part, commit in [
            ("hive", "a", True),
            ("acidstream", "a", True),  # same partition, both batches open
            ("acidstream", "b", True),  # a partition only acidstream writes
            ("hive", "a", False),
            ("acidstream", "a", False),
            ("hive", "c", True),  # a partition only Hive writes
            ("acidstream", "c", True),
            ("hive", "b", True),
        ]:
            step(writer, part, commit)
    finally:
        ours.close()
        hive4_streamer.close_connection()
    table.judge()
    assert {p: len(rows) for p, rows in table.committed.items()} == {"a": 6, "b": 6, "c": 6}
