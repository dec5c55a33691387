"""Hive 4 reads a replica: after each replicated event it returns the source's rows and ROW__IDs from the
replica's files, a transaction batch still open on the source included (through the replica's side files),
deletes and a compaction on the source too."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream import StreamingConnection, StrictDelimitedInputWriter, repl
from acidstream.catalog import Metastore
from hive4.judge import judge
from hive4.referee import Referee

pytestmark = pytest.mark.hive4


def test_hive_reads_the_replica(hive4: Referee, tmp_path: Path) -> None:
    with (
        Metastore.connect(f"sqlite:///{tmp_path / 's.db'}", warehouse=tmp_path / "src") as source,
        Metastore.connect(f"sqlite:///{tmp_path / 'r.db'}", warehouse=tmp_path / "dst") as replica,
    ):
        source.execute(
            "CREATE TABLE t (id int, msg string) PARTITIONED BY (day string) CLUSTERED BY (id) INTO 2 BUCKETS "
            "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        repl.sync(source, replica)
        conn = (
            StreamingConnection.builder()
            .with_metastore(source)
            .with_database("default")
            .with_table("t")
            .with_transaction_batch_size(10)
            .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
            .connect()
        )

        committed: dict[int, tuple[int, str, str]] = {}  # the rows committed on the source, by id

        def check() -> None:
            repl.sync(source, replica)
            rows = judge(hive4, source, "default.t", expected=committed.values())
            assert judge(hive4, replica, "default.t", expected=committed.values()) == rows

        try:
            for txn in range(4):
                conn.begin_transaction()
                written = [(100 + txn * 10 + i, f"txn {txn}", f"d{txn % 2}") for i in range(3)]
                for row in written:
                    conn.write(",".join(map(str, row)).encode())
                if txn == 2:
                    conn.abort_transaction()
                else:
                    conn.commit_transaction()
                    committed.update((row[0], row) for row in written)
                check()
            assert list(Path(replica.table("default.t").location).rglob("*_flush_length")), "open: side files"
            source.table("default.t").update(pc.field("id") == 101, {"msg": "updated"})
            source.table("default.t").delete(pc.field("id") == 110)
            committed[101] = (101, "updated", "d0")
            del committed[110]
            check()
            source.table("default.t").merge(
                pa.table(
                    {"id": pa.array([101, 500], pa.int32()), "msg": ["merged", "new"], "day": ["d0", "d1"]}
                ),
                on=["id"],
            )
            committed[101], committed[500] = (101, "merged", "d0"), (500, "new", "d1")
            check()
        finally:
            conn.close()
        source.execute("ALTER TABLE t PARTITION (day='d0') COMPACT 'major' AND WAIT")
        check()
        assert len(committed) == 3 * 3 - 1 + 1
