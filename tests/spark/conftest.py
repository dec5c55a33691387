"""Fixtures for the Spark pipeline tests: the shared session with the format registered, and a table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acidstream.catalog import Metastore

ALERTS_DDL = (
    "CREATE TABLE testing.alerts (id int, msg string) PARTITIONED BY (continent string, country string) "
    "CLUSTERED BY (id) INTO 5 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
)


@pytest.fixture
def acid_spark(spark: Any) -> Any:
    from acidstream.spark import register

    return register(spark)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'metastore.db'}"


@pytest.fixture
def create_alerts(warehouse: Path) -> Callable[[str], Metastore]:
    """The demo table ``testing.alerts`` in a fresh metastore at the given URL."""

    def create(url: str) -> Metastore:
        metastore = Metastore.connect(url, warehouse=warehouse)
        metastore.execute("CREATE DATABASE testing")
        metastore.execute(ALERTS_DDL)
        return metastore

    return create


@pytest.fixture
def ms(sqlite_url: str, create_alerts: Callable[[str], Metastore]) -> Metastore:
    return create_alerts(sqlite_url)


@pytest.fixture
def opts(sqlite_url: str, warehouse: Path) -> dict[str, str]:
    return {"metastore": sqlite_url, "warehouse": str(warehouse)}
