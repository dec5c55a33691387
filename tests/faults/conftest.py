"""The fault-injection suite: faults injected for real, Hive's guarantees checked after each.

Every test here is marked ``faults`` (select the suite alone with ``pytest -m faults``) and bounded in time;
the whole suite runs in well under 3 minutes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.faultinjection import can_mount_tmpfs, unmount_leftovers

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)


@pytest.fixture(scope="session", autouse=True)
def no_tmpfs_left_mounted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each tmpfs is unmounted by the block that mounted it; this catches an interrupted session."""
    yield
    if can_mount_tmpfs():
        unmount_leftovers(tmp_path_factory.getbasetemp())
