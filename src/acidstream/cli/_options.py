"""Where the metastore and the warehouse are, the same way for every command.

The rule (``acidstream --help`` prints :data:`LOCATION_RULE`): ``--metastore``/``--warehouse``, then the
environment; if neither names either, the nearest ``acidstream.toml`` in the current directory or a parent
(as git finds its repository); without one, ``./wh``. A metastore left unset is the SQLite file
``metastore.db`` in the warehouse. Commands that only read never create a metastore: they open an existing one
(:func:`open_metastore`) and say where they looked when it is not there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import threading
import tomllib
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource

from acidstream.errors import NoSuchObjectException
from acidstream.metastore.hive_settings import HIVE_SETTINGS, SECRET_SETTINGS
from acidstream.metastore.location import (
    DEFAULT_WAREHOUSE,
    ENV_METASTORE,
    ENV_WAREHOUSE,
    backend_kind,
    default_metastore_url,
    scheme,
)

if TYPE_CHECKING:
    from acidstream.catalog import Metastore

F = TypeVar("F", bound=Callable[..., Any])

CONFIG_FILE = "acidstream.toml"
#: Seconds a metastore may take to answer before the command says it is waiting for it.
SLOW_CONNECT = 1.0
#: Key of the resolved :class:`Location` in ``click.Context.meta`` (errors name it).
LOCATION_KEY = "acidstream.location"

LOCATION_RULE = f"""Which metastore and warehouse: --metastore/--warehouse, else {ENV_METASTORE}/{ENV_WAREHOUSE};
if neither names either, the nearest {CONFIG_FILE} in the current directory or a parent (`metastore init`
writes one; keys `warehouse` and `metastore`, paths relative to the file); else ./wh. An unset metastore is
the SQLite file metastore.db in the warehouse. Only `metastore init`, `main-job` and, on the replica's side,
`repl load` and `repl sync` create a metastore. The nearest {CONFIG_FILE}'s [s3] and [hdfs] tables say how
every command reaches S3 and HDFS, in place of the environment (docs/cli.md)."""


@dataclass(frozen=True)
class Location:
    """A resolved metastore URL and warehouse, and where they came from (for messages)."""

    metastore: str
    warehouse: str
    source: str
    #: the acidstream.toml they came from, if they did
    config_file: str | None = None
    #: that file's ``[s3]`` and ``[hdfs]`` tables, checked (``acidstream.storage.configure_stores``'s arguments)
    stores: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    #: that file's ``[hive]`` table: ``Metastore.connect``'s options for a Hive Metastore (Kerberos)
    hive: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def describe(self) -> str:
        return f"metastore {shown_url(self.metastore)}, warehouse {self.warehouse} (from {self.source})"


def shown_url(url: str) -> str:
    """``url`` with its password, if any, masked: messages and logs show where, never the secret."""
    return _PASSWORD.sub(r"\1***@", url)


_PASSWORD = re.compile(r"(://[^/:@]*:)[^@/]*@")


class ConfigFileError(click.ClickException):
    """An ``acidstream.toml`` that cannot be used: a usage error (exit 2) naming the file."""

    exit_code = 2


def _absolute(path: str, base: str) -> str:
    """A local path made absolute against ``base``; URIs (``s3://...``) as given."""
    return path if "://" in path else os.path.normpath(os.path.join(base, os.path.expanduser(path)))


def _sqlite_against(url: str, base: str) -> str:
    """A relative ``sqlite:///path`` made absolute against ``base``; other URLs as given."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/"):
        return prefix + _absolute(url[len(prefix) :], base)
    return url


def find_config(start: str) -> str | None:
    """The nearest ``acidstream.toml`` in ``start`` or one of its parents."""
    directory = os.path.abspath(start)
    while True:
        candidate = os.path.join(directory, CONFIG_FILE)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def read_config(path: str) -> Location:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigFileError(f"{path}: {exc}") from exc
    unknown = sorted(set(data) - {"metastore", "warehouse", *STORE_TABLES, HIVE_TABLE})
    if unknown:
        raise ConfigFileError(
            f"{path}: unknown key(s) {', '.join(unknown)} (known: metastore, warehouse, [s3], [hdfs], [hive])"
        )
    for key, value in data.items():
        if key in (*STORE_TABLES, HIVE_TABLE):
            if not isinstance(value, dict):
                raise ConfigFileError(f"{path}: {key} must be a table ([{key}])")
        elif not isinstance(value, str) or not value:
            raise ConfigFileError(f"{path}: {key} must be a non-empty string")
    base = os.path.dirname(path)
    warehouse = _absolute(data.get("warehouse", DEFAULT_WAREHOUSE), base)
    metastore = data.get("metastore")
    url = _sqlite_against(metastore, base) if metastore else default_metastore_url(warehouse)
    hive = _hive_settings(path, data.get(HIVE_TABLE, {}))
    return Location(url, warehouse, path, config_file=path, stores=_store_settings(path, data), hive=hive)


#: The table of ``acidstream.toml`` that says how to reach a Hive Metastore: ``Metastore.connect``'s Kerberos
#: options (docs/hive.md).
HIVE_TABLE = "hive"
_HIVE_KEYS = HIVE_SETTINGS
#: What each ``[hive]`` key is, for the command line's help (``--kerberos-principal`` and so on).
_HIVE_HELP = {
    "kerberos": "Kerberos (SASL/GSSAPI) to a Hive Metastore with the ticket cache kinit filled.",
    "kerberos_service_principal": "The metastore's Kerberos principal (its metastore.kerberos.principal; "
    "_HOST is each metastore's host).  [default: hive/_HOST]",
    "kerberos_principal": "Your Kerberos principal (with --kerberos-keytab: log in from the keytab).",
    "kerberos_keytab": "A keytab of --kerberos-principal (in place of the ticket cache).",
    "kerberos_qop": "The SASL protection the metastore's hadoop.rpc.protection asks for: auth, auth-int, "
    "auth-conf (or authentication, integrity, privacy).  [default: auth]",
    "ssl_enabled": "TLS to a Hive Metastore (its metastore.use.SSL), verifying its certificate.",
    "ssl_ca_file": "The CA file (PEM) the metastore's certificate is checked against (implies TLS).  "
    "[default: the system's CAs]",
    "auth_mode": "How to authenticate to a Hive Metastore (Hive's metastore.client.auth.mode): NOSASL, "
    "KERBEROS, or PLAIN (a user and password; the password in acidstream.toml's [hive] only).",
    "plain_user": "The user name of SASL PLAIN (auth_mode PLAIN; Hive's metastore.client.plain.username).",
    "allow_plain_without_tls": "Send SASL PLAIN's password without TLS (on a network you trust).",
    "uri_selection": "The order a list of metastores (thrift://h1:9083,thrift://h2:9083) is tried in: random "
    "(shuffled, Hive's default) or sequential.",
}


def _hive_settings(path: str, table: Mapping[str, Any]) -> dict[str, Any]:
    """The file's ``[hive]`` table, checked: ``Metastore.connect`` keywords, a keytab's path made absolute."""
    settings: dict[str, Any] = {}
    for key, value in table.items():
        kind = _HIVE_KEYS.get(key)
        if kind is None:
            raise ConfigFileError(f"{path}: unknown key [hive] {key} (known: {', '.join(_HIVE_KEYS)})")
        if not isinstance(value, kind) or value == "":
            raise ConfigFileError(f"{path}: [hive] {key} must be a {'boolean' if kind is bool else 'string'}")
        settings[key] = (
            _absolute(str(value), os.path.dirname(path))
            if key in ("kerberos_keytab", "ssl_ca_file")
            else value
        )
    return settings


#: The tables of ``acidstream.toml`` that say how to reach the stores.
STORE_TABLES = ("s3", "hdfs")


def _store_settings(path: str, data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The file's ``[s3]`` and ``[hdfs]`` tables, checked as ``configure_stores`` checks them (pyarrow loads
    here, not at import: ``acidstream --help`` stays quick)."""
    from acidstream.errors import StorageLocationError
    from acidstream.storage import store_settings

    if not any(table in data for table in STORE_TABLES):
        return {}
    try:
        return store_settings(s3=data.get("s3"), hdfs=data.get("hdfs"))
    except StorageLocationError as exc:
        raise ConfigFileError(f"{path}: {exc}") from exc


@contextlib.contextmanager
def _stores_configured(location: Location) -> Iterator[None]:
    """The stores as the nearest ``acidstream.toml`` says, whichever way the metastore and warehouse were
    chosen, while the command runs (the command line owns its process; the settings it replaced come back
    after, for callers that run it in theirs)."""
    if location.config_file:
        stores = location.stores
    else:
        config = find_config(os.getcwd())
        stores = read_config(config).stores if config else {}
    if not stores:
        yield
        return
    from acidstream.storage import configure_stores

    previous = configure_stores(**stores)
    try:
        yield
    finally:
        configure_stores(**previous)


def resolve_location(
    ctx: click.Context, metastore: str | None, warehouse: str | None, before: Collection[str] = ()
) -> Location:
    """Apply :data:`LOCATION_RULE` to the command's ``--metastore``/``--warehouse`` values (``before``: the
    names whose value was given before the command, ``acidstream --metastore URL show tables``)."""
    explicit = [name for name, value in (("metastore", metastore), ("warehouse", warehouse)) if value]
    if explicit:
        sources = " and ".join(_option_source(ctx, name, before) for name in explicit)
        wh = _absolute(warehouse or DEFAULT_WAREHOUSE, os.getcwd())
        url = _sqlite_against(metastore, os.getcwd()) if metastore else default_metastore_url(wh)
        return Location(url, wh, sources)
    config = find_config(os.getcwd())
    if config is not None:
        return read_config(config)
    wh = _absolute(DEFAULT_WAREHOUSE, os.getcwd())
    return Location(
        default_metastore_url(wh), wh, f"the default: no {CONFIG_FILE} in {os.getcwd()} or a parent"
    )


def _option_source(ctx: click.Context, name: str, before: Collection[str]) -> str:
    if name not in before and ctx.get_parameter_source(name) is ParameterSource.ENVIRONMENT:
        return ENV_METASTORE if name == "metastore" else ENV_WAREHOUSE
    return f"--{name}"


def _location_options(func: Callable[..., Any], *, envvars: bool) -> Callable[..., Any]:
    """``func`` with ``--metastore URL`` and ``--warehouse DIR`` (read from the environment when not given, if
    ``envvars``)."""
    with_options = click.option(
        "--warehouse",
        envvar=ENV_WAREHOUSE if envvars else None,
        default=None,
        help="Warehouse root directory (or pyarrow.fs URI) holding the tables' files.  "
        f"[default: from {CONFIG_FILE}, else ./wh]",
    )(func)
    return click.option(
        "--metastore",
        envvar=ENV_METASTORE if envvars else None,
        default=None,
        help="Metastore URL: sqlite:///path.db, postgresql://... or a Hive Metastore's thrift://host:9083  [default: from "
        f"{CONFIG_FILE}, else sqlite under the warehouse]",
    )(with_options)


def root_options(func: F) -> F:
    """``--metastore``/``--warehouse`` before the command too (``acidstream --metastore URL show tables``): kept
    for the command, whose own options, after it, win when both are given. And the Hive Metastore's settings
    (``--kerberos-principal`` and the other ``[hive]`` keys), over the nearest ``acidstream.toml``'s."""

    @functools.wraps(func)
    def kept(*args: Any, metastore: str | None, warehouse: str | None, **kwargs: Any) -> Any:
        meta = click.get_current_context().meta
        meta[_BEFORE_KEY] = {"metastore": metastore, "warehouse": warehouse}
        meta[_HIVE_KEY] = {key: kwargs.pop(key) for key in _HIVE_KEYS if key not in SECRET_SETTINGS}
        return func(*args, **kwargs)

    return _hive_options(_location_options(kept, envvars=False))  # type: ignore[return-value]


def _hive_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` with an option per ``[hive]`` key (``--kerberos/--no-kerberos``, ``--kerberos-principal``...)."""
    for key, kind in reversed(_HIVE_KEYS.items()):
        if key in SECRET_SETTINGS:  # a file's [hive] only: other users see a process's arguments
            continue
        flag = "--" + key.replace("_", "-")
        declaration = f"{flag}/--no-{flag[2:]}" if kind is bool else flag
        func = click.option(declaration, key, default=None, help=_HIVE_HELP[key])(func)
    return func


#: Key of the ``[hive]`` settings given on the command line in ``click.Context.meta``.
_HIVE_KEY = "acidstream.hive"


def hive_settings() -> dict[str, Any]:
    """``Metastore.connect``'s options for a Hive Metastore: the nearest ``acidstream.toml``'s ``[hive]``, then
    the command line's options over them (a keytab's path made absolute against the current directory)."""
    config = find_config(os.getcwd())
    settings = dict(read_config(config).hive) if config else {}
    ctx = click.get_current_context(silent=True)
    given = ctx.find_root().meta.get(_HIVE_KEY, {}) if ctx is not None else {}
    for key, value in given.items():
        if value is not None:
            settings[key] = (
                _absolute(value, os.getcwd()) if key in ("kerberos_keytab", "ssl_ca_file") else value
            )
    return settings


#: Key of the values of ``--metastore``/``--warehouse`` given before the command in ``click.Context.meta``.
_BEFORE_KEY = "acidstream.before-command"


def metastore_options(func: F) -> F:
    """Add ``--metastore URL`` and ``--warehouse DIR``; the command receives both resolved (never None).

    The resolved :class:`Location` is also kept in the context, so an error can say where the command looked.
    """

    @functools.wraps(func)
    def resolved(*args: Any, metastore: str | None, warehouse: str | None, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        given = {"metastore": metastore, "warehouse": warehouse}
        before = [
            name
            for name, value in ctx.meta.get(_BEFORE_KEY, {}).items()
            if value and ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE
        ]
        given.update({name: ctx.meta[_BEFORE_KEY][name] for name in before})
        location = resolve_location(ctx, given["metastore"], given["warehouse"], before)
        ctx.meta[LOCATION_KEY] = location
        with _stores_configured(location):
            return func(*args, metastore=location.metastore, warehouse=location.warehouse, **kwargs)

    return _location_options(resolved, envvars=True)  # type: ignore[return-value]  # same signature for click


def open_metastore(metastore: str, warehouse: str, *, create: bool = False, **kwargs: Any) -> Metastore:
    """Connect to the metastore; unless ``create``, only to an existing one, so reading leaves nothing behind
    (``Metastore.connect(create=False)``). A Hive Metastore (``thrift://``) always exists and knows where its
    tables live: ``warehouse`` is not used, and :func:`hive_settings` are.

    The database layer loads here, not at import: ``acidstream --help`` stays quick.
    """
    from acidstream.catalog import Metastore

    kind = backend_kind(metastore)
    kind.opener(metastore)  # a URL naming no metastore fails here; the backend loads now
    options = hive_settings() if kind.knows_locations else {"warehouse": warehouse}
    with _said_when_slow(metastore):
        try:
            return Metastore.connect(metastore, create=create, **{**options, **kwargs})
        except NoSuchObjectException as exc:
            if create:
                raise
            exc.add_note(
                "create one with `acidstream metastore init`, or point at another with --metastore/--warehouse, "
                f"{ENV_METASTORE}/{ENV_WAREHOUSE} or an {CONFIG_FILE} (`acidstream --help`)"
            )
            raise


@contextlib.contextmanager
def _said_when_slow(url: str) -> Iterator[None]:
    """Connecting retries an unreachable server until its wait timeout, silently: after :data:`SLOW_CONNECT`
    seconds, say on stderr what the command is waiting for. Not for a SQLite file, which is no server: what
    takes time there is the machine's load (a busy 2-core machine took over a second to open one)."""
    if scheme(url) == "sqlite":
        yield
        return
    timer = threading.Timer(
        SLOW_CONNECT,
        lambda: click.echo(f"waiting for the metastore at {shown_url(url)} to answer...", err=True),
    )
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
