"""The merge suites' table (``id bigint, name string, score double``, partitioned by ``p``, 4 buckets by id) and
its rows as pandas frames, shared by the Python and the Spark merge tests."""

from __future__ import annotations

from typing import Any

import pandas as pd

COLUMNS = ["id", "name", "score", "p"]
ACCOUNTS_DDL = (
    "CREATE TABLE {} (id bigint, name string, score double) PARTITIONED BY (p string) "
    "CLUSTERED BY (id) INTO 4 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
)


def frame(ids: list[int], tag: str, parts: list[str] | None = None) -> pd.DataFrame:
    """Rows ``id``, name ``<tag><id>``, score ``1.5 * id``, partition ``p<id % 3>`` unless given."""
    return pd.DataFrame(
        {
            "id": ids,
            "name": [f"{tag}{i}" for i in ids],
            "score": [float(i) * 1.5 for i in ids],
            "p": parts if parts is not None else [f"p{i % 3}" for i in ids],
        }
    )


def table_frame(ms: Any, name: str) -> pd.DataFrame:
    """The table's visible rows, sorted by id."""
    df = ms.table(name).scan(columns=COLUMNS).to_pandas()
    return df.sort_values("id").reset_index(drop=True)
