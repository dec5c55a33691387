"""Fixtures of the SQL suite: a catalog on each backend with an accounts table and a table of changes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlhelpers import ACCOUNTS, accounts_frame

from acidstream.catalog import Metastore


@pytest.fixture
def ms(metastore_url: str, warehouse: Path) -> Iterator[Metastore]:
    """``bank.accounts``: ids 0-9, partitioned by region, bucketed by id; ``bank.changes``: empty, int ids."""
    with Metastore.connect(metastore_url, warehouse=warehouse) as m:
        m.execute("CREATE DATABASE bank")
        m.execute(
            "CREATE TABLE bank.accounts (id bigint, name string, balance decimal(10,2), opened date) "
            "PARTITIONED BY (region string) CLUSTERED BY (id) INTO 4 BUCKETS STORED AS ORC "
            "TBLPROPERTIES ('transactional'='true')"
        )
        m.execute(
            "CREATE TABLE bank.changes (id int, name string, balance decimal(10,2), region string, op string) "
            "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        m.table(ACCOUNTS).merge(accounts_frame(range(10)), on=["id"])
        yield m
