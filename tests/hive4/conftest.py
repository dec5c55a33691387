"""Hive 4 for the hive4 tests: Hive's jars (``scripts/hive.sh fetch``), one referee JVM, one streaming client
JVM and one standalone Hive Metastore per test session, each started only when a test asks for it.

Without Java, Maven or the jars the tests fail under CI (``CI`` set) and skip elsewhere, saying why.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive4.referee import HiveUnavailable, Referee, Streamer, hive_sh


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"Hive 4 is unavailable under CI: {reason}")
    pytest.skip(f"Hive 4 is unavailable (bash scripts/hive.sh fetch): {reason}")


@pytest.fixture(scope="session")
def hive4_home() -> Path:
    """The cache directory with Hive's jars and our driver classes (fetched once, a no-op when up to date)."""
    try:
        return Path(hive_sh("fetch"))
    except HiveUnavailable as exc:
        _unavailable(str(exc))
        raise


@pytest.fixture(scope="session")
def hive4(hive4_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Referee]:
    """Hive 4's ACID reader and record writer, one JVM for the test session."""
    log = tmp_path_factory.mktemp("hive4-referee") / "referee.log"
    try:
        referee = Referee(hive4_home, log)
    except (OSError, RuntimeError) as exc:
        _unavailable(f"{exc} (log: {log})")
        raise
    yield referee
    referee.close()


@pytest.fixture(scope="session")
def hive4_metastore(hive4_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone Hive Metastore with ACID on, on a loopback port: its ``thrift://`` URI."""
    state = tmp_path_factory.mktemp("hive4-metastore")
    try:
        uri = hive_sh("start", str(state))
    except HiveUnavailable as exc:
        _unavailable(str(exc))
        raise
    yield uri
    hive_sh("stop", str(state))


@pytest.fixture(scope="session")
def hive4_streamer(hive4_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Streamer]:
    """Hive's streaming client (Hive 3.1.3's: Hive 4 publishes none), one JVM for the test session."""
    log = tmp_path_factory.mktemp("hive4-streamer") / "streamer.log"
    streamer = Streamer(hive4_home, log)
    yield streamer
    streamer.close()
