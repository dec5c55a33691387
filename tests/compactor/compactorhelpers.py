"""Helpers of the compactor suite: what a table looks like on disk and to a reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acidstream import Metastore
from read.readhelpers import row_id


def dirs(ms: Metastore, table: str, partition: str | None = None) -> list[str]:
    """The visible (not hidden) children of a table or partition directory."""
    location = Path(ms.table(table).location) / (partition or "")
    return sorted(p.name for p in location.iterdir() if not p.name.startswith(("_", ".")))


def hidden(ms: Metastore, table: str, partition: str | None = None) -> list[str]:
    location = Path(ms.table(table).location) / (partition or "")
    return sorted(p.name for p in location.iterdir() if p.name.startswith("_"))


def rows_with_ids(ms: Metastore, table: str, **kw: Any) -> list[tuple[tuple[int, int, int], tuple[Any, ...]]]:
    """Every visible row with its ROW__ID, sorted: the reader's whole view of the table."""
    out = []
    for r in ms.table(table).scan(with_row_id=True, **kw).to_arrow().to_pylist():
        rid = row_id(r)
        del r["ROW__ID"]
        out.append((rid, tuple(r.values())))
    return sorted(out, key=repr)
