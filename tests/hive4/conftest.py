"""Hive 4 for the hive4 tests: one streaming client JVM per test session, started only when a test asks for it
(Hive's jars, its standalone metastore and the referee are fixtures of the whole suite: conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hive4.referee import Streamer


@pytest.fixture(scope="session")
def hive4_streamer(hive4_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Streamer]:
    """Hive's streaming client (Hive 3.1.3's: Hive 4 publishes none), one JVM for the test session."""
    log = tmp_path_factory.mktemp("hive4-streamer") / "streamer.log"
    streamer = Streamer(hive4_home, log)
    yield streamer
    streamer.close()


@pytest.fixture
def no_ticket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty ticket cache of the test's own as the default one."""
    ccache = tmp_path / "krb5cc"
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    return ccache
