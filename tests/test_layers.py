"""The house rules of the package's layout: each package imports only from its own layer or the layers below,
pyspark only under ``acidstream/spark/`` (and the command line starts without it), and only
``acidstream/runtime.py`` changes process-wide settings."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import acidstream

PACKAGE = Path(acidstream.__file__).parent

#: Lower numbers are lower layers (docs/design.md). The modules at the top of the package are used everywhere.
LAYERS = {
    "errors": 0,
    "faults": 0,
    "runtime": 0,
    "storage": 0,
    "acid": 1,
    "metastore": 2,
    "read": 3,
    "streaming": 3,
    "txn": 3,
    "mutate": 4,
    "compactor": 4,
    "repl": 4,
    "sql": 4,
    "catalog": 5,
    "spark": 6,
    "cli": 7,
}
#: Known upward imports, each with its reason; the test fails if one disappears, so the list stays true.
UPWARD = {
    ("mutate", "catalog"): "the mutation builders connect the catalog's Metastore when given a URL",
    ("sql", "catalog"): "DELETE/UPDATE/MERGE run on the catalog's tables, whose handles scan",
}
#: Calls that change the whole process: the interpreter, the C library, resource limits.
PROCESS_WIDE = {"setswitchinterval", "setrlimit", "mallopt"}


def _unit(module: str) -> str:
    """The package (or top-level module) of ``acidstream.x.y``; ``acidstream`` itself for the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "acidstream"


def _sources() -> list[tuple[str, Path, ast.AST]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        unit = rel.parts[0].removesuffix(".py") if rel.parts[0] != "__init__.py" else "acidstream"
        out.append((unit, path, ast.parse(path.read_text(), str(path))))
    return out


def _imported(tree: ast.AST) -> list[tuple[str, int]]:
    """Every module an ``import`` names, anywhere in the file (type-only and deferred imports included)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "acidstream":
                found += [(f"acidstream.{a.name}", node.lineno) for a in node.names]
            else:
                found.append((node.module, node.lineno))
    return found


def test_packages_import_only_their_own_layer_or_below() -> None:
    upward: dict[tuple[str, str], list[str]] = {}
    for unit, path, tree in _sources():
        if unit == "acidstream":
            continue
        for module, line in _imported(tree):
            target = _unit(module) if module.startswith("acidstream.") else None
            if target is None or target == unit or target == "acidstream":
                continue
            assert unit in LAYERS and target in LAYERS, f"{path}:{line}: {unit} or {target} has no layer"
            if LAYERS[target] > LAYERS[unit]:
                upward.setdefault((unit, target), []).append(f"{path.relative_to(PACKAGE)}:{line}")
    assert set(upward) == set(UPWARD), {k: v for k, v in upward.items() if k not in UPWARD}


def test_acid_and_metastore_never_change_process_wide_settings() -> None:
    offenders = []
    for unit, path, tree in _sources():
        for node in ast.walk(tree):
            name = (
                node.attr
                if isinstance(node, ast.Attribute)
                else node.id
                if isinstance(node, ast.Name)
                else None
            )
            if name in PROCESS_WIDE and unit != "runtime":
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}")
        if unit in ("acid", "metastore"):
            offenders += [
                f"{path.relative_to(PACKAGE)}:{line} imports {module}"
                for module, line in _imported(tree)
                if module.split(".")[0] in ("resource", "ctypes")
            ]
    assert offenders == []
    runtime = ast.parse((PACKAGE / "runtime.py").read_text())
    assert {
        n.attr for n in ast.walk(runtime) if isinstance(n, ast.Attribute)
    } >= PROCESS_WIDE  # the check sees them


def pyspark_imports(path: Path) -> list[int]:
    return [
        line
        for module, line in _imported(ast.parse(path.read_text(), str(path)))
        if module.split(".")[0] == "pyspark"
    ]


def test_only_the_spark_package_imports_pyspark() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): lines
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] != "spark" and (lines := pyspark_imports(path))
    }
    assert offenders == {}
    assert pyspark_imports(PACKAGE / "spark" / "session.py")  # the check finds what is there


def test_the_command_line_starts_without_pyspark() -> None:
    code = "import sys, acidstream.cli; sys.exit('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
