"""Fixtures of the SQL suite: a catalog on each backend with an accounts table and a table of changes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from acidstream.catalog import Metastore

ACCOUNTS = "bank.accounts"
CHANGES = "bank.changes"


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


def accounts_frame(ids: Any) -> pd.DataFrame:
    ids = list(ids)
    return pd.DataFrame(
        {
            "id": ids,
            "name": [f"n{i}" for i in ids],
            "balance": [Decimal(i * 10) for i in ids],
            "opened": [dt.date(2024, 1, 1 + i) for i in ids],
            "region": ["EU" if i % 2 else "US" for i in ids],
        }
    )


def table_rows(ms: Metastore, name: str = ACCOUNTS) -> list[dict[str, Any]]:
    rows = ms.table(name).scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: r["id"])


def changes(ms: Metastore, rows: list[dict[str, Any]]) -> None:
    """Fill ``bank.changes`` (one txn)."""
    frame = pd.DataFrame(rows, columns=["id", "name", "balance", "region", "op"])
    frame["balance"] = [None if b is None else Decimal(str(b)) for b in frame["balance"]]
    ms.table(CHANGES).merge(frame.astype({"id": "int32"}), on=["id"])
