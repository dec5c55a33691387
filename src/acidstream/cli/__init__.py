"""The ``acidstream`` command.

Each public module of this package holds one command group and exposes ``register(cli)``; the root discovers
them, so a new command group is a new module and never an edit here (modules starting with ``_`` are helpers).
Failures print ``error: <class>: <message>`` (plus what the command knows: where it looked, what was committed)
on stderr and exit with the code of :data:`EXIT_CODES_HELP`; SIGINT and SIGTERM abort what is open and exit
130 and 143 (:mod:`acidstream.cli._interrupt`).
"""

from __future__ import annotations

import importlib
import pkgutil
import signal
import sys

import click

from acidstream.cli._interrupt import exit_code as interrupted_exit_code
from acidstream.cli._interrupt import raise_on_signals, signal_of
from acidstream.cli._options import LOCATION_KEY, LOCATION_RULE, Location, root_options
from acidstream.errors import (
    AcidStreamError,
    AuthenticationError,
    CommitOutcomeUnknown,
    HeartBeatFailure,
    InvalidObjectException,
    InvalidOperationException,
    InvalidPartition,
    LockException,
    LockTimeoutException,
    MetaException,
    MetastoreUrlError,
    NoSuchTxnException,
    SerializationError,
    StorageUnavailable,
    StreamingConnectionError,
    StreamingIOFailure,
    TransactionError,
    TransactionException,
    TxnAbortedException,
    UnsupportedCapability,
)
from acidstream.runtime import configure

EXIT_FAILURE = 1
EXIT_USAGE = 2  # click's own code for bad options and arguments
EXIT_METASTORE = 4
EXIT_TRANSACTION = 6
EXIT_OUTCOME_UNKNOWN = 7
EXIT_AUTHENTICATION = 8
#: Most specific class first.
EXIT_CODES: list[tuple[type[AcidStreamError], int]] = [
    (AuthenticationError, EXIT_AUTHENTICATION),  # credentials missing or refused (Kerberos)
    (CommitOutcomeUnknown, EXIT_OUTCOME_UNKNOWN),  # a lost commit answer the metastore never settled
    (InvalidObjectException, EXIT_USAGE),  # a statement that does not parse or defines nothing valid
    (MetastoreUrlError, EXIT_USAGE),  # --metastore, ACIDSTREAM_METASTORE or acidstream.toml
    (InvalidPartition, EXIT_USAGE),  # a partition (--partition) that does not fit the table's keys
    (UnsupportedCapability, EXIT_USAGE),  # what this metastore does not do (housekeeper on a Hive Metastore)
    (InvalidOperationException, EXIT_USAGE),  # what it refuses as asked (DROP DATABASE of one with tables)
    (SerializationError, 3),
    (TxnAbortedException, EXIT_TRANSACTION),  # write conflicts included
    (NoSuchTxnException, EXIT_TRANSACTION),
    (LockTimeoutException, EXIT_TRANSACTION),
    (StreamingConnectionError, EXIT_METASTORE),
    (MetaException, EXIT_METASTORE),
    (StreamingIOFailure, 5),
    (StorageUnavailable, 5),  # a scan's listing or read failed
    (TransactionError, EXIT_TRANSACTION),
    (HeartBeatFailure, EXIT_TRANSACTION),
    (TransactionException, EXIT_TRANSACTION),
    (LockException, EXIT_TRANSACTION),
]
EXIT_CODES_HELP = """Exit codes: 0 success; 1 other error; 2 usage (bad option, argument, statement or acidstream.toml,
or what the metastore does not do or refuses as asked);
3 bad input records; 4 metastore (none found, unreachable, no such table or database); 5 storage I/O;
6 transaction failure (aborted, timed out, lock not acquired); 7 a commit's outcome unknown (its answer lost and
the metastore unreachable since: look up the txn it names before re-sending anything); 8 authentication
(no Kerberos ticket, a keytab or service principal refused: the message says what to do); 130/143 interrupted by
SIGINT/SIGTERM (what was open is aborted, what was committed stays)."""


def exit_code_for(exc: AcidStreamError) -> int:
    return next((code for cls, code in EXIT_CODES if isinstance(exc, cls)), EXIT_FAILURE)


class _Root(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except AcidStreamError as exc:
            click.echo(f"error: {type(exc).__name__}: {exc}", err=True)
            _echo_notes(exc)
            location = ctx.meta.get(LOCATION_KEY)
            code = exit_code_for(exc)
            if (code == EXIT_METASTORE or isinstance(exc, MetastoreUrlError)) and isinstance(
                location, Location
            ):
                click.echo(f"  looked in: {location.describe()}", err=True)
            sys.exit(code)
        except KeyboardInterrupt as exc:  # SIGINT or SIGTERM (raise_on_signals)
            click.echo(f"interrupted by {signal.Signals(signal_of(exc)).name}", err=True)
            _echo_notes(exc)
            sys.exit(interrupted_exit_code(exc))


def _echo_notes(exc: BaseException) -> None:
    """What the command added to the error: what was committed, how to go on."""
    for note in getattr(exc, "__notes__", ()):
        click.echo(f"  {note}", err=True)


@click.group(
    cls=_Root,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=f"{LOCATION_RULE}\n\n{EXIT_CODES_HELP}",
)
@click.version_option(package_name="acidstream")
@root_options
def cli() -> None:
    """Stream data into Hive 3 full-ACID tables, read them back, and administer their metastore.

    Every command has --help. --metastore and --warehouse go before the command or after it.
    """
    configure()  # the command's process works for acidstream: tune it


def _register_commands() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(cli)


_register_commands()


def main() -> None:
    raise_on_signals()  # the command's own process only: the library leaves signals to its user
    cli(prog_name="acidstream")
