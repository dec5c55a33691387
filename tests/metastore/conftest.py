"""Fixtures of the metastore suite: a connected metastore on each backend with one full-ACID table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream.metastore import MetastoreFacade

ACID = {"transactional": "true"}


@pytest.fixture
def ms(metastore_url: str, warehouse: Path) -> Iterator[MetastoreFacade]:
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse, lock_wait_timeout=2.0) as m:
        m.execute("CREATE DATABASE db")
        m.execute(
            "CREATE TABLE db.t (id int, msg string) PARTITIONED BY (ds string) "
            "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        m.execute("CREATE TABLE db.u (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
        yield m
