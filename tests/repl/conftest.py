"""Replication tests: a source and a replica on different metastore backends and warehouse roots."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream.catalog import Metastore

PG_URL = os.environ.get("ACIDSTREAM_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _pg_available() -> bool:
    import psycopg

    try:
        with psycopg.connect(PG_URL, connect_timeout=3):
            return True
    except Exception:
        return False


@pytest.fixture
def replica_url(metastore_url: str, tmp_path: Path) -> Iterator[str]:
    """The replica's metastore on the other backend: PostgreSQL for a SQLite source and the reverse (SQLite when
    no PostgreSQL server answers)."""
    if metastore_url.startswith("postgresql") or not _pg_available():
        yield f"sqlite:///{tmp_path / 'replica.db'}"
        return
    import psycopg

    schema = f"r_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def source(metastore_url: str, tmp_path: Path) -> Iterator[Metastore]:
    with Metastore.connect(metastore_url, warehouse=tmp_path / "source-wh") as ms:
        yield ms


@pytest.fixture
def replica(replica_url: str, tmp_path: Path) -> Iterator[Metastore]:
    with Metastore.connect(replica_url, warehouse=tmp_path / "replica-wh") as ms:
        yield ms
