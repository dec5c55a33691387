"""Where the suite's metastores come from: fresh SQL metastore databases, and what to do when Hive 4 is missing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


def is_hive(ms: Any) -> bool:
    """Whether a connected metastore is a Hive Metastore (thrift), whose ids and listings the session shares."""
    return bool(ms.url.startswith("thrift://"))


def check_lock(ms: Any, lock_id: int) -> Any:
    """A waiting lock's state after checking it again (which is what acquires it once its blockers are gone):
    the SQL backend's ``check_lock``, Hive's thrift ``check_lock`` (no façade call: a caller waits in ``lock``)."""
    if not is_hive(ms):
        return ms.backend.check_lock(lock_id)
    from hive_metastore import ttypes

    from acidstream.metastore.hive.client import _LOCK_STATES

    return _LOCK_STATES[ms.backend._call("check_lock", ttypes.CheckLockRequest(lockid=lock_id)).state]
