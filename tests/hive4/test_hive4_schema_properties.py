"""Table properties changed under an open streaming connection, by an ALTER through the metastore (Hive's own
ALTER is an ``alter_table`` call, as ours is on a Hive Metastore): a connection keeps writing through a change
it can follow (``orc.compress``: its files keep the codec it opened with, a new connection takes the new one),
and fails cleanly at its next batch after one it cannot (``bucketing_version``, the number of buckets: its
rows would go to buckets by the old rule), writing nothing; Hive 4 judges the rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as po
import pytest

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.catalog import Metastore
from acidstream.errors import TableChanged
from acidstream.storage import table_filesystem
from hive4.judge import hive_metastore_uri, judge
from hive4.referee import Referee
from hive4.schema_support import both_metastores

pytestmark = pytest.mark.hive4


@pytest.fixture(params=["ours", "hive"])
def ms(request: pytest.FixtureRequest, tmp_path: Path, warehouse: Path) -> Iterator[tuple[Metastore, str]]:
    yield from both_metastores(request, tmp_path, warehouse)


def connect(m: Metastore, table: str) -> StreamingConnection:
    db, name = table.split(".")
    builder = StreamingConnection.builder().with_metastore(m).with_database(db).with_table(name)
    return builder.with_record_writer(StrictDelimitedInputWriter.builder().build()).connect()


def commit(conn: StreamingConnection, ids: list[int]) -> None:
    conn.begin_transaction()
    conn.write_batch(pa.table({"id": pa.array(ids, pa.int32()), "msg": [f"m{i}" for i in ids]}))
    conn.commit_transaction()


def codecs(m: Metastore, table: str) -> set[str]:
    """The compression of the table's newest delta's files."""
    location = Path(table_filesystem(m.table(table).location)[1])
    newest = max((p for p in location.iterdir() if p.name.startswith("delta_")), key=lambda p: p.name)
    return {
        po.ORCFile(str(f)).compression
        for f in newest.glob("bucket_*")
        if not f.name.endswith("_flush_length")
    }


def test_a_connection_follows_a_codec_change_and_fails_on_a_bucketing_change(
    hive4: Referee, ms: tuple[Metastore, str]
) -> None:
    m, db = ms
    t = f"{db}.p"
    m.execute(
        f"CREATE TABLE {t} (id int, msg string) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    before = connect(m, t)
    commit(before, [1, 2])
    m.execute(f"ALTER TABLE {t} SET TBLPROPERTIES ('orc.compress'='SNAPPY')")
    commit(before, [3, 4])  # a change it can follow: the codec it opened with
    assert codecs(m, t) == {"ZLIB"}
    after = connect(m, t)
    commit(after, [5, 6])
    assert codecs(m, t) == {"SNAPPY"}
    expected = [(i, f"m{i}") for i in range(1, 7)]
    judge(hive4, m, t, expected=expected)

    m.execute(f"ALTER TABLE {t} SET TBLPROPERTIES ('bucketing_version'='1')")
    for conn in (before, after):
        with pytest.raises(TableChanged, match=r"bucketing_version was 2, now 1; connect again$"):
            conn.begin_transaction()
        conn.close()
    with connect(m, t) as again:
        commit(again, [7])
    expected.append((7, "m7"))
    judge(hive4, m, t, expected=expected)

    if hive_metastore_uri(m) is not None:  # the bucket count, changed in the metastore's own record
        opened = connect(m, t)
        from hive_metastore import ttypes

        request = ttypes.GetTableRequest(dbName=db, tblName="p")
        hive_table = m.backend._call("get_table_req", request).table
        hive_table.sd.numBuckets = 4
        m.backend._call("alter_table", db, "p", hive_table, idempotent=False)
        with opened, pytest.raises(TableChanged, match=r"buckets was 2, now 4; connect again$"):
            opened.begin_transaction()
        judge(hive4, m, t, expected=expected)
