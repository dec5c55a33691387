"""Every command and command group answers --help; the root's states the location rule and the exit codes."""

from __future__ import annotations

from collections.abc import Iterator

import click
from click.testing import CliRunner

from acidstream.cli import cli


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in group.commands.items():
        yield (*prefix, name)
        if isinstance(command, click.Group):
            yield from command_paths(command, (*prefix, name))


def test_every_command_has_help() -> None:
    paths = list(command_paths(cli))
    assert {("stream",), ("cat",), ("show", "txns"), ("metastore", "init"), ("spark-shell",)} <= set(paths)
    for path in paths:
        result = CliRunner().invoke(cli, [*path, "--help"])
        assert result.exit_code == 0 and f"Usage: cli {' '.join(path)}" in result.stdout, path


def test_root_help_states_where_the_metastore_is_and_the_exit_codes() -> None:
    text = " ".join(CliRunner().invoke(cli, ["--help"]).stdout.split())
    assert "the nearest acidstream.toml in the current directory or a parent" in text
    assert "Exit codes: 0 success; 1 other error; 2 usage" in text
