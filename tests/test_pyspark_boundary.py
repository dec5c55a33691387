"""pyspark is imported only under ``acidstream/spark/``, and the command line starts without it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import acidstream

PACKAGE = Path(acidstream.__file__).parent


def pyspark_imports(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        lines += [node.lineno for name in names if name.split(".")[0] == "pyspark"]
    return lines


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
