"""The compactor suite's fixtures: a SQLite metastore with database ``db`` and a compactor that cleans at once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream import Metastore
from acidstream.compactor import Compactor, CompactorConfig

#: Clean as soon as no registered reader needs the old files (the retention delay is tested on its own).
CONFIG = CompactorConfig(retention=0.0, parallelism=2)


@pytest.fixture
def ms(tmp_path: Path, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE db")
        yield m


@pytest.fixture
def compactor(ms: Metastore) -> Compactor:
    return Compactor(ms, CONFIG)
