"""Tables on S3 whose metastore is a Hive 4 Metastore: a database whose location is an ``s3a://`` prefix of the
session's S3 server, as Hive's DDL makes one (``CREATE DATABASE ... LOCATION``), holds a full-ACID table that
acidstream creates through the metastore (which makes its directory on S3 itself, through Hadoop's S3A), streams
into (a batch's txn left open while Hive reads), merges and deletes in, and major-compacts as the metastore's
remote worker; Hive 4's reader reads exactly the committed rows at each step. Dropping the table through the
metastore deletes its files on S3, as Hive does for a managed table; replication, which needs a metastore of
acidstream's on either side, is refused by name.
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

from acidstream import Metastore, repl
from acidstream.errors import UnsupportedCapability
from acidstream.storage import table_filesystem
from hive4.judge import judge
from hive4.referee import Referee
from hive4.storecases import SALES_DDL, stream_with_an_open_txn
from support.deps import import_or_skip
from support.s3server import BUCKETS

pytestmark = pytest.mark.hive4

hms = import_or_skip("hive_metastore.ttypes", reason="the hive extra (pyiceberg[hive]) is not installed")


@pytest.fixture
def s3_database(hive4_metastore: str, s3_endpoint: str) -> Iterator[tuple[Metastore, str, str]]:
    """A connected Hive metastore with a database of the test's own at a new ``s3a://`` prefix (its location
    and managed location, as ``CREATE DATABASE ... LOCATION ... MANAGEDLOCATION`` sets them); the database
    name and location. The database is dropped, with its tables' data, at the end."""
    from acidstream.metastore.hive.transport import ThriftConnection

    db = f"s3{uuid.uuid4().hex[:10]}"
    location = f"s3a://{BUCKETS[0]}/{db}/{db}.db"
    raw = ThriftConnection(hive4_metastore)
    database = hms.Database(name=db, locationUri=location, managedLocationUri=location, parameters={})
    raw.call("create_database", lambda c: c.create_database(database), idempotent=False)
    with Metastore.connect(hive4_metastore) as ms:
        try:
            yield ms, db, location
        finally:
            ms.drop_database(db, cascade=True, if_exists=True)


def _keys(location: str) -> list[str]:
    """The object keys under ``location`` (an ``s3a://`` URI), relative to it."""
    filesystem, path = table_filesystem(location)
    found = filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=True))
    return sorted(i.path[len(path) + 1 :] for i in found if i.type is pafs.FileType.File)


def test_stream_merge_compact_and_drop_on_s3(
    s3_database: tuple[Metastore, str, str], hive4: Referee, tmp_path: Path
) -> None:
    ms, db, location = s3_database
    referee = hive4.on_s3(
        os.environ["AWS_ENDPOINT_URL"], os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    )
    table = f"{db}.sales"
    ms.execute(SALES_DDL.format(db=db))
    assert ms.table(table).location == f"{location}/sales"  # the metastore placed it, on S3

    committed = stream_with_an_open_txn(ms, referee, db)
    # the partitions the commits added were made by the metastore, on S3
    assert {p.location for p in ms.list_partitions(table)} == {
        f"{location}/sales/region=eu",
        f"{location}/sales/region=us",
    }

    ms.table(table).merge(
        pd.DataFrame({"id": [10, 99], "amount": [-1, 9900], "region": ["us", "eu"]}), on=["id"]
    )
    ms.table(table).delete(pc.field("id") == 21)
    committed |= {10: (10, -1, "us"), 99: (99, 9900, "eu")}
    del committed[21]
    judge(referee, ms, table, expected=committed.values())

    request = ms.compact(table, "region=eu", kind="major", wait=True)  # run here, as the metastore's worker
    assert ms.get_compaction(request).state == "ready for cleaning"  # Hive's cleaner takes it from here
    [base] = {k.split("/")[1] for k in _keys(f"{location}/sales") if re.match(r"region=eu/base_\d+_v\d+/", k)}
    eu = f"{location}/sales/region=eu"
    txns = ms.snapshot()
    assert referee.select(eu, ms.get_valid_write_ids(table, snapshot=txns), txns)[0] == base
    judge(referee, ms, table, expected=committed.values())

    with (
        Metastore.connect(f"sqlite:///{tmp_path / 'r.db'}", warehouse=tmp_path / "replica") as replica,
        pytest.raises(UnsupportedCapability),
    ):
        repl.sync(ms, replica)

    ms.drop_table(table)
    assert _keys(f"{location}/sales") == []  # the metastore deleted the managed table's files on S3
