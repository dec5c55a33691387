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

from acidstream import Metastore
from acidstream.storage import table_filesystem
from hive4.judge import judge
from hive4.referee import Referee
from hive4.storecases import SALES_DDL, hive_writes_into_ours, stream_with_an_open_txn
from support.s3server import BUCKETS

pytestmark = pytest.mark.hive4


@pytest.fixture
def on_s3(hive4: Referee, s3_endpoint: str, tmp_path: Path) -> Iterator[tuple[Metastore, Referee]]:
    """A SQLite metastore whose warehouse is a new ``s3a://`` prefix of the session's S3 server, and the referee
    reading and writing there with the keys the server's AWS environment holds."""
    referee = hive4.on_s3(s3_endpoint, os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
    warehouse = f"s3a://{BUCKETS[0]}/{uuid.uuid4().hex[:12]}/wh"
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=warehouse) as ms:
        yield ms, referee


def test_hive_reads_what_we_stream_merge_and_compact(on_s3: tuple[Metastore, Referee]) -> None:
    ms, referee = on_s3
    ms.execute(SALES_DDL.format(db="default"))
    committed = stream_with_an_open_txn(ms, referee, "default")
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
    """Hive's writer, through S3A: :func:`hive_writes_into_ours`."""
    hive_writes_into_ours(*on_s3)
