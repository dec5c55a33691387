"""Optional test dependencies: missing, a test skips on a developer's machine and fails under CI (``CI`` set),
where every dependency of the dev extra is installed, as PostgreSQL, Hive 4 and HDFS fail there when absent."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def import_or_skip(name: str, reason: str | None = None) -> ModuleType:
    """``pytest.importorskip(name)``, except under CI, where a missing module fails the test."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is missing under CI, where the dev extra installs it: {exc}", pytrace=False)
        pytest.skip(reason or f"{name} is not installed: {exc}", allow_module_level=True)
