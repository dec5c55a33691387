"""Hive 4 for the hive4 tests: one referee JVM and one streaming client JVM per test session, each started only
when a test asks for it (Hive's jars and its standalone metastore are fixtures of the whole suite: conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hive4.referee import Referee, Streamer
from support.backends import hive_unavailable


@pytest.fixture(scope="session")
def hive4(hive4_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Referee]:
    """Hive 4's ACID reader and record writer, one JVM for the test session."""
    log = tmp_path_factory.mktemp("hive4-referee") / "referee.log"
    try:
        referee = Referee(hive4_home, log)
    except (OSError, RuntimeError) as exc:
        hive_unavailable(f"{exc} (log: {log})")
        raise
    yield referee
    referee.close()


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
