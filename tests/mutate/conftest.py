"""Fixtures of the mutation suite: a catalog on each backend with Hive's test tables (TestMutations)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream.catalog import Metastore


@pytest.fixture
def ms(metastore_url: str, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(metastore_url, warehouse=warehouse) as m:
        m.execute("CREATE DATABASE testing")
        m.execute(
            "CREATE TABLE testing.partitioned (id int, msg string) PARTITIONED BY (continent string, country string) "
            "CLUSTERED BY (id) INTO 4 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        m.execute(
            "CREATE TABLE testing.unpartitioned (id int, msg string) CLUSTERED BY (id) INTO 2 BUCKETS "
            "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        yield m
