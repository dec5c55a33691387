"""Tables and rows the SQL tests share (constants and helpers; the fixtures are in conftest.py)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pandas as pd
import pyarrow as pa

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.catalog import Metastore

ACCOUNTS = "bank.accounts"
CHANGES = "bank.changes"


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


CHANGES_SCHEMA = pa.schema(
    {
        "id": pa.int32(),
        "name": pa.string(),
        "balance": pa.decimal128(10, 2),
        "region": pa.string(),
        "op": pa.string(),
    }
)


def changes(ms: Metastore, rows: list[dict[str, Any]]) -> None:
    """Fill ``bank.changes`` (one streamed txn: rows may repeat an id, which a merge by key refuses)."""
    data = pa.Table.from_pylist(
        [{**r, "balance": None if r["balance"] is None else Decimal(str(r["balance"]))} for r in rows],
        schema=CHANGES_SCHEMA,
    )
    with (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("bank")
        .with_table("changes")
        .with_record_writer(StrictDelimitedInputWriter.builder().build())
        .connect()
    ) as conn:
        conn.begin_transaction()
        conn.write_batch(data)
        conn.commit_transaction()


def java_int(value: int, bits: int = 32) -> int:
    """``value`` wrapped around into a signed integer of ``bits`` bits, as Java's arithmetic and casts do."""
    half = 1 << (bits - 1)
    return (value + half) % (2 * half) - half
