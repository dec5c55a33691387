"""The ``acidstream`` command.

Each public module of this package holds one command group and exposes ``register(cli)``; the root discovers
them, so adding a command never means editing this file (modules starting with ``_`` are helpers). Exit codes say what failed: 0 success,
1 other acidstream error, 2 usage error (click's own), 3 bad input records, 4 metastore or connection problem,
5 storage I/O failure, 6 transaction failure (aborted, timed out, lock not acquired); the message goes to stderr.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from acidstream.errors import (
    ConnectionError,
    MetaException,
    SerializationError,
    StreamingException,
    StreamingIOFailure,
    TransactionError,
)

EXIT_FAILURE = 1
#: Most specific class first.
EXIT_CODES: list[tuple[type[StreamingException], int]] = [
    (SerializationError, 3),
    (ConnectionError, 4),
    (MetaException, 4),
    (StreamingIOFailure, 5),
    (TransactionError, 6),
]


def exit_code_for(exc: StreamingException) -> int:
    return next((code for cls, code in EXIT_CODES if isinstance(exc, cls)), EXIT_FAILURE)


class _Root(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except StreamingException as exc:
            click.echo(f"error: {type(exc).__name__}: {exc}", err=True)
            sys.exit(exit_code_for(exc))


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
