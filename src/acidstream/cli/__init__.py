"""The ``acidstream`` command.

Each public module of this package holds one command group and exposes ``register(cli)``; the root discovers
them, so adding a command never means editing this file (modules starting with ``_`` are helpers). Exit codes: 0 success, 1 runtime failure (typed acidstream
error, message on stderr), 2 usage error (click's own).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from acidstream.errors import StreamingException

EXIT_FAILURE = 1


class _Root(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except StreamingException as exc:
            click.echo(f"error: {type(exc).__name__}: {exc}", err=True)
            sys.exit(EXIT_FAILURE)


@click.group(cls=_Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="acidstream")
def cli() -> None:
    """Stream and mutate data into Hive 3 full-ACID tables, and read them back."""


def _register_commands() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(cli)


_register_commands()


def main() -> None:
    cli(prog_name="acidstream")
