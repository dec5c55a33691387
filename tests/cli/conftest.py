"""The CLI suite's runner: invoke ``acidstream`` in-process with the test warehouse and its default metastore."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from acidstream.cli import cli

#: ``run(*args)`` → (exit code, stdout, stderr)
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    """Invoke the CLI with the test warehouse (and its default SQLite metastore) from the environment, in a
    directory of its own (``metastore init`` writes acidstream.toml there)."""
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()

    def invoke(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(
            cli, list(args), env={"ACIDSTREAM_WAREHOUSE": str(warehouse), "ACIDSTREAM_METASTORE": ""}
        )
        return result.exit_code, result.stdout, result.stderr

    return invoke
