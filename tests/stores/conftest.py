"""Warehouses on an object store: the session's S3 server (``s3_endpoint``, tests/conftest.py) and a fresh
``s3://`` warehouse for each test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream import Metastore
from support.s3server import BUCKETS

BUCKET = BUCKETS[0]


@pytest.fixture
def s3_warehouse(s3_endpoint: str) -> str:
    return f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}/wh"


@pytest.fixture
def s3_ms(metastore_url: str, s3_warehouse: str) -> Iterator[Metastore]:
    """A metastore (SQLite and PostgreSQL) whose warehouse is on the S3 server."""
    with Metastore.connect(metastore_url, warehouse=s3_warehouse) as ms:
        yield ms


@pytest.fixture
def local_ms(tmp_path: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{tmp_path / 'local.db'}", warehouse=tmp_path / "local-wh") as ms:
        yield ms
