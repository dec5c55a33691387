"""Replication tests: a source and a replica on different metastore backends and warehouse roots."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream.catalog import Metastore
from support.pgschema import pg_schema, pg_unavailable_reason


@pytest.fixture
def replica_url(metastore_url: str, tmp_path: Path) -> Iterator[str]:
    """The replica's metastore on the other backend: PostgreSQL for a SQLite source and the reverse (SQLite when
    no PostgreSQL server answers)."""
    if metastore_url.startswith("postgresql") or pg_unavailable_reason() is not None:
        yield f"sqlite:///{tmp_path / 'replica.db'}"
        return
    with pg_schema("r") as url:
        yield url


@pytest.fixture
def source(metastore_url: str, tmp_path: Path) -> Iterator[Metastore]:
    with Metastore.connect(metastore_url, warehouse=tmp_path / "source-wh") as ms:
        yield ms


@pytest.fixture
def replica(replica_url: str, tmp_path: Path) -> Iterator[Metastore]:
    with Metastore.connect(replica_url, warehouse=tmp_path / "replica-wh") as ms:
        yield ms
