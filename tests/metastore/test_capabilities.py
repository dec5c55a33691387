"""Capabilities tell the truth: every ``UnsupportedCapability`` a backend raises names a capability that backend
declares missing, every declared capability is raised or asked about somewhere, and a backend that lacks
nothing raises none."""

from __future__ import annotations

import ast
from pathlib import Path

import acidstream
from acidstream.metastore.backend import Capability
from acidstream.metastore.hive.client import HiveMetastoreClient
from acidstream.metastore.sql.client import MetastoreClient

PACKAGE = Path(acidstream.__file__).parent
#: Each backend's folder and its class.
BACKENDS = {"metastore/sql": MetastoreClient, "metastore/hive": HiveMetastoreClient}


def _capabilities_in(tree: ast.AST, calls: tuple[str, ...]) -> set[str]:
    """The ``Capability.X`` names inside calls of ``calls`` in a module: ``unsupported(Capability.X, ...)``,
    ``UnsupportedCapability(call, Capability.X.name, ...)``, ``ms.supports(Capability.X)``."""
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if func not in calls:
            continue
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "Capability"
            ):
                found.add(sub.attr)
    return found


RAISING = ("unsupported", "UnsupportedCapability")


def _raised_by(folder: str) -> set[str]:
    names: set[str] = set()
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        names |= _capabilities_in(ast.parse(path.read_text(), str(path)), RAISING)
    return names


def test_every_unsupported_capability_raised_is_declared_missing() -> None:
    for folder, backend in BACKENDS.items():
        declared = {c.name for c in backend.missing}
        assert _raised_by(folder) <= declared, (backend.__name__, _raised_by(folder) - declared)


def test_the_sql_metastore_lacks_nothing_and_raises_no_unsupported_capability() -> None:
    assert MetastoreClient.missing == frozenset()
    assert _raised_by("metastore/sql") == set()


def test_every_capability_is_raised_or_asked_about() -> None:
    """A capability no backend raises and no caller asks about (``supports``) says nothing: it goes."""
    used: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        used |= _capabilities_in(ast.parse(path.read_text(), str(path)), (*RAISING, "supports"))
    assert {c.name for c in Capability} <= used
