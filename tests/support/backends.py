"""Where the suite's metastores come from: fresh SQL metastore databases, and what to do when Hive 4 is missing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.pgschema import pg_schema, pg_unavailable_reason

_PG_SKIP = pg_unavailable_reason()


@contextmanager
def sql_metastore_url(kind: str, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty ``sqlite`` or ``postgresql`` metastore database URL (PostgreSQL unreachable: fails under
    CI, skips elsewhere)."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'metastore.db'}"
        return
    if _PG_SKIP is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{_PG_SKIP} (CI starts it through scripts/test.sh)")
        pytest.skip(_PG_SKIP)
    with pg_schema() as url:
        yield url


def hive_unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"Hive 4 is unavailable under CI: {reason}")
    pytest.skip(f"Hive 4 is unavailable (bash scripts/hive.sh fetch): {reason}")
