"""The reader suite's metastore fixture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream import Metastore


@pytest.fixture
def ms(tmp_path: Path, warehouse: Path) -> Iterator[Metastore]:
    """A SQLite metastore with database ``db`` (backend-specific behaviour is the metastore suite's job)."""
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE db")
        yield m
